//===- Hal.h - the hardware abstraction layer -------------------*- C++ -*-===//
//
// A backend is a Device (memory, streams, events, kernel dispatch); ranks talk
// through a Collective. Nothing above this header knows which hardware runs
// the plan: a new accelerator is a new Device that passes the same tests.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_HAL_H
#define MOE_RUNTIME_HAL_H

#include "moe/runtime/Status.h"
#include "runtime/schema/plan_generated.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace moe::rt {

/// A tensor as a kernel sees it: device memory, dtype and concrete shape
/// (the token dimension resolved for this call).
struct TensorView {
  void *data = nullptr;
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;
  /// Scaled (I8/I4/F8E4M3) weights: f32 scales, one per block of `rowGroup`
  /// rows by `group` elements of the last dimension (see plan.fbs).
  const float *scales = nullptr;
  int64_t group = 0, rowGroup = 1;
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
};

/// One layer of the paged KV cache: blocks of `blockSize` token rows of
/// k_width and v_width elements of `dtype` (F32, BF16, I8, F8E4M3); I8 and
/// F8E4M3 rows have one f32 scale per head in kScales/vScales.
struct KvLayerView {
  void *k = nullptr, *v = nullptr;
  float *kScales = nullptr, *vScales = nullptr;
  int64_t kWidth = 0, vWidth = 0, heads = 1, blockSize = 0;
  plan::DType dtype = plan::DType::F32;
};

/// One instruction, bound to memory.
struct KernelCall {
  const plan::Instruction *instruction = nullptr;
  std::vector<TensorView> inputs, outputs;
  KvLayerView *kv = nullptr; ///< attention ops only
  /// Per token of the batch: its sequence's block table (attention ops).
  const int32_t *const *blockTables = nullptr;
};

class Event {
public:
  virtual ~Event() = default;
  /// Blocks until the work recorded before this event has finished.
  virtual Status synchronize() = 0;
};

class Stream {
public:
  virtual ~Stream() = default;
  virtual Status launch(const KernelCall &call) = 0;
  /// Runs `work` on the host once the stream's earlier work has finished;
  /// the stream's later work waits for it (collectives over host
  /// libraries, such as MPI, run so). Its failure fails the stream.
  virtual Status enqueueHost(std::function<Status()> work) = 0;
  virtual Status record(Event &event) = 0;
  /// Work launched after this waits for `event`.
  virtual Status wait(Event &event) = 0;
  virtual Status synchronize() = 0;
};

class Device {
public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  /// Memory the plan may use on this device, in bytes.
  virtual uint64_t memoryBytes() const = 0;
  /// Whether this backend runs `op` with weights of `weightType`.
  virtual bool supports(plan::OpCode op, plan::DType weightType) const = 0;
  virtual Expected<std::shared_ptr<void>> allocate(size_t bytes) = 0;
  /// Copies between this device's memory and host memory (KV swap).
  virtual Status copyToHost(void *host, const void *device, size_t bytes) = 0;
  virtual Status copyFromHost(void *device, const void *host, size_t bytes) = 0;
  virtual Stream &stream(int index) = 0;
  virtual std::unique_ptr<Event> createEvent() = 0;
};

struct CpuDeviceOptions {
  /// Kernel threads of the process (one pool for every device and stream);
  /// 0: leave it as it is (one per core this process may run on).
  int threads = 0;
};
/// The CPU backend (kernels/cpu and their thread pool).
std::unique_ptr<Device> createCpuDevice(const CpuDeviceOptions &options = {});

} // namespace moe::rt

#endif
