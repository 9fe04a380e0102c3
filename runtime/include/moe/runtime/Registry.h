//===- Registry.h - the backends this build has, by name --------*- C++ -*-===//
//
// Tools pick a backend with `--device NAME` and list them with
// `--list-devices`; a new backend (CUDA, another vendor's GPU) adds one row
// to the table in runtime/src/Registry.cpp and nothing above the HAL
// changes.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_REGISTRY_H
#define MOE_RUNTIME_REGISTRY_H

#include "moe/runtime/Hal.h"

#include <string>
#include <vector>

namespace moe::rt {

/// What every backend is created with.
struct DeviceOptions {
  /// Host threads for kernels (the CPU backend's pool); 0: one per core.
  int threads = 0;
};

/// A backend compiled into this build.
struct BackendInfo {
  std::string name;        ///< what --device takes: "cpu"
  std::string description; ///< one line: what it runs on
  /// Empty when a device can be created here, else why not ("no GPU").
  std::string unavailable;
};

/// Every backend of this build, the default ("cpu") first.
std::vector<BackendInfo> listBackends();

/// A device of backend `name`; an error naming the backends there are, or
/// why this one cannot run here.
Expected<std::unique_ptr<Device>> createDevice(const std::string &name,
                                               const DeviceOptions &options = {});

} // namespace moe::rt

#endif
