//===- Kernels.h - CPU kernels of the moe runtime ---------------*- C++ -*-===//
//
// Plain functions over row-major buffers. Activations are f32; weights are
// f32, bf16, f16, or int8/int4/fp8 e4m3 with f32 scales (converted to f32 on
// the fly, never copied whole). Each kernel is unit-tested against a naive
// reference in test/unit/kernels. Semantics follow the Hugging Face
// transformers modeling files.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_KERNELS_H
#define MOE_KERNELS_CPU_KERNELS_H

#include "moe/abi/KernelCall.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moe::cpu {

enum class WeightType : uint8_t { F32, BF16, F16, I8, I4, F8 };

/// Whether elements of type t are integers or fp8 codes that take scales.
constexpr bool quantizedType(WeightType t) {
  return t == WeightType::I8 || t == WeightType::I4 || t == WeightType::F8;
}

/// A read-only weight buffer (row-major, or in panels) and its element type.
///
/// I8, I4 and F8 (e4m3) are scaled in blocks of `rowGroup` rows by `group`
/// elements of rows of `cols`: element (r, c) is q(r, c) * scales[scaleIndex(r,
/// c)] in f32. I8/I4 have rowGroup 1 (group = cols: one scale per row); F8
/// has square blocks (DeepSeek-V3: 128 x 128). I4 packs two elements per
/// byte, the lower index in the low nibble, each a two's complement value in
/// [-8, 7]; cols and group are then even. `rowOffset` is where row 0 of this
/// view falls in its block (a stacked expert may start mid-block).
///
/// `panelCols` > 0 stores the weight in panels of kPanelRows rows of
/// panelCols elements instead of rows (docs/design-panel-gemm.md): element
/// (r, c) sits at ((r / kPanelRows) * panelCols + c) * kPanelRows + r %
/// kPanelRows, so that one vector holds element c of eight consecutive rows.
/// Only F32, BF16 and F16 weights of a multiple of kPanelRows rows, without
/// int8Activations, with panelCols = k (the caller checks: a plan loader
/// refuses others). linear() and linearGroup() (so experts() and router())
/// read the panels; each output is then summed in one fixed order, whatever
/// the batch or the instruction set: acc = 0, acc = fma(x[c], w[r][c], acc)
/// for c = 0 .. k - 1, then acc + bias[r] (0 without a bias). Kernels that
/// read elements (at(), embedding(), norms) take it too, slowly.
/// The layout is the plan's (moe/abi/KernelCall.h).
using rt::kPanelRows;
using rt::panelIndex;
struct Weight {
  const void *data = nullptr;
  WeightType type = WeightType::F32;
  const float *scales = nullptr;    ///< scaled types only
  int64_t cols = 0, group = 0;      ///< scaled types only
  int64_t rowGroup = 1, rowOffset = 0;
  /// W8A8 (I8 with one scale per row only): linear(), linearGroup() and
  /// experts() quantize each row of x to int8, symmetric with one f32 scale
  /// per row (s = max|x| / 127, q = clamp(rint(x * (127 / max|x|)), -127,
  /// 127); all zero for a zero row), sum q_x * q_w exactly in integers and
  /// give float(sum) * s_x * s_w (+ bias). Other kernels do not take it,
  /// but embedding() (a tied LM head's table), which reads rows as int8.
  ///
  /// W4A8 (I4, rowGroup 1, every scale group starting at a multiple of 128
  /// elements: group a multiple of 128, or group >= cols; the caller
  /// checks): x quantized as for W8A8; each row cut into blocks of 128
  /// elements (the last may be shorter), a block within one scale group
  /// (scale s_b). Per block, 16 exact integer lane sums S_bj = sum of q_x *
  /// q_w over the block's elements 8j .. 8j + 7; 16 f32 lanes, from 0.0,
  /// f_j = fma(float(S_bj), s_b, f_j) block after block; then sum =
  /// ((h0 + h1) + (h2 + h3)) + ((h4 + h5) + (h6 + h7)) with h_j = f_j +
  /// f_{j+8}, and the output sum * s_x (+ bias): the same bits on every
  /// build and for any batch.
  bool int8Activations = false;
  int64_t panelCols = 0; ///< 0: rows; else panels of kPanelRows rows of panelCols
  bool quantized() const { return quantizedType(type); }
  bool panels() const { return panelCols > 0; }
  /// Index in `scales` of element (row, col).
  int64_t scaleIndex(int64_t row, int64_t col) const {
    return (rowOffset + row) / rowGroup * ((cols + group - 1) / group) + col / group;
  }
  /// Element i (row i / k, column i % k, in either layout) as f32.
  float at(size_t i) const;
  /// The weight that starts `elements` elements further on (e.g. expert e of
  /// a stacked [E, N, K] tensor is offset(e * N * K)); for I8/I4 a whole
  /// number of rows, for panels a whole number of panels.
  Weight offset(size_t elements) const;
};

