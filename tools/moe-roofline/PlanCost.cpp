//===- PlanCost.cpp - bytes and FLOPs a plan's program needs --------------===//
#include "tools/moe-roofline/PlanCost.h"

#include <optional>

namespace moe::roofline {
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

uint64_t decodeWeightBytes(const plan::Plan &p) {
  uint64_t bytes = 0;
  for (const plan::Instruction *inst : *p.programs()->Get(0)->instructions()) {
    const auto *ins = inst->inputs();
    switch (inst->op()) {
    case plan::OpCode::Embedding: // one row of the table
      bytes += tensor(p, ins->Get(1)).size() / uint64_t(dim(p, ins->Get(1), 0));
      break;
    case plan::OpCode::Experts:
    case plan::OpCode::ExpertRows: {
      const ExpertUse use = *expertUse(p, *inst);
      for (uint32_t i = use.firstStack; i < ins->size(); ++i)
        bytes += tensor(p, ins->Get(i)).size() / uint64_t(use.stacked) * uint64_t(use.picks);
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

double prefillFlops(const plan::Plan &p, int64_t tokens) {
  const double t = double(tokens), pairs = t * (t + 1) / 2; // causal (query, key) pairs
  double flops = 0;
  for (const plan::Instruction *inst : *p.programs()->Get(0)->instructions()) {
    const auto *ins = inst->inputs();
    switch (inst->op()) {
    case plan::OpCode::Linear:
    case plan::OpCode::Router: // x [T, K] times w [N, K]
      flops += 2 * t * double(dim(p, ins->Get(1), 0)) * double(dim(p, ins->Get(1), 1));
      break;
    case plan::OpCode::Experts:
    case plan::OpCode::ExpertRows: {
      const double hidden = double(dim(p, ins->Get(0), -1));
      flops += 2 * t * double(expertUse(p, *inst)->picks) * 3 *
               double(inst->params_as_ExpertsParams()->intermediate()) * hidden;
      break;
    }
    case plan::OpCode::Attention: {
      const auto *a = inst->params_as_AttentionParams();
      flops += 2 * 2 * pairs * double(a->num_heads()) * double(a->head_dim());
      break;
    }
    case plan::OpCode::MlaAttention: { // absorbed: scores over latent + rope, values over latent
      const auto *m = inst->params_as_MlaParams();
      flops += 2 * pairs * double(m->num_heads()) *
               double(2 * m->kv_lora_rank() + m->qk_rope_head_dim());
      break;
    }
    default:
      break;
    }
  }
  return flops;
}

} // namespace moe::roofline
