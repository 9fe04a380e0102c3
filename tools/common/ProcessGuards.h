//===- ProcessGuards.h - failures outside the code path: one line -*- C++ -*-===//
//
// Two ways a tool could end badly without a word, each turned into the
// tools' one error line and exit code 1 (Cli installs both):
// - Plans' weights (and the checkpoints moe-compile packs) are read through
//   memory maps. If another process truncates such a file while it is
//   mapped, touching the lost pages raises SIGBUS. The tools replace plans
//   atomically and never truncate one, but a hand-made `truncate` or `cp`
//   over the file can.
// - What a tool prints to standard output is buffered; a full disk or a
//   closed file behind it shows only when the buffer is flushed at exit,
//   after main has returned 0.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_PROCESSGUARDS_H
#define MOE_TOOLS_COMMON_PROCESSGUARDS_H

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace moe::tools {

namespace detail {
inline char busMessage[256];
inline size_t busMessageLength = 0;
inline std::string toolName;
inline std::atomic_flag busReported = ATOMIC_FLAG_INIT;
inline void onBusError(int) {
  // Only async-signal-safe calls here (a lock-free atomic flag is one).
  // Several threads reading the lost pages (the caller and a kernel helper)
  // take the signal at once: the first writes the line and ends the
  // process, the others wait for that without writing it again.
  if (busReported.test_and_set())
    for (;;)
      ::pause();
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

/// At exit, a failed write to standard output (a full disk, a closed
/// file) becomes "<tool>: error: standard output: ..." and exit code 1.
inline void reportLostStdout(const std::string &tool) {
  detail::toolName = tool;
  std::atexit([] {
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "%s: error: standard output: write failed (%s)\n",
                   detail::toolName.c_str(), std::strerror(errno));
      std::_Exit(1);
    }
  });
}

} // namespace moe::tools

#endif