/// out[t, :] = table[ids[t], :]; ids must be in [0, vocab) (checked by the
/// caller). table: [vocab, hidden].
void embedding(const int32_t *ids, int64_t tokens, Weight table,
               int64_t hidden, float *out);

/// out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * w, over `cols`;
/// x and out may alias.
void rmsNorm(const float *x, int64_t rows, int64_t cols, Weight w, float eps,
             float *out);

/// One row of rmsNorm on the calling thread, the weight given in f32
/// (`scale`, cols floats): per-head norms call it for many small rows.
void rmsNormRow(const float *x, int64_t cols, const float *scale, float eps, float *out);

/// sum = a + b, then out = rmsNorm(sum) row by row (the residual add fused
/// with the next norm); results equal add() then rmsNorm(). sum may alias a
/// or b.
void addRmsNorm(const float *a, const float *b, int64_t rows, int64_t cols, Weight w,
                float eps, float *sum, float *out);

/// out[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]); w: [n, k] (nn.Linear
/// layout, or in panels). `bias` may be null. Multi-threaded.
void linear(const float *x, int64_t tokens, int64_t k, Weight w, int64_t n,
            const Weight *bias, float *out);

/// One linear() of a group.
struct LinearProblem {
  const float *x;
  int64_t tokens, k;
  Weight w;
  int64_t n;
  const Weight *bias; ///< may be null
  float *out;
  /// Token t's row of x: x + xRows[t] * k; null: x + t * k. A panel
  /// weight reads the rows where they are; the others read a copy gathered
  /// for the call (the routed experts' tokens, without a permuted copy).
  const int32_t *xRows = nullptr;
};
/// Runs every problem as linear() would, in one parallel region whose
/// threads share the row blocks of all of them: the grouped GEMM of routed
/// experts, without a fork and join per expert. Results equal linear()'s.
void linearGroup(const LinearProblem *problems, size_t count);
/// sizeof(LinearProblem) in this build: a tool that loads two builds of
/// the kernels library into one process (ab-kernels) checks that they lay
/// out its problems alike.
size_t linearProblemBytes();

/// out[i] = a[i] + b[i].
void add(const float *a, const float *b, int64_t n, float *out);

/// out[t, i] = silu(gate[t, i]) * up[t, i] for rows x cols, where row t of
/// gate starts at gate + t * stride and of up at up + t * stride (so gate and
/// up may be the two halves of one [rows, 2 * cols] buffer); out is dense
/// [rows, cols].
void siluMul(const float *gate, const float *up, int64_t rows, int64_t cols,
             int64_t stride, float *out);

/// out[t, :] = sigmoid(dot(x[t, :], g)) * y[t, :]; x: [tokens, hidden],
/// g: [hidden] (Qwen2-MoE shared_expert_gate), y and out: [tokens, hidden];
/// y and out may alias.
void sigmoidGate(const float *x, Weight g, const float *y, int64_t tokens,
                 int64_t hidden, float *out);

using Scoring = rt::Scoring;
using TopkMethod = rt::TopkMethod;
using RoutingPolicy = rt::RoutingPolicy;
using RouterParams = rt::RouterParams;

