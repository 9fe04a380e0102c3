//===- MappedFiles.h - a mapped file cut short: an error -------*- C++ -*-===//
//
// Plans' weights (and the checkpoints moe-compile packs) are read through
// memory maps. If another process truncates such a file while it is mapped,
// touching the lost pages raises SIGBUS, which would kill the tool with no
// word. The tools replace plans atomically and never truncate one, but a
// hand-made `truncate`, `cp` over the file, or a full disk during a copy
// elsewhere can: the tool then says so in one line and exits 1.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_MAPPEDFILES_H
#define MOE_TOOLS_COMMON_MAPPEDFILES_H

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace moe::tools {

namespace detail {
inline char busMessage[256];
inline size_t busMessageLength = 0;
inline void onBusError(int) {
  // Only async-signal-safe calls here.
  ssize_t ignored = ::write(STDERR_FILENO, busMessage, busMessageLength);
  (void)ignored;
  ::_exit(1);
}
} // namespace detail

/// Turns SIGBUS (a mapped file cut short under the process) into
/// "<tool>: error: ..." and exit code 1.
inline void reportTruncatedMappings(const std::string &tool) {
  const std::string message =
      tool + ": error: a mapped file (plan weights or checkpoint) was truncated while in use "
             "(SIGBUS); it was changed under this process: rerun once it is whole\n";
  detail::busMessageLength = std::min(message.size(), sizeof detail::busMessage);
  std::memcpy(detail::busMessage, message.data(), detail::busMessageLength);
  struct sigaction sa = {};
  sa.sa_handler = detail::onBusError;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
}

} // namespace moe::tools

#endif
