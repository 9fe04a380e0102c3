//===- StagedDirectory.h - replace a plan directory in one step -*- C++ -*-===//
//
// A plan is written into a staging directory beside its target
// (`.<name>.moe-compile-<pid>-<n>`, same file system) and moved into place
// by one rename, which swaps it with the old plan when there is one. A
// reader that has the old plan's weights mapped keeps them (their files are
// unlinked, never truncated); an interrupted or failed compile leaves the
// old plan as it was, and the staging directory is removed (by this
// process, or, after SIGKILL, by the next compile of the same target).
// Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_TARGET_STAGEDDIRECTORY_H
#define MOE_COMPILER_TARGET_STAGEDDIRECTORY_H

#include <functional>
#include <string>

namespace moe {

class StagedDirectory {
public:
  /// Refuses `target` if it exists and is not an empty directory or one
  /// holding `marker` (a plan's file) and nothing but what `owns` names
  /// (the plan's files): replacing it would delete something that is not
  /// the plan. Removes what compiles of `target` by processes that no
  /// longer run left behind, then creates the staging directory. Throws
  /// InputError.
  StagedDirectory(const std::string &target, const std::string &marker,
                  const std::function<bool(const std::string &name)> &owns);
  /// Removes the staging directory unless commit() moved it into place.
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory &) = delete;
  StagedDirectory &operator=(const StagedDirectory &) = delete;

  /// Where to write the new directory's files.
  const std::string &path() const { return staging_; }
  /// Flushes every file to disk, then moves the staging directory to the
  /// target in one rename (exchanging it with the old one, which is then
  /// removed). Throws InputError; the old directory is then still in place.
  void commit();

private:
  std::string target_, staging_;
  bool committed_ = false;
};

} // namespace moe

#endif
