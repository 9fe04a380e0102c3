//===- CpuDevice.cpp - the CPU backend ------------------------------------===//
//
// Streams and events: CpuStreams.h (stream 0 on the calling thread, the
// others on worker threads); kernels share kernels/cpu's thread pool. Kernels come from
// kernels/cpu; weights may be f32, bf16 or f16, and those of matrix
// products and the embedding table also int8, int4 or fp8 with scales.
//
//===----------------------------------------------------------------------===//
#include "CpuStreams.h"
#include "moe/runtime/Hal.h"
#include "kernels/cpu/Attention.h"
#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/ThreadPool.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace moe::rt {

namespace {

namespace k = moe::cpu;

bool isFloatWeight(plan::DType t) {
  return t == plan::DType::F32 || t == plan::DType::BF16 || t == plan::DType::F16;
}

k::Weight weightOf(const TensorView &v) {
  k::Weight w;
  w.data = v.data;
  switch (v.dtype) {
  case plan::DType::BF16: w.type = k::WeightType::BF16; break;
  case plan::DType::F16: w.type = k::WeightType::F16; break;
  case plan::DType::I8: w.type = k::WeightType::I8; break;
  case plan::DType::I4: w.type = k::WeightType::I4; break;
  case plan::DType::F8E4M3: w.type = k::WeightType::F8; break;
  default: w.type = k::WeightType::F32; break;
  }
  if (w.quantized()) {
    w.scales = v.scales;
    w.cols = v.cols();
    w.group = v.group;
    w.rowGroup = v.rowGroup;
  }
  return w;
}

float *f32(const TensorView &v) { return static_cast<float *>(v.data); }
int32_t *i32(const TensorView &v) { return static_cast<int32_t *>(v.data); }

k::Rope ropeOf(const plan::Rope *r) {
  return {r->inv_freq()->data(), static_cast<int64_t>(r->inv_freq()->size()),
          r->attention_factor(), r->interleaved()};
}

k::KvCache cacheOf(const KernelCall &call) {
  const KvLayerView &kv = *call.kv;
  k::KvCache c;
  c.k = {kv.k, kv.kScales, kv.kWidth, kv.heads};
  c.v = {kv.v, kv.vScales, kv.vWidth, kv.heads};
  c.type = kv.dtype == plan::DType::BF16     ? k::KvType::BF16
           : kv.dtype == plan::DType::I8     ? k::KvType::Int8
           : kv.dtype == plan::DType::F8E4M3 ? k::KvType::Fp8E4M3
                                             : k::KvType::F32;
  c.blockSize = kv.blockSize;
  c.tables = call.blockTables;
  return c;
}

} // namespace

