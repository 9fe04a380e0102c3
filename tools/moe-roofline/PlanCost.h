//===- PlanCost.h - bytes and FLOPs a plan's program needs ------*- C++ -*-===//
#ifndef MOE_TOOLS_MOEROOFLINE_PLANCOST_H
#define MOE_TOOLS_MOEROOFLINE_PLANCOST_H

#include "moe/runtime/PlanFormat.h"

#include <cstdint>

namespace moe::roofline {

/// Weight bytes one decode token reads at batch 1: every dense weight, one
/// row of the embedding table, and of each expert stack the experts a token
/// uses (its top_k routed and the always-on ones folded in).
uint64_t decodeWeightBytes(const plan::Plan &plan);

/// Multiply-add FLOPs (2 per multiply-add) of a prefill of `tokens` tokens
/// of one sequence from position 0: linear layers, router, experts (top_k
/// and always-on per token), causal attention scores and values, LM head.
/// Elementwise ops are not counted.
double prefillFlops(const plan::Plan &plan, int64_t tokens);

} // namespace moe::roofline

#endif
