//===- CudaKernels.cpp - plan kernels on a CUDA stream --------------------===//
//
// The CUDA twin of the CPU backend's runKernel: binds a KernelCall to the
// kernels of kernels/cuda. Built so far (docs/design-cuda.md, steps 3 to
// 5): the embedding, linear, router (token choice), experts and MLA
// attention with weights of every type (not W8A8); the norms, sigmoid_gate
// and GQA attention with f32, bf16 or f16 weights; both attentions over an
// f32, bf16, int8 or fp8 KV cache; add and silu_mul.
// Every other kernel is refused by the session, by name, before a plan
// runs (runsKernel).
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "CudaError.h"
#include "kernels/cuda/Kernels.h"

#include <algorithm>
#include <string>

namespace moe::rt::cuda_backend {

namespace {

namespace k = moe::cuda;

bool isFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }
bool isScaled(DType t) { return t == DType::I8 || t == DType::I4 || t == DType::F8E4M3; }

k::Weight weightOf(const TensorView &v) {
  k::Weight w;
  w.data = v.data;
  w.dtype = v.dtype;
  w.cols = v.cols();
  if (isScaled(v.dtype)) {
    w.scales = v.scales;
    w.group = v.group;
    w.rowGroup = v.rowGroup;
  }
  return w;
}

float *f32(const TensorView &v) { return static_cast<float *>(v.data); }
const int32_t *i32(const TensorView &v) { return static_cast<const int32_t *>(v.data); }

/// The call's layer of the paged KV cache and its block tables.
k::KvCache cacheOf(const KernelCall &call) {
  const KvLayerView &kv = *call.kv;
  k::KvCache cache;
  cache.k = {kv.k, kv.kScales, kv.kWidth, kv.heads};
  cache.v = {kv.v, kv.vScales, kv.vWidth, kv.heads};
  cache.blockSize = kv.blockSize;
  cache.dtype = kv.dtype;
  cache.tables = i32(call.blockTables);
  cache.tableStride = call.blockTables.cols();
  return cache;
}

/// What both attentions refuse: a size past the kernels' limit (`what`:
/// head dimensions, a kv_lora_rank), rotary embeddings longer than their
/// table, a KV cache type they do not keep.
Status checkAttention(const KernelCall &call, const char *what, int64_t size, int64_t most,
                      const Rope &rope) {
  if (size > most)
    return Status::error(std::string("the cuda backend's attention takes ") + what +
                         " up to " + std::to_string(most) + ", got " + std::to_string(size));
  if (rope.pairs > k::kMaxRopePairs)
    return Status::error("the cuda backend's attention takes up to " +
                         std::to_string(k::kMaxRopePairs) + " rotary pairs, got " +
                         std::to_string(rope.pairs));
  if (!keepsKvCache(call.kv->dtype))
    return Status::error(std::string("the cuda backend's attention keeps no ") +
                         dtypeName(call.kv->dtype) + " KV cache");
  return Status::ok();
}

/// An attention kernel's arguments (GqaArgs, MlaArgs): the parameters, and
/// the rotary inverse frequencies by value (they live in host memory).
template <typename Args, typename Params> Args argsOf(const Params &p) {
  Args args;
  args.params = p;
  std::copy(p.rope.invFreq, p.rope.invFreq + p.rope.pairs, args.invFreq);
  return args;
}

} // namespace

bool runsKernel(Kernel kernel, DType weightType) {
  switch (kernel) {
  case Kernel::Embedding:
  case Kernel::Linear:
  case Kernel::Router:
  case Kernel::Experts:
  case Kernel::MlaAttention: // kv_b, and its norm's float weight
    return isFloat(weightType) || isScaled(weightType);
  case Kernel::Attention: // q/k norms, or no weights
    return isFloat(weightType);
  case Kernel::RmsNorm:
  case Kernel::AddRmsNorm:
  case Kernel::SigmoidGate:
    return isFloat(weightType);
  case Kernel::Add:
  case Kernel::SiluMul:
    return weightType == DType::F32;
  default:
    return false;
  }
}

bool keepsKvCache(DType kvType) {
  return kvType == DType::F32 || kvType == DType::BF16 || kvType == DType::I8 ||
         kvType == DType::F8E4M3;
}