Status cpu_backend::runKernel(const KernelCall &call) {
  const plan::Instruction &inst = *call.instruction;
  const auto &in = call.inputs;
  const TensorView &out = call.outputs[0];
  switch (inst.op()) {
  case plan::OpCode::Embedding:
    k::embedding(i32(in[0]), in[0].rows(), weightOf(in[1]), in[1].cols(), f32(out));
    return Status::ok();
  case plan::OpCode::RmsNorm:
    k::rmsNorm(f32(in[0]), in[0].rows(), in[0].cols(), weightOf(in[1]),
               inst.params_as_RmsNormParams()->eps(), f32(out));
    return Status::ok();
  case plan::OpCode::AddRmsNorm:
    k::addRmsNorm(f32(in[0]), f32(in[1]), in[0].rows(), in[0].cols(), weightOf(in[2]),
                  inst.params_as_RmsNormParams()->eps(), f32(out), f32(call.outputs[1]));
    return Status::ok();
  case plan::OpCode::Linear: {
    k::Weight bias = in.size() > 2 ? weightOf(in[2]) : k::Weight();
    k::linear(f32(in[0]), in[0].rows(), in[0].cols(), weightOf(in[1]), in[1].rows(),
              in.size() > 2 ? &bias : nullptr, f32(out));
    return Status::ok();
  }
  case plan::OpCode::Add:
    k::add(f32(in[0]), f32(in[1]), in[0].rows() * in[0].cols(), f32(out));
    return Status::ok();
  case plan::OpCode::SiluMul:
    k::siluMul(f32(in[0]), f32(in[1]), in[0].rows(), in[0].cols(), in[0].cols(),
               f32(out));
    return Status::ok();
  case plan::OpCode::SigmoidGate:
    k::sigmoidGate(f32(in[0]), weightOf(in[1]), f32(in[2]), in[0].rows(),
                   in[0].cols(), f32(out));
    return Status::ok();
  case plan::OpCode::Attention: {
    const auto *p = inst.params_as_AttentionParams();
    k::GqaParams gp;
    gp.numHeads = p->num_heads();
    gp.numKvHeads = p->num_kv_heads();
    gp.headDim = p->head_dim();
    gp.scale = p->scale();
    gp.rope = ropeOf(p->rope());
    gp.slidingWindow = p->sliding_window();
    gp.qkNormEps = p->qk_norm_eps();
    k::Weight qn, kn;
    bool norm = in.size() == 6;
    if (norm) {
      qn = weightOf(in[4]);
      kn = weightOf(in[5]);
    }
    k::KvCache cache = cacheOf(call);
    k::gqaAttention(f32(in[0]), f32(in[1]), f32(in[2]), i32(in[3]), in[0].rows(),
                    norm ? &qn : nullptr, norm ? &kn : nullptr, gp, cache, f32(out));
    return Status::ok();
  }
  case plan::OpCode::MlaAttention: {
    const auto *p = inst.params_as_MlaParams();
    k::MlaParams mp;
    mp.numHeads = p->num_heads();
    mp.kvLoraRank = p->kv_lora_rank();
    mp.nopeDim = p->qk_nope_head_dim();
    mp.ropeDim = p->qk_rope_head_dim();
    mp.vDim = p->v_head_dim();
    mp.scale = p->scale();
    mp.rope = ropeOf(p->rope());
    mp.normEps = p->norm_eps();
    k::KvCache cache = cacheOf(call);
    k::mlaAttention(f32(in[0]), f32(in[1]), weightOf(in[2]), weightOf(in[3]),
                    i32(in[4]), in[0].rows(), mp, cache, f32(out));
    return Status::ok();
  }
  case plan::OpCode::Router: {
    const auto *p = inst.params_as_RouterParams();
    k::RouterParams rp;
    rp.numExperts = p->num_experts();
    rp.topK = p->top_k();
    rp.scoring = p->scoring() == plan::Scoring::Sigmoid ? k::Scoring::Sigmoid
                                                        : k::Scoring::Softmax;
    rp.method = static_cast<k::TopkMethod>(p->method());
    rp.normTopkProb = p->norm_topk_prob();
    rp.nGroup = p->n_group();
    rp.topkGroup = p->topk_group();
    rp.routedScalingFactor = p->routed_scaling_factor();
    k::Weight bias = in.size() > 2 ? weightOf(in[2]) : k::Weight();
    k::router(f32(in[0]), in[0].rows(), in[0].cols(), weightOf(in[1]),
              in.size() > 2 ? &bias : nullptr, rp, f32(call.outputs[0]),
              i32(call.outputs[1]));
    return Status::ok();
  }
  case plan::OpCode::Experts: {
    const auto *p = inst.params_as_ExpertsParams();
    k::ExpertWeights w;
    w.shared = p->num_shared();
    w.grouped = p->grouped();
    k::Weight gateUp;
    if (p->fused_gate_up()) {
      gateUp = weightOf(in[3]);
      w.gateUp = &gateUp;
      w.down = weightOf(in[4]);
    } else {
      w.gate = weightOf(in[3]);
      w.up = weightOf(in[4]);
      w.down = weightOf(in[5]);
    }
    // The router wrote these ids, but the loader cannot prove that nothing
    // overwrote them since (arena buffers may share bytes): check them.
    const int32_t *ids = i32(in[2]);
    for (int64_t i = 0, n = in[2].rows() * in[2].cols(); i < n; ++i)
      if (ids[i] < 0 || ids[i] >= p->num_experts())
        return Status::error("experts: routing index " + std::to_string(ids[i]) +
                             " is outside [0, " + std::to_string(p->num_experts()) +
                             ") (a corrupt plan: its routing indices were overwritten)");
    k::experts(f32(in[0]), in[0].rows(), in[0].cols(), p->intermediate(),
               p->num_experts(), f32(in[1]), ids, in[1].cols(), w, f32(out));
    return Status::ok();
  }
  }
  return Status::error("cpu backend: unknown op code " +
                       std::to_string(static_cast<int>(inst.op())));
}

namespace {

using namespace cpu_backend;

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
  bool supports(plan::OpCode op, plan::DType weightType) const override {
    const bool matrixOp = op == plan::OpCode::Embedding || op == plan::OpCode::Linear ||
                          op == plan::OpCode::Router || op == plan::OpCode::Experts ||
                          op == plan::OpCode::MlaAttention; // kv_b
    return isFloatWeight(weightType) ||
           (matrixOp && (weightType == plan::DType::I8 || weightType == plan::DType::I4 ||
                         weightType == plan::DType::F8E4M3));
  }
  Expected<std::shared_ptr<void>> allocate(size_t bytes) override {
    void *p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p && bytes)
      return Status::error("cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    return std::shared_ptr<void>(p, std::free);
  }
  Status copyToHost(void *host, const void *device, size_t bytes) override {
    std::memcpy(host, device, bytes);
    return Status::ok();
  }
  Status copyFromHost(void *device, const void *host, size_t bytes) override {
    std::memcpy(device, host, bytes);
    return Status::ok();
  }
  Stream &stream(int index) override {
    std::lock_guard<std::mutex> lock(streamsMutex_);
    if (streams_.size() <= size_t(index))
      streams_.resize(size_t(index) + 1);
    std::unique_ptr<Stream> &s = streams_[size_t(index)];
    if (!s)
      s = index == 0 ? createCallerStream() : createWorkerStream(index);
    return *s;
  }
  std::unique_ptr<Event> createEvent() override { return cpu_backend::createEvent(); }

private:
  std::mutex streamsMutex_;
  std::vector<std::unique_ptr<Stream>> streams_;
};

} // namespace

std::unique_ptr<Device> createCpuDevice(const CpuDeviceOptions &options) {
  return std::make_unique<CpuDevice>(options);
}

} // namespace moe::rt