/// Routes each token (see moe.router in dialects/moe/MoeOps.td):
///   logits = x w^T (w: [E, hidden]); scores = softmax or sigmoid (f32).
///   Greedy: the top-k scores.
///   GroupLimitedGreedy (DeepSeek-V2): group score = max of the group's
///     scores; keep the topkGroup best groups; scores outside them set to
///     0.0; top-k of that.
///   NoAuxTc (DeepSeek-V3): choice = scores + bias; group score = sum of the
///     group's two largest choice values; keep topkGroup groups; choice
///     outside them set to 0.0; top-k of that; weights gathered from the
///     unbiased scores.
///   Then if normTopkProb: weights /= (sum of the k weights + 1e-20)
///   (Mixtral, Qwen, V3); finally weights *= routedScalingFactor.
/// Ties go to the lower expert id. bias ([E], f32 or other) is used only by
/// NoAuxTc and may be null otherwise. Outputs [tokens, topK] each, ordered by
/// descending choice value.
/// params.policy other than TokenChoice (greedy routers): each expert's
/// picks over the call's tokens are bounded by routingCapacity() (moe.router's
/// `policy`): Capacity in pick-rank rounds, overflow to the next-best expert
/// with room (over capacity only when every expert the token has not
/// picked is full); ExpertChoice by each expert's best tokens, a token
/// keeping its k best offers (in descending choice) and padding with
/// weight-0 picks.
/// These depend on the batch: a token's picks are no longer its own.
void router(const float *x, int64_t tokens, int64_t hidden, Weight w,
            const Weight *bias, const RouterParams &params, float *weights,
            int32_t *indices);
/// ceil(capacityFactor x tokens x topK / numExperts), at least 1.
int64_t routingCapacity(const RouterParams &params, int64_t tokens);

/// Routed SwiGLU experts:
///   out[t] = sum_j weights[t, j] * down_e(silu(gate_e x[t]) * up_e x[t]),
///   e = indices[t, j].
/// Stacked weights: gate, up: [E, inter, hidden], down: [E, hidden, inter].
/// When `gateUp` is set (fused form) it is [E, 2 * inter, hidden] with the
/// gate rows first and `gate`/`up` are ignored. Tokens are grouped by expert
/// so each expert's weights are read once per call (in place: panel weights
/// read each token's row of x where it is). Multi-threaded.
/// With `shared` > 0 the stacks hold numExperts + shared experts, and the
/// last `shared` are always on: every token also adds their outputs (weight
/// 1), after its routed ones (DeepSeek's shared experts folded in).
/// `grouped`: all experts' projections as grouped GEMMs (one parallel region
/// each) rather than one GEMM per expert and projection; same results.
struct ExpertWeights {
  Weight gate, up, down;
  const Weight *gateUp = nullptr;
  int64_t shared = 0;
  bool grouped = true;
};
void experts(const float *x, int64_t tokens, int64_t hidden, int64_t inter,
             int64_t numExperts, const float *weights, const int32_t *indices,
             int64_t topK, const ExpertWeights &w, float *out);

// experts() in its three parts, so that an all-to-all can run between them
// (expert parallelism, docs/parallelism.md). A token has topK routed picks
// and `shared` always-on ones (experts numExperts .. numExperts + shared -
// 1); pick j of token t is slot t * (topK + shared) + j.

/// The permute: each slot's token row copied to `rows` ([tokens * (topK +
/// shared), hidden]) grouped by expert in ascending id, in slot order within
/// an expert; slotOf[row] is the expert of each row and rowOf[slot] the row
/// of each slot. The indices must lie in [0, numExperts).
void dispatch(const float *x, int64_t tokens, int64_t hidden, const int32_t *indices,
              int64_t topK, int64_t numExperts, int64_t shared, float *rows, int32_t *slotOf,
              int32_t *rowOf);
/// Which rows of a layer's experts a call computes (moe/abi/KernelCall.h).
using ExpertShare = rt::ExpertShare;
/// y[r] = down_e(silu(gate_e rows[r]) * up_e rows[r]) for the `count` rows,
/// in any order, of expert e = slotOf[r] that `share` gives this rank, with
/// the stacks' expert share.stack[e] (of numSlots); the other rows become
/// zeros. Grouped in place when every row is this rank's and their stacks
/// ascend, as dispatch leaves them; else permuted into groups and back.
/// w.shared is not used here.
void expertRows(const float *rows, const int32_t *slotOf, int64_t count, int64_t hidden,
                int64_t inter, const ExpertWeights &w, int64_t numSlots,
                const ExpertShare &share, float *y);
/// The weighted sum: out[t] = sum of weights[t, j] * y[rowOf[slot of j]]
/// over t's routed picks in ascending expert id, then its always-on picks
/// with weight 1: one fixed order whatever the batch or the rows' layout.
void combine(const float *y, const int32_t *rowOf, const float *weights,
             const int32_t *indices, int64_t tokens, int64_t topK, int64_t shared,
             int64_t hidden, float *out);

} // namespace moe::cpu

#endif
