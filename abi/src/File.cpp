//===- File.cpp - the one checked way to open input and output files ------===//
#include "moe/abi/File.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio_ext.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

namespace moe::rt {
namespace {

std::string kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

Status errnoError(const std::string &path, const char *what) {
  return Status::error(path + ": " + what + " (" + std::strerror(errno) + ")");
}

/// The files this process has opened to read (device, inode): an output
/// must not replace one.
std::mutex inputsMutex;
std::set<std::pair<dev_t, ino_t>> &inputs() {
  static std::set<std::pair<dev_t, ino_t>> files;
  return files;
}

/// Why `path` must not be replaced by an output: it is one of our inputs.
Status notAnInput(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::ok();
  std::lock_guard<std::mutex> lock(inputsMutex);
  if (inputs().count({st.st_dev, st.st_ino}))
    return Status::error(path + ": is also an input of this run; refusing to overwrite it "
                                "(write the output elsewhere)");
  return Status::ok();
}

/// Staged outputs of `dir` + `name` that processes which no longer run
/// left behind (killed before close()): removed.
void removeAbandoned(const std::string &dir, const std::string &name) {
  DIR *d = ::opendir(dir.empty() ? "." : dir.c_str());
  if (!d)
    return;
  const std::string prefix = "." + name + ".moe-", suffix = ".partial";
  while (const dirent *e = ::readdir(d)) {
    const std::string file = e->d_name;
    if (file.size() <= prefix.size() + suffix.size() || file.rfind(prefix, 0) != 0 ||
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const long pid = std::strtol(file.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && !processRunning(pid))
      ::unlink((dir + file).c_str());
  }
  ::closedir(d);
}

/// A failed write to standard output, once reported: what could not be
/// written is dropped, so that the tools' exit check does not report it
/// again.
void forgetFailedStdout(std::FILE *s) {
  if (s != stdout)
    return;
  __fpurge(s);
  std::clearerr(s);
}

} // namespace

bool processRunning(long pid) {
  return pid > 0 && (::kill(pid_t(pid), 0) == 0 || errno == EPERM);
}

Expected<InputFile> InputFile::open(const std::string &path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    return Status::error(path + ": no such file");
  if (fd < 0)
    return errnoError(path, "cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = errnoError(path, "cannot stat");
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": is " + kindOf(st.st_mode) + ", expected a regular file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  {
    std::lock_guard<std::mutex> lock(inputsMutex);
    inputs().insert({st.st_dev, st.st_ino});
  }
  return InputFile(fd, uint64_t(st.st_size), path);
}

InputFile::InputFile(InputFile &&other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

InputFile &InputFile::operator=(InputFile &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

Status InputFile::readAt(uint64_t offset, void *out, size_t bytes) const {
  char *to = static_cast<char *>(out);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pread(fd_, to + done, bytes - done, off_t(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errnoError(path_, "cannot read");
    if (n == 0)
      return Status::error(path_ + ": ends at byte " + std::to_string(offset + done) +
                           ", expected at least " + std::to_string(offset + bytes) +
                           " (truncated, or changed while being read?)");
    done += size_t(n);
  }
  return Status::ok();
}

Expected<std::string> readFile(const std::string &path, uint64_t maxBytes) {
  auto file = InputFile::open(path);
  if (!file)
    return file.status();
  if (file->size() > maxBytes)
    return Status::error(path + ": " + std::to_string(file->size()) +
                         " bytes, more than the " + std::to_string(maxBytes) +
                         " this input may have");
  std::string bytes(size_t(file->size()), '\0');
  if (Status s = file->readAt(0, bytes.data(), bytes.size()); !s)
    return s;
  // One byte more must be end of file, and the size must still be the one
  // read: a file that grows or shrinks meanwhile is not read half old.
  char extra;
  ssize_t more = ::pread(file->fd(), &extra, 1, off_t(bytes.size()));
  if (more < 0)
    return errnoError(path, "cannot read");
  struct stat st;
  if (more != 0 || ::fstat(file->fd(), &st) != 0 || uint64_t(st.st_size) != file->size())
    return Status::error(path + ": changed size while being read (" +
                         std::to_string(file->size()) + " bytes when opened); read it again "
                         "once it is complete");
  return bytes;
}

Expected<OutputFile> OutputFile::create(const std::string &path, bool updatesInput) {
  if (path == "-")
    return OutputFile(stdout, path, "", false);
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return Status::error(path + ": is a directory, expected a file to write");
  if (Status s = updatesInput ? Status::ok() : notAnInput(path); !s)
    return s;
  // A regular file is staged beside its place (same directory: the rename
  // is atomic); anything else (a device, a FIFO) is written directly.
  std::string staged;
  if (!exists || S_ISREG(st.st_mode)) {
    static std::atomic<int> serial{0};
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
    removeAbandoned(dir, path.substr(dir.size()));
    staged = dir + "." + path.substr(dir.size()) + ".moe-" + std::to_string(::getpid()) + "-" +
             std::to_string(serial++) + ".partial";
  }
  const std::string &open = staged.empty() ? path : staged;
  // O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking.
  int fd = ::open(open.c_str(),
                  O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (staged.empty() ? 0 : O_EXCL),
                  0644);
  if (fd < 0 && errno == ENXIO)
    return Status::error(path + ": is a FIFO that nobody reads; cannot write to it");
  if (fd < 0)
    return errnoError(path, "cannot create");
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::FILE *stream = ::fdopen(fd, "wb");
  if (!stream) {
    Status s = errnoError(path, "cannot open");
    ::close(fd);
    if (!staged.empty())
      ::unlink(staged.c_str());
    return s;
  }
  return OutputFile(stream, path, staged, updatesInput);
}

OutputFile::OutputFile(OutputFile &&other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), path_(std::move(other.path_)),
      staged_(std::move(other.staged_)), updatesInput_(other.updatesInput_) {}

OutputFile &OutputFile::operator=(OutputFile &&other) noexcept {
  if (this != &other) {
    discard();
    stream_ = std::exchange(other.stream_, nullptr);
    path_ = std::move(other.path_);
    staged_ = std::move(other.staged_);
    updatesInput_ = other.updatesInput_;
  }
  return *this;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (!stream_)
    return;
  std::FILE *s = std::exchange(stream_, nullptr);
  if (s == stdout) {
    std::fflush(s);
    return;
  }
  std::fclose(s);
  if (!staged_.empty())
    ::unlink(staged_.c_str());
}

Status OutputFile::write(const void *data, size_t bytes) {
  if (!stream_)
    return Status::error(path_ + ": already closed");
  if (std::fwrite(data, 1, bytes, stream_) != bytes) {
    Status st = errnoError(isStdout() ? "standard output" : path_, "write failed");
    forgetFailedStdout(stream_);
    return st;
  }
  return Status::ok();
}

Status OutputFile::close() {
  if (!stream_)
    return Status::ok();
  std::FILE *s = std::exchange(stream_, nullptr);
  bool ok = std::fflush(s) == 0;
  if (s != stdout)
    ok = std::fclose(s) == 0 && ok;
  if (!ok) {
    Status st = errnoError(path_ == "-" ? "standard output" : path_, "write failed");
    if (!staged_.empty())
      ::unlink(staged_.c_str());
    forgetFailedStdout(s);
    return st;
  }
  if (staged_.empty())
    return Status::ok();
  // Inputs opened after create() are known only now.
  Status st = updatesInput_ ? Status::ok() : notAnInput(path_);
  if (st && std::rename(staged_.c_str(), path_.c_str()) != 0)
    st = errnoError(path_, "cannot move the output into place");
  if (!st)
    ::unlink(staged_.c_str());
  return st;
}

} // namespace moe::rt
