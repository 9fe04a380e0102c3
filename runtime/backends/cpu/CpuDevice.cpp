//===- CpuDevice.cpp - the CPU backend ------------------------------------===//
//
// Streams and events: CpuStreams.h (stream 0 on the calling thread, the
// others on worker threads); kernels share kernels/cpu's thread pool. Kernels come from
// kernels/cpu; weights may be f32, bf16 or f16, and those of matrix
// products and the embedding table also int8, int4 or fp8 with scales; int8
// and int4 weights of linear, router and experts may be W8A8 and W4A8 (int8
// activations), and an embedding table tied to such an LM head.
//
//===----------------------------------------------------------------------===//
#include "CpuStreams.h"
#include "runtime/backends/StreamTable.h"
#include "moe/runtime/Hal.h"
#include "kernels/cpu/Attention.h"
#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/ThreadPool.h"

#include <algorithm>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <new>
#include <vector>

namespace moe::rt {

namespace {

namespace k = moe::cpu;

bool isFloatWeight(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

k::Weight weightOf(const TensorView &v) {
  k::Weight w;
  w.data = v.data;
  switch (v.dtype) {
  case DType::BF16: w.type = k::WeightType::BF16; break;
  case DType::F16: w.type = k::WeightType::F16; break;
  case DType::I8: w.type = k::WeightType::I8; break;
  case DType::I4: w.type = k::WeightType::I4; break;
  case DType::F8E4M3: w.type = k::WeightType::F8; break;
  default: w.type = k::WeightType::F32; break;
  }
  if (w.quantized()) {
    w.scales = v.scales;
    w.cols = v.cols();
    w.group = v.group;
    w.rowGroup = v.rowGroup;
    // W8A8 and W4A8: the loader allows it on I8 row scales and on I4 groups
    // starting at multiples of 128 only (what the kernels take).
    w.int8Activations = v.int8Activations;
  }
  if (v.panels) // the loader allows it on F32, BF16, F16 matrices of whole panels only
    w.panelCols = v.cols();
  return w;
}

float *f32(const TensorView &v) { return static_cast<float *>(v.data); }
int32_t *i32(const TensorView &v) { return static_cast<int32_t *>(v.data); }

k::KvCache cacheOf(const KernelCall &call) {
  const KvLayerView &kv = *call.kv;
  k::KvCache c;
  c.k = {kv.k, kv.kScales, kv.kWidth, kv.heads};
  c.v = {kv.v, kv.vScales, kv.vWidth, kv.heads};
  c.type = kv.dtype == DType::BF16     ? k::KvType::BF16
           : kv.dtype == DType::I8     ? k::KvType::Int8
           : kv.dtype == DType::F8E4M3 ? k::KvType::Fp8E4M3
                                       : k::KvType::F32;
  c.blockSize = kv.blockSize;
  c.tables = i32(call.blockTables);
  c.tableStride = call.blockTables.cols();
  return c;
}

/// The stacked expert weights from input `at` on (gate, up, down or, fused,
/// gate_up, down); `gateUp` holds the fused one.
k::ExpertWeights expertWeights(const ExpertsParams &p, const std::vector<TensorView> &in,
                               size_t at, k::Weight &gateUp) {
  k::ExpertWeights w;
  w.shared = p.numShared;
  w.grouped = p.grouped;
  if (p.fusedGateUp) {
    gateUp = weightOf(in[at]);
    w.gateUp = &gateUp;
    w.down = weightOf(in[at + 1]);
  } else {
    w.gate = weightOf(in[at]);
    w.up = weightOf(in[at + 1]);
    w.down = weightOf(in[at + 2]);
  }
  return w;
}

/// Ids in [0, bound): a router or dispatch wrote them (or another rank sent
/// them), but the loader cannot prove that nothing overwrote them since
/// (arena buffers may share bytes), so each is checked before it indexes.
Status inRange(const TensorView &ids, int64_t bound, const char *kernel, const char *what,
               int64_t n = -1) {
  const int32_t *p = i32(ids);
  if (n < 0)
    n = ids.rows() * ids.cols();
  for (int64_t i = 0; i < n; ++i)
    if (p[i] < 0 || p[i] >= bound)
      return Status::error(std::string(kernel) + ": " + what + " " + std::to_string(p[i]) +
                           " is outside [0, " + std::to_string(bound) +
                           ") (a corrupt plan: another op overwrote it)");
  return Status::ok();
}

} // namespace

Status cpu_backend::runKernel(const KernelCall &call) {
  const auto &in = call.inputs;
  const TensorView &out = call.outputs[0];
  switch (call.kernel) {
  case Kernel::Embedding:
    k::embedding(i32(in[0]), in[0].rows(), weightOf(in[1]), in[1].cols(), f32(out));
    return Status::ok();
  case Kernel::RmsNorm:
    k::rmsNorm(f32(in[0]), in[0].rows(), in[0].cols(), weightOf(in[1]),
               std::get<RmsNormParams>(call.params).eps, f32(out));
    return Status::ok();
  case Kernel::AddRmsNorm:
    k::addRmsNorm(f32(in[0]), f32(in[1]), in[0].rows(), in[0].cols(), weightOf(in[2]),
                  std::get<RmsNormParams>(call.params).eps, f32(out), f32(call.outputs[1]));
    return Status::ok();
  case Kernel::Linear: {
    k::Weight bias = in.size() > 2 ? weightOf(in[2]) : k::Weight();
    k::linear(f32(in[0]), in[0].rows(), in[0].cols(), weightOf(in[1]), in[1].rows(),
              in.size() > 2 ? &bias : nullptr, f32(out));
    return Status::ok();
  }
  case Kernel::Add:
    k::add(f32(in[0]), f32(in[1]), in[0].rows() * in[0].cols(), f32(out));
    return Status::ok();
  case Kernel::SiluMul:
    k::siluMul(f32(in[0]), f32(in[1]), in[0].rows(), in[0].cols(), in[0].cols(),
               f32(out));
    return Status::ok();
  case Kernel::SigmoidGate:
    k::sigmoidGate(f32(in[0]), weightOf(in[1]), f32(in[2]), in[0].rows(),
                   in[0].cols(), f32(out));
    return Status::ok();
  case Kernel::Attention: {
    k::Weight qn, kn;
    bool norm = in.size() == 6;
    if (norm) {
      qn = weightOf(in[4]);
      kn = weightOf(in[5]);
    }
    k::KvCache cache = cacheOf(call);
    k::gqaAttention(f32(in[0]), f32(in[1]), f32(in[2]), i32(in[3]), in[0].rows(),
                    norm ? &qn : nullptr, norm ? &kn : nullptr,
                    std::get<AttentionParams>(call.params), cache, f32(out));
    return Status::ok();
  }
  case Kernel::MlaAttention: {
    k::KvCache cache = cacheOf(call);
    k::mlaAttention(f32(in[0]), f32(in[1]), weightOf(in[2]), weightOf(in[3]),
                    i32(in[4]), in[0].rows(), std::get<MlaParams>(call.params), cache, f32(out));
    return Status::ok();
  }
  case Kernel::Router: {
    k::Weight bias = in.size() > 2 ? weightOf(in[2]) : k::Weight();
    k::router(f32(in[0]), in[0].rows(), in[0].cols(), weightOf(in[1]),
              in.size() > 2 ? &bias : nullptr, std::get<RouterParams>(call.params),
              f32(call.outputs[0]), i32(call.outputs[1]));
    return Status::ok();
  }
  case Kernel::Experts: {
    const ExpertsParams &p = std::get<ExpertsParams>(call.params);
    k::Weight gateUp;
    const k::ExpertWeights w = expertWeights(p, in, 3, gateUp);
    if (Status st = inRange(in[2], p.numExperts, "experts", "routing index"); !st)
      return st;
    k::experts(f32(in[0]), in[0].rows(), in[0].cols(), p.intermediate, p.numExperts,
               f32(in[1]), i32(in[2]), in[1].cols(), w, f32(out));
    return Status::ok();
  }
  case Kernel::Dispatch: {
    const DispatchParams &p = std::get<DispatchParams>(call.params);
    if (Status st = inRange(in[1], p.numExperts, "dispatch", "routing index"); !st)
      return st;
    k::dispatch(f32(in[0]), in[0].rows(), in[0].cols(), i32(in[1]), in[1].cols(),
                p.numExperts, p.numShared, f32(out), i32(call.outputs[1]),
                i32(call.outputs[2]));
    return Status::ok();
  }
  case Kernel::ExpertRows: {
    const ExpertsParams &p = std::get<ExpertsParams>(call.params);
    k::Weight gateUp;
    const k::ExpertWeights w = expertWeights(p, in, 2, gateUp);
    const int64_t stacks = p.numExperts + p.numShared; // this launch's
    // Rows received from other ranks are packed from the front: a slot of
    // -1 ends them (the rest of the buffer holds no rows).
    const int32_t *slots = i32(in[1]);
    const int64_t count = std::find(slots, slots + in[1].rows() * in[1].cols(), -1) - slots;
    if (Status st = inRange(in[1], p.stacked ? p.stacked : stacks, "expert_rows", "slot", count);
        !st)
      return st;
    k::expertRows(f32(in[0]), slots, count, in[0].cols(), p.intermediate, w, stacks,
                  expertShare(p), f32(out));
    return Status::ok();
  }
  case Kernel::Combine: {
    const int64_t rows = in[0].rows() * in[0].shape[1], topK = in[2].cols();
    if (Status st = inRange(in[1], rows, "combine", "row"); !st)
      return st;
    k::combine(f32(in[0]), i32(in[1]), f32(in[2]), i32(in[3]), in[2].rows(), topK,
               in[1].cols() - topK, in[0].cols(), f32(out));
    return Status::ok();
  }
  }
  return Status::error("cpu backend: unknown kernel " +
                       std::to_string(static_cast<int>(call.kernel)));
}

namespace {

using namespace cpu_backend;

/// Buffers of this size and more start on a huge-page boundary, so that
/// makeResident can put all of them on transparent huge pages.
constexpr size_t kHugePageBytes = size_t(2) << 20;

void *allocateHost(size_t bytes) {
  if (bytes < kHugePageBytes)
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  return std::aligned_alloc(kHugePageBytes,
                            (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes);
}

/// CPU memory is host memory, whatever its kind; DeviceLocal buffers just
/// do not offer host() (code above the HAL must copy, as on a GPU).
class HostBuffer final : public Buffer {
public:
  HostBuffer(void *data, size_t size, MemoryKind kind, bool owned)
      : data_(data), size_(size), kind_(kind), owned_(owned) {}
  ~HostBuffer() override {
    if (owned_)
      std::free(data_);
  }
  void *data() override { return data_; }
  void *host() override { return kind_ == MemoryKind::HostVisible ? data_ : nullptr; }
  size_t size() const override { return size_; }
  MemoryKind kind() const override { return kind_; }

private:
  void *data_;
  size_t size_;
  MemoryKind kind_;
  bool owned_;
};

class CpuDevice final : public Device {
public:
  explicit CpuDevice(const CpuDeviceOptions &options) {
    if (options.threads > 0) // the process's kernel threads (one pool)
      cpu::setKernelThreads(options.threads);
  }
  std::string name() const override { return "cpu"; }
  uint64_t memoryBytes() const override {
    return uint64_t(::sysconf(_SC_PHYS_PAGES)) * uint64_t(::sysconf(_SC_PAGE_SIZE));
  }
  bool supports(Kernel kernel, DType weightType) const override {
    const bool matrixOp = kernel == Kernel::Embedding || kernel == Kernel::Linear ||
                          kernel == Kernel::Router || kernel == Kernel::Experts ||
                          kernel == Kernel::ExpertRows ||
                          kernel == Kernel::MlaAttention; // kv_b
    return isFloatWeight(weightType) ||
           (matrixOp &&
            (weightType == DType::I8 || weightType == DType::I4 || weightType == DType::F8E4M3));
  }
  bool readsWeights(WeightForm) const override { return true; } // LinearPanels, at(); LinearInt8
  bool supportsKvCache(DType kvType) const override {
    return kvType == DType::F32 || kvType == DType::BF16 || kvType == DType::I8 ||
           kvType == DType::F8E4M3;
  }
  Expected<std::unique_ptr<Buffer>> allocate(size_t bytes, MemoryKind kind) override {
    void *p = allocateHost(bytes);
    if (!p && bytes)
      return Status::error("cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    return std::unique_ptr<Buffer>(new HostBuffer(p, bytes, kind, true));
  }
  // Left to fault in at first touch, the KV rows a decode step stores cost
  // a batch of 64 up to a third of its attention time (docs/performance.md).
  Status makeResident(Buffer &buffer, size_t offset, size_t bytes) override {
    if (offset > buffer.size() || bytes > buffer.size() - offset)
      return Status::error("makeResident: bytes [" + std::to_string(offset) + ", " +
                           std::to_string(offset + bytes) + ") outside a buffer of " +
                           std::to_string(buffer.size()));
    // The pages the range touches (what they hold besides it is unchanged).
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    const uintptr_t whole = reinterpret_cast<uintptr_t>(buffer.data());
    const uintptr_t begin = whole + offset;
    const uintptr_t first = begin / page * page, end = (begin + bytes + page - 1) / page * page;
    if (end == first)
      return Status::ok();
    // Advice for the whole buffer, every time: the same flags over the same
    // range never split its mapping. The kernel may have huge pages off.
    const uintptr_t wholeFirst = whole / page * page;
    (void)::madvise(reinterpret_cast<void *>(wholeFirst),
                    (whole + buffer.size() + page - 1) / page * page - wholeFirst, MADV_HUGEPAGE);
    if (::madvise(reinterpret_cast<void *>(first), end - first, MADV_POPULATE_WRITE) == 0)
      return Status::ok();
    // Before Linux 5.14: write each page's first byte back to it, for the
    // pages wholly the range's (another thread may write the others).
    for (uintptr_t at = (begin + page - 1) / page * page; at + page <= begin + bytes;
         at += page) {
      volatile char *c = reinterpret_cast<char *>(at);
      *c = *c;
    }
    return Status::ok();
  }
  Expected<std::unique_ptr<Buffer>> importHost(const void *data, size_t bytes) override {
    // Used in place (zero copy): kernels read the mapped file.
    return std::unique_ptr<Buffer>(
        new HostBuffer(const_cast<void *>(data), bytes, MemoryKind::DeviceLocal, false));
  }
  Stream &stream(int index) override {
    return streams_.get(index, [](int i) {
      return i == 0 ? createCallerStream() : createWorkerStream(i);
    });
  }
  std::unique_ptr<Event> createEvent() override { return cpu_backend::createEvent(); }

private:
  StreamTable streams_;
};

} // namespace

std::unique_ptr<Device> createCpuDevice(const CpuDeviceOptions &options) {
  return std::make_unique<CpuDevice>(options);
}

} // namespace moe::rt
