//===- KernelCall.h - one kernel, bound to memory ---------------*- C++ -*-===//
//
// What a backend receives for each instruction: the kernel (a row of
// Kernels.def), its parameters as plain structs, and its tensors as device
// addresses with concrete shapes. The session builds these from the plan
// once; nothing here depends on the plan's file format. The CPU kernels
// (kernels/cpu) take the parameter structs as they are.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_KERNELCALL_H
#define MOE_RUNTIME_KERNELCALL_H

#include "moe/abi/Kernel.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

namespace moe::rt {

/// Element types, numbered as the plan format numbers them.
enum class DType : uint8_t { F32 = 0, BF16 = 1, F16 = 2, F8E4M3 = 3, I32 = 4, I8 = 5, I4 = 6 };
/// Bytes per element (I4: 1, two per byte are packed by the weights), 0 if
/// `dtype` is not one of the above.
size_t dtypeSize(DType dtype);
/// "F32", ... ("?" for an unknown value).
const char *dtypeName(DType dtype);

/// Rotary embedding resolved by the compiler: angle(pos, i) = pos *
/// invFreq[i] for i < pairs; cos and sin are scaled by attentionFactor.
/// Pairs are (i, i + rotary/2) (half rotation, Llama family) or (2i, 2i + 1)
/// (interleaved, DeepSeek). invFreq points into the loaded plan.
struct Rope {
  const float *invFreq = nullptr;
  int64_t pairs = 0;
  float attentionFactor = 1.0f;
  bool interleaved = false;
};

struct RmsNormParams {
  float eps = 1e-6f;
};

struct AttentionParams {
  int64_t layer = 0; ///< KV-cache layer
  int64_t numHeads = 0, numKvHeads = 0, headDim = 0;
  float scale = 1.0f;
  Rope rope;
  int64_t slidingWindow = 0; ///< 0: none
  float qkNormEps = 1e-6f;
};

struct MlaParams {
  int64_t layer = 0; ///< KV-cache layer
  int64_t numHeads = 0, kvLoraRank = 0, nopeDim = 0, ropeDim = 0, vDim = 0;
  float scale = 1.0f;
  Rope rope;
  float normEps = 1e-6f;
};

enum class Scoring : uint8_t { Softmax, Sigmoid };
enum class TopkMethod : uint8_t { Greedy, GroupLimitedGreedy, NoAuxTc };
/// plan.fbs's RoutingPolicy: which tokens each expert gets in a step.
enum class RoutingPolicy : uint8_t { TokenChoice, Capacity, ExpertChoice };

struct RouterParams {
  int64_t numExperts = 0, topK = 0;
  Scoring scoring = Scoring::Softmax;
  TopkMethod method = TopkMethod::Greedy;
  bool normTopkProb = false;
  int64_t nGroup = 1, topkGroup = 1;
  float routedScalingFactor = 1.0f;
  int64_t layer = -1; ///< decoder layer, for routing statistics
  RoutingPolicy policy = RoutingPolicy::TokenChoice;
  float capacityFactor = 1.0f; ///< capacity = ceil(factor x tokens x topK / numExperts)
};

struct ExpertsParams {
  int64_t numExperts = 0, intermediate = 0;
  bool fusedGateUp = false;
  int64_t numShared = 0; ///< always-on experts stacked after the routed ones
  bool grouped = true;   ///< permute + grouped GEMMs, else one expert after another
  /// expert_rows under expert parallelism: of the layer's `stacked`
  /// experts (0: all are here, one copy each), stack i holds held[i], as
  /// replica replica[i] of replicas[i]; other rows become zeros
  /// (plan.fbs's ExpertsParams).
  int64_t stacked = 0;
  std::vector<int32_t> held, replicas, replica;
  /// With replicas: per stacked expert, the rows its replicas computed in
  /// the session's earlier steps (state of the launch, which every rank
  /// keeps alike: the round-robin over replicas continues across steps, so
  /// a decode step's one row does not always fall to replica 0).
  std::shared_ptr<std::vector<uint64_t>> rowsSeen;
};

/// Which rows of a layer's experts an expert_rows computes (expert
/// parallelism, docs/parallelism.md), indexed by the expert a slot names:
/// stack[e] is expert e's index in the launch's stacks, or -1 when other
/// ranks hold it; of an expert's rows, in row order and numbered on from
/// seen[e] (the rows of earlier calls; none when `seen` is null), the n-th
/// is this launch's when n mod replicas[e] == replica[e] (its replicas
/// share its rows round-robin). A call adds its rows of each expert to
/// `seen`. Empty: every expert at its own index, once.
struct ExpertShare {
  std::vector<int32_t> stack, replicas, replica;
  std::vector<uint64_t> *seen = nullptr;
};

/// The share `p` states (empty when it is not sharded); `seen` is
/// p.rowsSeen's. The loader checked the lists (one distinct expert per
/// stack, a replica below its count).
ExpertShare expertShare(const ExpertsParams &p);

struct DispatchParams {
  int64_t numExperts = 0; ///< routed experts (the router's)
  int64_t numShared = 0;  ///< always-on experts, ids numExperts .. numExperts + numShared - 1
};

/// The parameters of a call: the alternative its kernel's row names.
using KernelParams = std::variant<std::monostate, RmsNormParams, RouterParams, AttentionParams,
                                  MlaParams, ExpertsParams, DispatchParams>;

/// A weight in panels (plan Layout Panels8, docs/design-panel-gemm.md)
/// stores each [rows, cols] matrix, rows a multiple of kPanelRows, so that
/// element c of kPanelRows consecutive rows is contiguous: one vector.
inline constexpr int64_t kPanelRows = 8;
/// Where element (r, c) of a [rows, cols] matrix in panels sits.
constexpr size_t panelIndex(int64_t r, int64_t c, int64_t cols) {
  return size_t((r / kPanelRows * cols + c) * kPanelRows + r % kPanelRows);
}

/// How a plan may store a weight beyond its dtype. A backend says which it
/// reads (Device::readsWeights); the session refuses the others by name.
enum class WeightForm {
  Panels8,         ///< matrices in panels of kPanelRows rows (TensorView::panels)
  Int8Activations, ///< W8A8, W4A8: sums of int8 activations (TensorView::int8Activations)
};

/// A tensor as a kernel sees it: device memory, dtype and concrete shape
/// (the token dimension resolved for this call).
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Scaled (I8/I4/F8E4M3) weights: f32 scales, one per block of `rowGroup`
  /// rows by `group` elements of the last dimension (see plan.fbs).
  const float *scales = nullptr;
  int64_t group = 0, rowGroup = 1;
  /// W8A8 (plan Tensor.int8_activations): an I8 weight with one scale per
  /// row whose matrix products (linear, router, experts, expert_rows)
  /// quantize each activation row to int8 per token and sum in integers;
  /// W4A8: the same on an I4 weight whose groups start at multiples of 128.
  /// The loader allows it on no other weight and for no other kernel but
  /// the embedding lookup (a tied LM head's table), which ignores it.
  bool int8Activations = false;
  /// Panels8 (plan Tensor.layout): an F32, BF16 or F16 weight whose
  /// matrices are stored in panels (panelIndex). The loader allows it only
  /// on weights that linear, router, experts, expert_rows and embedding
  /// read.
  bool panels = false;
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
  DType dtype = DType::F32;
};

/// One instruction, bound to memory.
struct KernelCall {
  Kernel kernel = Kernel::Embedding;
  KernelParams params;
  std::vector<TensorView> inputs, outputs;
  KvLayerView *kv = nullptr; ///< attention kernels only
  /// Attention kernels: I32 [tokens, stride] in device memory, row t the
  /// block table of token t's sequence (entries past its position's block
  /// are not read).
  TensorView blockTables;
};

} // namespace moe::rt

#endif
