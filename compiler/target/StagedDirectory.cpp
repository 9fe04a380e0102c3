//===- StagedDirectory.cpp - replace a plan directory in one step ---------===//
#include "compiler/target/StagedDirectory.h"
#include "compiler/import/Safetensors.h"
#include "moe/abi/File.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;

namespace moe {
namespace {

[[noreturn]] void fail(const std::string &path, const std::string &what) {
  throw InputError(path + ": " + what);
}

std::string prefixOf(const fs::path &target) {
  return "." + target.filename().string() + ".moe-compile-";
}

/// Removes the staging directories of `target` whose process is gone.
void removeAbandoned(const fs::path &target) {
  const std::string prefix = prefixOf(target);
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(target.parent_path(), ec)) {
    std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (!rt::processRunning(pid))
      fs::remove_all(entry.path(), ec);
  }
}

void syncPath(const fs::path &path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(path.string(), std::string("cannot open to flush (") + std::strerror(errno) + ")");
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0)
    fail(path.string(), std::string("cannot flush to disk (") + std::strerror(err) + ")");
}

} // namespace

StagedDirectory::StagedDirectory(const std::string &target, const std::string &marker,
                                 const std::function<bool(const std::string &name)> &owns) {
  fs::path t = fs::absolute(fs::path(target)).lexically_normal();
  if (t.filename().empty())
    t = t.parent_path(); // "plan/" names "plan"
  target_ = t.string();
  std::error_code ec;
  fs::file_status st = fs::symlink_status(t, ec);
  if (fs::exists(st)) {
    // A link is not followed: the rename would replace the link itself.
    if (fs::is_symlink(st))
      fail(target_, "is a symbolic link; give -o the directory it points to (" +
                        fs::read_symlink(t, ec).string() + ")");
    if (!fs::is_directory(st))
      fail(target_, "exists and is not a directory; remove it or choose another -o");
    if (!fs::is_empty(t, ec) && !fs::exists(t / marker))
      fail(target_, "exists and holds no plan (no " + marker +
                        "); refusing to replace it: remove it or choose another -o");
    // The swap deletes the old directory whole: anything in it that is not
    // the plan (a routing profile, notes, a checkpoint) would go with it.
    std::vector<std::string> foreign;
    for (const auto &entry : fs::directory_iterator(t, ec))
      if (!owns(entry.path().filename().string()))
        foreign.push_back(entry.path().filename().string());
    if (ec)
      fail(target_, "cannot list (" + ec.message() + ")");
    if (!foreign.empty()) {
      std::sort(foreign.begin(), foreign.end());
      fail(target_, "holds '" + foreign.front() + "'" +
                        (foreign.size() > 1 ? " and " + std::to_string(foreign.size() - 1) +
                                                  " more entries"
                                            : std::string()) +
                        " besides its plan; replacing the plan would delete them: move them "
                        "out or choose another -o");
    }
  }
  fs::create_directories(t.parent_path(), ec);
  if (ec)
    fail(t.parent_path().string(), "cannot create (" + ec.message() + ")");
  removeAbandoned(t);
  static std::atomic<int> serial{0};
  staging_ = (t.parent_path() / (prefixOf(t) + std::to_string(::getpid()) + "-" +
                                 std::to_string(serial++)))
                 .string();
  if (!fs::create_directory(staging_, ec) || ec)
    fail(staging_, "cannot create the staging directory (" +
                       (ec ? ec.message() : std::string("it exists")) + ")");
}

StagedDirectory::~StagedDirectory() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);
  }
}

void StagedDirectory::commit() {
  for (const auto &entry : fs::directory_iterator(staging_))
    syncPath(entry.path(), false);
  syncPath(staging_, true);
  const fs::path target(target_);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(target, ec))) {
    if (::rename(staging_.c_str(), target_.c_str()) != 0)
      fail(target_, std::string("cannot move the new plan into place (") +
                        std::strerror(errno) + ")");
  } else if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(),
                         RENAME_EXCHANGE) == 0) {
    fs::remove_all(staging_, ec); // the old plan, now at the staging path
  } else if (errno == EINVAL || errno == ENOSYS) {
    // A file system without exchange: two renames, the old plan kept aside
    // until the new one is in place.
    std::string old = staging_ + "-old";
    if (::rename(target_.c_str(), old.c_str()) != 0)
      fail(target_, std::string("cannot move the old plan aside (") + std::strerror(errno) +
                        ")");
    if (::rename(staging_.c_str(), target_.c_str()) != 0) {
      int err = errno;
      ::rename(old.c_str(), target_.c_str());
      fail(target_, std::string("cannot move the new plan into place (") + std::strerror(err) +
                        ")");
    }
    fs::remove_all(old, ec);
  } else {
    fail(target_, std::string("cannot exchange the old plan for the new one (") +
                      std::strerror(errno) + ")");
  }
  committed_ = true;
  syncPath(target.parent_path(), true);
}

} // namespace moe
