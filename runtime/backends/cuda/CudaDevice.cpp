//===- CudaDevice.cpp - the CUDA backend: memory and weight upload --------===//
//
// DeviceLocal buffers come from cudaMalloc: the session allocates its
// arena, KV cache and staging once, when it is created, so a stream-ordered
// pool would buy nothing yet. HostVisible buffers are pinned and mapped
// (cudaHostAlloc), so copies to and from them are asynchronous and
// kernels may read them. Weights (importHost) are uploaded once, through
// two pinned staging buffers, so that reading the next piece of the mapped
// file overlaps the copy of the last one (a copy from pageable memory
// would be synchronous and overlap nothing). Streams and events:
// CudaStreams.h.
//
//===----------------------------------------------------------------------===//
#include "CudaDevice.h"
#include "CudaError.h"
#include "CudaKernels.h"
#include "CudaStreams.h"
#include "runtime/backends/StreamTable.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

namespace moe::rt {

using cuda_backend::check;

namespace {

/// Kept back from the free memory at creation for what is not the plan's:
/// cuBLAS workspaces, kernel images, the runtime's own allocations.
constexpr uint64_t kReservedBytes = uint64_t(512) << 20;
/// Each of the two pinned buffers a weight upload goes through.
constexpr size_t kStagingBytes = size_t(64) << 20;

/// Device memory (cudaMalloc) or, with a host address, pinned host memory
/// mapped into the device's address space (cudaHostAlloc): the kind
/// follows from which it is.
class CudaBuffer final : public Buffer {
public:
  CudaBuffer(void *device, void *host, size_t size) : device_(device), host_(host), size_(size) {}
  ~CudaBuffer() override { (void)(host_ ? cudaFreeHost(host_) : cudaFree(device_)); }
  void *data() override { return device_; }
  void *host() override { return host_; }
  size_t size() const override { return size_; }
  MemoryKind kind() const override {
    return host_ ? MemoryKind::HostVisible : MemoryKind::DeviceLocal;
  }

private:
  void *device_, *host_;
  size_t size_;
};

Expected<std::unique_ptr<Buffer>> allocateDevice(size_t bytes) {
  void *p = nullptr;
  // At least one byte: every buffer has an address.
  if (Status st = check(cudaMalloc(&p, std::max<size_t>(bytes, 1)),
                        ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str());
      !st)
    return st;
  return std::unique_ptr<Buffer>(new CudaBuffer(p, nullptr, bytes));
}

Expected<std::unique_ptr<Buffer>> allocatePinned(size_t bytes) {
  void *host = nullptr, *device = nullptr;
  if (Status st = check(cudaHostAlloc(&host, std::max<size_t>(bytes, 1), cudaHostAllocMapped),
                        ("cudaHostAlloc of " + std::to_string(bytes) + " bytes").c_str());
      !st)
    return st;
  if (Status st = check(cudaHostGetDevicePointer(&device, host, 0), "cudaHostGetDevicePointer");
      !st) {
    (void)cudaFreeHost(host);
    return st;
  }
  return std::unique_ptr<Buffer>(new CudaBuffer(device, host, bytes));
}

/// Copies `bytes` of host memory at `src` to device memory at `dst`: each
/// piece is copied by the host into a pinned buffer while the device copies
/// the other buffer's piece on `stream`.
Status upload(void *dst, const uint8_t *src, size_t bytes, cudaStream_t stream) {
  const size_t piece = std::min(kStagingBytes, bytes);
  auto a = allocatePinned(piece), b = allocatePinned(piece);
  if (!a)
    return a.status();
  if (!b)
    return b.status();
  Buffer *staging[2] = {a->get(), b->get()};
  cudaEvent_t copied[2] = {nullptr, nullptr};
  Status st = Status::ok();
  for (cudaEvent_t &e : copied)
    if (st)
      st = check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  for (size_t offset = 0, i = 0; st && offset < bytes; offset += piece, ++i) {
    const size_t n = std::min(piece, bytes - offset), slot = i % 2;
    st = check(cudaEventSynchronize(copied[slot]), "cudaEventSynchronize"); // slot is free
    if (!st)
      break;
    std::memcpy(staging[slot]->host(), src + offset, n);
    st = check(cudaMemcpyAsync(static_cast<uint8_t *>(dst) + offset, staging[slot]->host(), n,
                               cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync (weight upload)");
    if (st)
      st = check(cudaEventRecord(copied[slot], stream), "cudaEventRecord");
  }
  Status done = check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (weight upload)");
  for (cudaEvent_t e : copied)
    if (e)
      (void)cudaEventDestroy(e);
  return st ? std::move(done) : std::move(st);
}

class CudaDevice final : public Device {
public:
  explicit CudaDevice(uint64_t memoryBytes) : memoryBytes_(memoryBytes) {}
  ~CudaDevice() override {
    streams_.clear(); // each waits for its work
    if (uploads_)
      (void)cudaStreamDestroy(uploads_);
  }
  std::string name() const override { return "cuda"; }
  bool hostAddressable() const override { return false; }
  uint64_t memoryBytes() const override { return memoryBytes_; }
  bool supports(Kernel kernel, DType weightType) const override {
    return cuda_backend::runsKernel(kernel, weightType);
  }
  bool readsWeights(WeightForm) const override { return false; } // rows, f32 activations
  bool supportsKvCache(DType kvType) const override {
    return cuda_backend::keepsKvCache(kvType);
  }
  Expected<std::unique_ptr<Buffer>> allocate(size_t bytes, MemoryKind kind) override {
    return kind == MemoryKind::HostVisible ? allocatePinned(bytes) : allocateDevice(bytes);
  }
  Expected<std::unique_ptr<Buffer>> importHost(const void *data, size_t bytes) override {
    auto buffer = allocateDevice(bytes);
    if (!buffer)
      return buffer;
    std::lock_guard<std::mutex> lock(uploadsMutex_);
    if (!uploads_)
      if (Status st = check(cudaStreamCreateWithFlags(&uploads_, cudaStreamNonBlocking),
                            "cudaStreamCreateWithFlags");
          !st)
        return st;
    if (Status st = upload((*buffer)->data(), static_cast<const uint8_t *>(data), bytes, uploads_);
        !st)
      return st;
    return buffer;
  }
  Stream &stream(int index) override {
    return streams_.get(index, [](int i) { return cuda_backend::createStream(i); });
  }
  std::unique_ptr<Event> createEvent() override { return cuda_backend::createEvent(); }

private:
  uint64_t memoryBytes_;
  StreamTable streams_;
  std::mutex uploadsMutex_;
  cudaStream_t uploads_ = nullptr; ///< weight uploads, created on first use
};

} // namespace

std::string cudaUnavailable() {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess)
    return std::string("no GPU (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")";
  if (count == 0)
    return "no GPU (cudaGetDeviceCount: none visible)";
  return "";
}

Expected<std::unique_ptr<Device>> createCudaDevice() {
  if (std::string why = cudaUnavailable(); !why.empty())
    return Status::error("device 'cuda' cannot run here: " + why);
  if (Status st = check(cudaSetDevice(0), "cudaSetDevice"); !st)
    return st;
  // Kernels take scratch from the stream-ordered pool (cudaMallocAsync):
  // keep what they free for the next step instead of giving it back to the
  // driver at every synchronisation.
  cudaMemPool_t pool = nullptr;
  uint64_t keep = UINT64_MAX;
  if (Status st = check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
      !st)
    return st;
  if (Status st = check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
                        "cudaMemPoolSetAttribute");
      !st)
    return st;
  size_t free = 0, total = 0;
  if (Status st = check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo"); !st)
    return st;
  const uint64_t usable = free > kReservedBytes ? free - kReservedBytes : 0;
  return std::unique_ptr<Device>(new CudaDevice(usable));
}

} // namespace moe::rt
