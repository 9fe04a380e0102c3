//===- ModelName.h - the name a plan is served under ------------*- C++ -*-===//
//
// moe-serve answers to the plan directory's name unless --model-name says
// otherwise, and moe-bench --url sends the same name: one function, so that
// the two agree on "plan", "plan/" and "./plan/." alike.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_MODELNAME_H
#define MOE_TOOLS_COMMON_MODELNAME_H

#include <filesystem>
#include <string>

namespace moe::tools {

/// The plan directory's own name (its last component, trailing separators
/// and dots aside).
inline std::string planModelName(const std::string &planDir) {
  std::filesystem::path p = std::filesystem::absolute(planDir).lexically_normal();
  if (p.filename().empty()) // "plan/" normalises to ".../plan/"
    p = p.parent_path();
  return p.filename().string();
}

} // namespace moe::tools

#endif
