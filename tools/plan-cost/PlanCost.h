//===- PlanCost.h - bytes and FLOPs a plan's program needs ------*- C++ -*-===//
//
// The one account of what a plan's instructions cost, from the plan alone:
// moe-roofline compares measured rates with it, the simulator
// (Simulate.h) turns it into times on a hardware profile.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_PLANCOST_PLANCOST_H
#define MOE_TOOLS_PLANCOST_PLANCOST_H

#include "moe/abi/PlanFormat.h"

#include <cstdint>

namespace moe::cost {

/// Weight bytes a decode step of `batch` tokens reads: every dense weight,
/// `batch` rows of the embedding table, and of each expert stack the experts
/// the tokens use: the always-on ones folded in, and of the routed experts
/// E (1 - (1 - k / E)^batch), what tokens routed uniformly and independently
/// reach (top_k at batch 1).
uint64_t decodeWeightBytes(const plan::Plan &plan, int64_t batch = 1);

/// Multiply-add FLOPs of one step of `tokens` rows (every instruction's
/// instructionCost, the LM head on every row; attention as if the rows were
/// one sequence from position 0, a few percent at short contexts).
double stepFlops(const plan::Plan &plan, int64_t tokens);

/// Multiply-add FLOPs (2 per multiply-add) of a prefill of `tokens` tokens
/// of one sequence from position 0: linear layers, router, experts (top_k
/// and always-on per token), causal attention scores and values, LM head
/// (for the last token only where the session narrows it: Batch::logitRows,
/// a plan ending in its LM head). Elementwise ops are not counted.
double prefillFlops(const plan::Plan &plan, int64_t tokens);

/// What one instruction of a step costs on one rank.
struct InstructionCost {
  double flops = 0;       ///< multiply-add FLOPs (2 each) of its matrix products
  double bytes = 0;       ///< memory it reads and writes: weights used, activations
  uint64_t wireBytes = 0; ///< a collective: what this rank sends (LinkEmulation.h's forms)
  bool collective = false;
  plan::DType weightType = plan::DType::F32; ///< of its largest weight (its matmul rate)
};

/// Instruction `inst` (of any rank's program) in a step of `tokens`
/// tokens of one sequence, a prefill from position 0 (its micro-batch's
/// rows of them, attending to every earlier position). Expert launches
/// count the rows of the experts the rank holds, assuming even routing;
/// the row exchange sends (ranks - 1) / ranks of the rows.
/// With `whole`, as if it ran on all the step's rows (its micro-batch
/// ignored).
InstructionCost instructionCost(const plan::Plan &plan, const plan::Instruction &inst,
                                int64_t tokens, bool whole = false);

} // namespace moe::cost

#endif
