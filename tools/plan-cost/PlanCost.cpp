//===- PlanCost.cpp - bytes and FLOPs a plan's program needs --------------===//
#include "tools/plan-cost/PlanCost.h"
#include "moe/runtime/LinkEmulation.h"
#include "moe/runtime/PlanView.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace moe::cost {
namespace {

const plan::Tensor &tensor(const plan::Plan &p, uint32_t id) { return *p.tensors()->Get(id); }

bool isWeight(const plan::Plan &p, uint32_t id) {
  return tensor(p, id).storage() == plan::Storage::Weight;
}

int64_t dim(const plan::Plan &p, uint32_t id, int i) {
  const auto *shape = tensor(p, id).shape();
  return shape->Get(i < 0 ? shape->size() + i : uint32_t(i));
}

/// How a token uses an experts or expert_rows launch's stacks: `picks` of
/// its `stacked` experts (routed and always-on), whose weights are inputs
/// `firstStack` on.
struct ExpertUse {
  int64_t picks = 0, stacked = 0;
  uint32_t firstStack = 0;
};
std::optional<ExpertUse> expertUse(const plan::Plan &p, const plan::Instruction &inst) {
  const auto *e = inst.params_as_ExpertsParams();
  if (!e)
    return std::nullopt;
  const int64_t stacked = e->num_experts() + e->num_shared();
  if (inst.op() == plan::OpCode::Experts) // x, weights, indices [T, k], stacks
    return ExpertUse{dim(p, inst.inputs()->Get(2), -1) + e->num_shared(), stacked, 3};
  return ExpertUse{dim(p, inst.inputs()->Get(0), 1), stacked, 2}; // rows [T, P, H], slots
}

} // namespace

uint64_t decodeWeightBytes(const plan::Plan &p, int64_t batch) {
  uint64_t bytes = 0;
  for (const plan::Instruction *inst : *p.programs()->Get(0)->instructions()) {
    const auto *ins = inst->inputs();
    switch (inst->op()) {
    case plan::OpCode::Embedding: // a row of the table per token
      bytes += tensor(p, ins->Get(1)).size() / uint64_t(dim(p, ins->Get(1), 0)) * uint64_t(batch);
      break;
    case plan::OpCode::Experts:
    case plan::OpCode::ExpertRows: {
      const ExpertUse use = *expertUse(p, *inst);
      const double shared = inst->params_as_ExpertsParams()->num_shared();
      const double routed = double(use.stacked) - shared, k = double(use.picks) - shared;
      const double reached = routed * (1 - std::pow(1 - k / routed, double(batch))) + shared;
      for (uint32_t i = use.firstStack; i < ins->size(); ++i)
        bytes += uint64_t(std::llround(double(tensor(p, ins->Get(i)).size()) /
                                       double(use.stacked) * reached));
      break;
    }
    default:
      for (uint32_t id : *ins)
        if (isWeight(p, id))
          bytes += tensor(p, id).size();
    }
  }
  return bytes;
}

double stepFlops(const plan::Plan &p, int64_t tokens) {
  double flops = 0;
  for (const plan::Instruction *inst : *p.programs()->Get(0)->instructions())
    flops += instructionCost(p, *inst, tokens).flops;
  return flops;
}

double prefillFlops(const plan::Plan &p, int64_t tokens) {
  const auto *insts = p.programs()->Get(0)->instructions();
  const int64_t lmHead = rt::narrowableLmHead(p); // run on the last row only
  double flops = 0;
  for (uint32_t i = 0; i < insts->size(); ++i)
    flops += instructionCost(p, *insts->Get(i), int64_t(i) == lmHead ? 1 : tokens).flops;
  return flops;
}

