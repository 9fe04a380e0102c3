//===- Version.h - which build this is --------------------------*- C++ -*-===//
#ifndef MOE_RUNTIME_VERSION_H
#define MOE_RUNTIME_VERSION_H

namespace moe::rt {

/// The project version (CMake's project VERSION), e.g. "0.1.0".
const char *version();
/// `git describe` of the source tree it was built from ("-dirty" when it
/// had uncommitted changes), or "unknown" outside a git checkout.
const char *gitCommit();

} // namespace moe::rt

#endif
