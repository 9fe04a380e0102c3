//===- Registry.cpp - the backends this build has, by name ----------------===//
#include "moe/runtime/Registry.h"

#if MOE_WITH_CUDA
#include "runtime/backends/cuda/CudaDevice.h"
#endif

namespace moe::rt {

namespace {

struct Backend {
  const char *name, *description;
  /// "" when it can run here, else why not.
  std::string (*unavailable)();
  Expected<std::unique_ptr<Device>> (*create)(const DeviceOptions &);
};

const Backend kBackends[] = {
    {"cpu", "the host CPU: kernels/cpu on one thread pool, streams on worker threads",
     [] { return std::string(); },
     [](const DeviceOptions &o) -> Expected<std::unique_ptr<Device>> {
       return createCpuDevice(CpuDeviceOptions{o.threads});
     }},
#if MOE_WITH_CUDA
    {"cuda", "the first visible NVIDIA GPU: kernels/cuda on CUDA streams (docs/design-cuda.md)",
     cudaUnavailable, [](const DeviceOptions &) { return createCudaDevice(); }},
#endif
};

} // namespace

std::vector<BackendInfo> listBackends() {
  std::vector<BackendInfo> out;
  for (const Backend &b : kBackends)
    out.push_back({b.name, b.description, b.unavailable()});
  return out;
}

Expected<std::unique_ptr<Device>> createDevice(const std::string &name,
                                               const DeviceOptions &options) {
  std::string names;
  for (const Backend &b : kBackends) {
    if (name == b.name) {
      if (std::string why = b.unavailable(); !why.empty())
        return Status::error("device '" + name + "' cannot run here: " + why);
      return b.create(options);
    }
    names += std::string(names.empty() ? "" : ", ") + b.name;
  }
  return Status::error("unknown device '" + name + "'; this build has: " + names +
                       " (see --list-devices)");
}

} // namespace moe::rt