InstructionCost instructionCost(const plan::Plan &p, const plan::Instruction &inst,
                                int64_t tokens, bool whole) {
  const rt::RowRange part = whole ? rt::RowRange() : rt::rowsOf(p, inst);
  const int64_t first = part.first(tokens), end = part.end(tokens);
  const double rows = double(end - first);
  // Causal (query, key) pairs of its rows: query i attends i + 1 keys.
  const double pairs = (double(end) * double(end + 1) - double(first) * double(first + 1)) / 2;
  const int ranks = int(p.programs()->size());
  // A token-led tensor's bytes per row (arena sizes are at max_batch_tokens).
  auto rowBytes = [&](uint32_t id) {
    const plan::Tensor &t = tensor(p, id);
    if (t.storage() == plan::Storage::Input)
      return 4.0;
    return double(t.size()) / double(p.max_batch_tokens());
  };
  InstructionCost c;
  std::vector<uint32_t> operands(inst.inputs()->begin(), inst.inputs()->end());
  operands.insert(operands.end(), inst.outputs()->begin(), inst.outputs()->end());
  for (uint32_t id : operands)
    if (tensor(p, id).shape()->Get(0) == -1)
      c.bytes += rows * rowBytes(id);
  const auto *ins = inst.inputs();
  if (inst.collective() != plan::CollectiveOp::None) {
    c.collective = true;
    const uint64_t payload = uint64_t(rows * rowBytes(inst.outputs()->Get(0)));
    switch (inst.collective()) {
    case plan::CollectiveOp::AllReduce:
      c.wireBytes = rt::allReduceWireBytes(payload, ranks);
      break;
    case plan::CollectiveOp::AllGather:
      c.wireBytes = rt::allGatherWireBytes(uint64_t(rows * rowBytes(ins->Get(0))), ranks);
      break;
    default: {
      // The exchange out (rows, slots) and back (y): either way its
      // tokens' rows [T, P, H], all but those of its own experts.
      const uint32_t local = ins->size() == 2 ? ins->Get(0) : inst.outputs()->Get(0);
      c.wireBytes = uint64_t(rows * rowBytes(local) * double(ranks - 1) / ranks);
    }
    }
    return c;
  }
  // Weights: whole, but of expert stacks those the rows use.
  uint64_t largest = 0;
  for (uint32_t id : *ins)
    if (isWeight(p, id) && tensor(p, id).size() > largest) {
      largest = tensor(p, id).size();
      c.weightType = tensor(p, id).dtype();
    }
  switch (inst.op()) {
  case plan::OpCode::Embedding: // rows of the table
    c.bytes += rows * double(tensor(p, ins->Get(1)).size()) / double(dim(p, ins->Get(1), 0));
    return c;
  case plan::OpCode::Linear:
  case plan::OpCode::Router: // x [T, K] times w [N, K]
    c.flops = 2 * rows * double(dim(p, ins->Get(1), 0)) * double(dim(p, ins->Get(1), 1));
    break;
  case plan::OpCode::Experts:
  case plan::OpCode::ExpertRows: {
    const ExpertUse use = *expertUse(p, inst);
    const auto *e = inst.params_as_ExpertsParams();
    // Of a token's picks, those of this rank's stacks (even routing).
    const double share = e->stacked() ? double(use.stacked) / double(e->stacked()) : 1.0;
    const double computed = rows * double(use.picks) * share;
    const double hidden = double(dim(p, ins->Get(0), -1));
    c.flops = 2 * computed * 3 * double(e->intermediate()) * hidden;
    const double stacksUsed = std::min(double(use.stacked), computed);
    for (uint32_t i = use.firstStack; i < ins->size(); ++i)
      c.bytes += double(tensor(p, ins->Get(i)).size()) / double(use.stacked) * stacksUsed;
    return c;
  }
  case plan::OpCode::Attention: {
    const auto *a = inst.params_as_AttentionParams();
    c.flops = 2 * 2 * pairs * double(a->num_heads()) * double(a->head_dim());
    break;
  }
  case plan::OpCode::MlaAttention: { // absorbed: scores over latent + rope, values over latent
    const auto *m = inst.params_as_MlaParams();
    c.flops = 2 * pairs * double(m->num_heads()) *
              double(2 * m->kv_lora_rank() + m->qk_rope_head_dim());
    break;
  }
  default:
    break;
  }
  // The KV cache its rows attend to, read once (f32 as the plan states
  // widths in floats).
  if (int layer = rt::kvLayerOf(inst); layer >= 0) {
    const plan::KvLayer *kv = p.kv_cache()->layers()->Get(uint32_t(layer));
    c.bytes += double(end) * double(kv->k_width() + kv->v_width()) * 4;
  }
  for (uint32_t id : *ins)
    if (isWeight(p, id))
      c.bytes += double(tensor(p, id).size());
  return c;
}

} // namespace moe::cost
