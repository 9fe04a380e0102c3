//===- Hal.h - the hardware abstraction layer -------------------*- C++ -*-===//
//
// A backend is a Device (memory, streams, events, kernel dispatch); ranks talk
// through a Collective (Collective.h). Nothing above this header knows which
// hardware runs the plan, and nothing here knows the plan's file format: a
// new accelerator is a new Device that passes the same tests
// (docs/backends.md).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_HAL_H
#define MOE_RUNTIME_HAL_H

#include "moe/abi/KernelCall.h"
#include "moe/abi/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace moe::rt {

/// Where a buffer lives. DeviceLocal: kernels and copies use it, the host
/// does not touch it. HostVisible: also readable and writable by the host
/// (host()); inputs are staged and results come back through it.
enum class MemoryKind { DeviceLocal, HostVisible };

/// Memory of a device: from Device::allocate, or host memory it imported.
class Buffer {
public:
  virtual ~Buffer() = default;
  /// The address kernels take (TensorView::data points into it).
  virtual void *data() = 0;
  /// The host's view of a HostVisible buffer; null for DeviceLocal.
  virtual void *host() = 0;
  virtual size_t size() const = 0;
  virtual MemoryKind kind() const = 0;
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
  /// Copies `bytes` from `src` at `srcOffset` to `dst` at `dstOffset` in
  /// stream order, between any memory kinds; a range outside its buffer is
  /// an error (checked here for every backend).
  Status copy(Buffer &dst, size_t dstOffset, Buffer &src, size_t srcOffset, size_t bytes);
  virtual Status record(Event &event) = 0;
  /// Work launched after this waits for `event`.
  virtual Status wait(Event &event) = 0;
  virtual Status synchronize() = 0;

protected:
  virtual Status doCopy(Buffer &dst, size_t dstOffset, Buffer &src, size_t srcOffset,
                        size_t bytes) = 0;
};

class Device {
public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  /// Memory the plan may use on this device, in bytes.
  virtual uint64_t memoryBytes() const = 0;
  /// Whether this backend runs `kernel` with weights of `weightType`; a
  /// kernel without weights is asked with F32 (its f32 activations).
  virtual bool supports(Kernel kernel, DType weightType) const = 0;
  /// Whether its kernels read weights stored as `form` says: the matrix
  /// products (linear, router, experts, expert_rows), and for Panels8 the
  /// embedding lookup of a tied table too.
  virtual bool readsWeights(WeightForm form) const = 0;
  /// Whether its DeviceLocal memory is host memory, which a host collective
  /// (local, MPI) can move; false for a GPU's.
  virtual bool hostAddressable() const { return true; }
  /// Whether its attention kernels keep a KV cache of `kvType` (KvLayerView).
  virtual bool supportsKvCache(DType kvType) const = 0;
  /// `bytes` of `kind`, 64-byte aligned.
  virtual Expected<std::unique_ptr<Buffer>> allocate(size_t bytes, MemoryKind kind) = 0;
  /// Backs bytes [offset, offset + bytes) of `buffer` with memory now
  /// rather than at first touch: for memory that fills while requests run
  /// (a KV block as it is handed out), whose first touches would otherwise
  /// land inside their steps. Contents unchanged. The default does nothing
  /// (device memory is backed when allocated).
  virtual Status makeResident(Buffer &buffer, size_t offset, size_t bytes) {
    (void)buffer, (void)offset, (void)bytes;
    return Status::ok();
  }
  /// Device memory holding `bytes` of read-only host memory that outlives
  /// the buffer (a mapped weight file): the CPU backend uses it in place, a
  /// GPU backend uploads it.
  virtual Expected<std::unique_ptr<Buffer>> importHost(const void *data, size_t bytes) = 0;
  virtual Stream &stream(int index) = 0;
  virtual std::unique_ptr<Event> createEvent() = 0;
};

/// Whether this thread is a stream's own worker: it runs only what is
/// enqueued on one stream, beside the threads that compute (a host
/// collective there may raise its priority while it waits, so that its
/// wakeups preempt the computation it overlaps). False on the threads that
/// enqueue and compute: the main thread, a server's engine thread.
bool onStreamWorker();
/// Marks the calling thread as a stream's worker (backends call it first
/// thing in the thread).
void markStreamWorker();

struct CpuDeviceOptions {
  /// Kernel threads of the process (one pool for every device and stream);
  /// 0: leave it as it is (one per core this process may run on).
  int threads = 0;
};
/// The CPU backend (kernels/cpu and their thread pool).
std::unique_ptr<Device> createCpuDevice(const CpuDeviceOptions &options = {});

} // namespace moe::rt

#endif