Status launchKernel(const KernelCall &call, cudaStream_t stream) {
  const auto &in = call.inputs;
  const TensorView &out = call.outputs[0];
  const char *name = kernelInfo(call.kernel)->name;
  for (const TensorView &t : in) {
    if (t.dtype != DType::F32 && t.dtype != DType::I32 && !runsKernel(call.kernel, t.dtype))
      return Status::error(std::string("the cuda backend does not run ") + name + " with " +
                           dtypeName(t.dtype) + " weights");
    if (t.int8Activations && call.kernel != Kernel::Embedding) // a lookup multiplies nothing
      return Status::error(std::string("the cuda backend does not run ") + name +
                           (t.dtype == DType::I4 ? " with W4A8" : " with W8A8") +
                           " weights (int8 activations) yet");
    if (t.panels)
      return Status::error(std::string("the cuda backend does not run ") + name +
                           " with weights in panels (Panels8) yet; compile the plan with "
                           "--weight-layout=rows");
  }
  switch (call.kernel) {
  case Kernel::Embedding:
    return check(k::embedding(i32(in[0]), in[0].rows(), weightOf(in[1]), in[1].rows(),
                              in[1].cols(), f32(out), stream),
                 name);
  case Kernel::RmsNorm:
    return check(k::rmsNorm(f32(in[0]), in[0].rows(), in[0].cols(), weightOf(in[1]),
                            std::get<RmsNormParams>(call.params).eps, f32(out), stream),
                 name);
  case Kernel::AddRmsNorm:
    return check(k::addRmsNorm(f32(in[0]), f32(in[1]), in[0].rows(), in[0].cols(),
                               weightOf(in[2]), std::get<RmsNormParams>(call.params).eps,
                               f32(out), f32(call.outputs[1]), stream), // sum, then the norm
                 name);
  case Kernel::Linear: {
    const k::Weight bias = in.size() > 2 ? weightOf(in[2]) : k::Weight();
    return check(k::linear(f32(in[0]), in[0].rows(), in[0].cols(), weightOf(in[1]),
                           in[1].rows(), in.size() > 2 ? &bias : nullptr, f32(out), stream),
                 name);
  }
  case Kernel::Router: {
    const RouterParams &p = std::get<RouterParams>(call.params);
    if (p.policy != RoutingPolicy::TokenChoice)
      return Status::error("the cuda backend routes by token choice only, not by capacity or "
                           "expert choice (moe-compile --routing-policy)");
    const k::Weight bias = in.size() > 2 ? weightOf(in[2]) : k::Weight();
    return check(k::router(f32(in[0]), in[0].rows(), in[0].cols(), weightOf(in[1]),
                           in.size() > 2 ? &bias : nullptr, p, f32(call.outputs[0]),
                           static_cast<int32_t *>(call.outputs[1].data), stream),
                 name);
  }
  case Kernel::Experts: {
    const ExpertsParams &p = std::get<ExpertsParams>(call.params);
    k::ExpertWeights w;
    w.fused = p.fusedGateUp;
    w.shared = p.numShared;
    w.gate = weightOf(in[3]);
    if (p.fusedGateUp) {
      w.down = weightOf(in[4]);
    } else {
      w.up = weightOf(in[4]);
      w.down = weightOf(in[5]);
    }
    return check(k::experts(f32(in[0]), in[0].rows(), in[0].cols(), p.intermediate,
                            p.numExperts, f32(in[1]), i32(in[2]), in[1].cols(), w, f32(out),
                            stream),
                 name);
  }
  case Kernel::Attention: {
    const AttentionParams &p = std::get<AttentionParams>(call.params);
    if (Status s = checkAttention(call, "head dimensions", p.headDim, k::kMaxHeadDim, p.rope); !s)
      return s;
    const bool norm = in.size() == 6;
    const k::Weight qNorm = norm ? weightOf(in[4]) : k::Weight(),
                    kNorm = norm ? weightOf(in[5]) : k::Weight();
    return check(k::gqaAttention(f32(in[0]), f32(in[1]), f32(in[2]), i32(in[3]), in[0].rows(),
                                 norm ? &qNorm : nullptr, norm ? &kNorm : nullptr,
                                 argsOf<k::GqaArgs>(p), cacheOf(call), f32(out), stream),
                 name);
  }
  case Kernel::MlaAttention: {
    const MlaParams &p = std::get<MlaParams>(call.params);
    if (Status s = checkAttention(call, "a kv_lora_rank", p.kvLoraRank, k::kMaxLatent, p.rope);
        !s)
      return s;
    return check(k::mlaAttention(f32(in[0]), f32(in[1]), weightOf(in[2]), weightOf(in[3]),
                                 i32(in[4]), in[0].rows(), argsOf<k::MlaArgs>(p), cacheOf(call),
                                 f32(out), stream),
                 name);
  }
  case Kernel::Add:
    return check(k::add(f32(in[0]), f32(in[1]), in[0].rows() * in[0].cols(), f32(out), stream),
                 name);
  case Kernel::SiluMul:
    return check(k::siluMul(f32(in[0]), f32(in[1]), in[0].rows(), in[0].cols(), in[0].cols(),
                            f32(out), stream),
                 name);
  case Kernel::SigmoidGate:
    return check(k::sigmoidGate(f32(in[0]), weightOf(in[1]), f32(in[2]), in[0].rows(),
                                in[0].cols(), f32(out), stream),
                 name);
  default:
    return Status::error(std::string("the cuda backend has no ") + name + " kernel yet");
  }
}

} // namespace moe::rt::cuda_backend
