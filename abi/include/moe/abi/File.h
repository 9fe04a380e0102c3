//===- File.h - the one checked way to open input and output files -*- C++ -*-===//
//
// Every file a tool or the compiler reads or writes goes through here, so
// that a directory, a FIFO, a device, an unreadable file or a file that
// changes size while it is read gets one line naming the path, and nothing
// blocks: inputs are opened non-blocking and must be regular files.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_FILE_H
#define MOE_RUNTIME_FILE_H

#include "moe/abi/Status.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace moe::rt {

/// An open regular file, read in parts (pread); closes itself.
class InputFile {
public:
  /// Opens `path` if it is a regular file the process may read.
  static Expected<InputFile> open(const std::string &path);
  InputFile(InputFile &&other) noexcept;
  InputFile &operator=(InputFile &&other) noexcept;
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  /// Size when opened.
  uint64_t size() const { return size_; }
  const std::string &path() const { return path_; }
  /// Reads exactly `bytes` at `offset`; an error when the file ends first.
  Status readAt(uint64_t offset, void *out, size_t bytes) const;

private:
  InputFile(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

/// Whether process `pid` (> 0) still runs: what it left beside a file it
/// was writing (a staged output, a staging directory) is live.
bool processRunning(long pid);

/// The whole of regular file `path`; an error when it is larger than
/// `maxBytes` or its size changes while it is read.
Expected<std::string> readFile(const std::string &path, uint64_t maxBytes = uint64_t(1) << 32);

/// An output file: `-` is standard output. A regular file (or a new one) is
/// written beside it and renamed into place by close(), so that a run that
/// fails or is interrupted leaves the old file whole, and a file this
/// process reads (an input, a mapped plan) is never replaced by its own
/// output: that is refused, at create() or at close(). Without close() the
/// staged bytes are discarded. A device or a FIFO with a reader is written
/// directly; a directory is refused, and so is a FIFO nobody reads (it
/// would block forever).
class OutputFile {
public:
  /// `updatesInput`: the file is meant to replace what this process read
  /// from it (a history it adds to).
  static Expected<OutputFile> create(const std::string &path, bool updatesInput = false);
  OutputFile(OutputFile &&other) noexcept;
  OutputFile &operator=(OutputFile &&other) noexcept;
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile();

  std::FILE *stream() const { return stream_; }
  const std::string &path() const { return path_; }
  bool isStdout() const { return path_ == "-"; }
  Status write(const void *data, size_t bytes);
  Status write(const std::string &text) { return write(text.data(), text.size()); }
  /// Flushes, closes and moves a staged file into place: the only place a
  /// full disk shows up.
  Status close();

private:
  /// Closes without moving the staged file into place (and removes it).
  void discard();
  OutputFile(std::FILE *stream, std::string path, std::string staged, bool updatesInput)
      : stream_(stream), path_(std::move(path)), staged_(std::move(staged)),
        updatesInput_(updatesInput) {}
  std::FILE *stream_ = nullptr;
  std::string path_;
  std::string staged_; ///< the file written until close() renames it to path_, or empty
  bool updatesInput_ = false;
};

} // namespace moe::rt

#endif
