//===- PlanPrograms.cpp - each rank's program, and the ranks together, checked ===//
#include "PlanPrograms.h"
#include "PlanShapes.h"
#include "PlanStreams.h"
#include "moe/abi/Kernel.h"
#include "moe/runtime/PlanView.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace moe::rt {

namespace {

/// The parameter table of each kernel's instructions (Kernels.def).
const plan::OpParams kKernelParams[] = {
#define MOE_KERNEL(Name, spelling, minIns, maxIns, outs, kv, Params) plan::OpParams::Params,
#include "moe/abi/Kernels.def"
};
static_assert(int(plan::OpCode::MAX) + 1 == sizeof(kKernelParams) / sizeof(kKernelParams[0]),
              "plan.fbs's OpCode and Kernels.def disagree: rerun cmake");

std::string str(uint64_t v) { return std::to_string(v); }

/// Operands of each collective (plan.fbs, Instruction.collective).
struct CollectiveArity {
  size_t ins, outs;
};
/// all_to_all_v sends rows and slots (2 and 2) or returns rows (1 and 1).
CollectiveArity arityOf(plan::CollectiveOp op, size_t ins) {
  return op == plan::CollectiveOp::AllToAllV && ins == 2 ? CollectiveArity{2, 2}
                                                         : CollectiveArity{1, 1};
}

/// A kernel instruction's operand counts and parameters.
/// An expert_rows' held experts and replicas: one per stack, each expert
/// once, each replica number below its count.
bool consistentShare(const plan::ExpertsParams &e) {
  const auto *held = e.held(), *replicas = e.replicas(), *replica = e.replica();
  if (!held)
    return !replicas && !replica;
  const int64_t stacks = int64_t(e.num_experts()) + e.num_shared();
  if (!e.stacked() || int64_t(held->size()) != stacks || bool(replicas) != bool(replica) ||
      (replicas && (int64_t(replicas->size()) != stacks || int64_t(replica->size()) != stacks)))
    return false;
  std::set<int32_t> seen;
  for (uint32_t i = 0; i < held->size(); ++i) {
    const int32_t n = replicas ? replicas->Get(i) : 1, r = replica ? replica->Get(i) : 0;
    if (held->Get(i) < 0 || held->Get(i) >= e.stacked() || !seen.insert(held->Get(i)).second ||
        n < 1 || r < 0 || r >= n)
      return false;
  }
  return true;
}

/// Of each layer's sharded expert_rows over all ranks: every stacked expert
/// has replicas 0 .. n - 1, each on one rank, so that each row is computed
/// exactly once.
Status checkShares(const plan::Plan &p) {
  // layer -> stacked expert -> (replicas, the replica numbers seen)
  std::map<int, std::map<int, std::pair<int, std::multiset<int>>>> layers;
  std::map<int, int> stackedOf;
  for (const plan::Program *prog : *p.programs()) {
    // layer -> its first share here, and the rows of each launch of it.
    std::map<int, std::pair<const plan::ExpertsParams *, std::vector<RowRange>>> here;
    for (const plan::Instruction *inst : *prog->instructions()) {
      const auto *e = inst->params_as_ExpertsParams();
      if (!e || !e->stacked())
        continue;
      const int layer = e->layer();
      // One launch per rank, or one per micro-batch, all with one share.
      const RowRange rows = rowsOf(p, *inst);
      auto &[first, parts] = here[layer];
      for (const RowRange &other : parts)
        if (other.parts != rows.parts || other.part == rows.part || !sameElements(first->held(), e->held()) ||
            !sameElements(first->replicas(), e->replicas()) ||
            !sameElements(first->replica(), e->replica()))
          return Status::error("rank " + std::to_string(prog->rank()) +
                               " has two sharded expert_rows of layer " + std::to_string(layer) +
                               ": each layer's share must be one launch per rank (or one per "
                               "micro-batch, the same share)");
      parts.push_back(rows);
      if (parts.size() > 1)
        continue; // counted with the first
      first = e;
      if (auto seen = stackedOf.find(layer); seen != stackedOf.end() && seen->second != e->stacked())
        return Status::error("layer " + std::to_string(layer) + " stacks " +
                             std::to_string(seen->second) + " experts on one rank and " +
                             std::to_string(e->stacked()) + " on rank " +
                             std::to_string(prog->rank()));
      stackedOf[layer] = e->stacked();
      const int stacks = e->num_experts() + e->num_shared();
      for (int i = 0; i < stacks; ++i) {
        const int ex = e->held()->Get(uint32_t(i)); // checkKernel: present
        const int n = e->replicas() ? e->replicas()->Get(uint32_t(i)) : 1;
        auto &entry = layers[layer][ex];
        if (!entry.second.empty() && entry.first != n)
          return Status::error("expert " + std::to_string(ex) + " of layer " +
                               std::to_string(layer) + " is stated with " +
                               std::to_string(entry.first) + " and with " + std::to_string(n) +
                               " replicas");
        entry.first = n;
        entry.second.insert(e->replica() ? e->replica()->Get(uint32_t(i)) : 0);
      }
    }
  }
  for (const auto &[layer, experts] : layers)
    for (int ex = 0; ex < stackedOf[layer]; ++ex) {
      auto it = experts.find(ex);
      std::multiset<int> want;
      for (int r = 0; it != experts.end() && r < it->second.first; ++r)
        want.insert(r);
      if (it == experts.end() || it->second.second != want)
        return Status::error("expert " + std::to_string(ex) + " of layer " +
                             std::to_string(layer) +
                             " is not held exactly once per replica over the ranks: some of "
                             "its rows would be computed twice or never");
    }
  return Status::ok();
}

Status checkKernel(const plan::Plan &p, const plan::Instruction *inst, const std::string &where) {
  const plan::KvCacheSpec &kv = *p.kv_cache();
  const KernelInfo *k = kernelInfo(kernelOf(*inst));
  const plan::OpParams params = kKernelParams[size_t(inst->op())];
  size_t nin = inst->inputs() ? inst->inputs()->size() : 0;
  size_t nout = inst->outputs() ? inst->outputs()->size() : 0;
  if (nin < k->minIns || nin > k->maxIns || nout != k->outs)
    return Status::error(where + " has " + str(nin) + " inputs and " + str(nout) +
                         " outputs; expected " + str(k->minIns) + "-" + str(k->maxIns) + " and " +
                         str(k->outs));
  if (inst->params_type() != params)
    return Status::error(where + (params == plan::OpParams::NONE
                                      ? std::string(" takes no parameters")
                                      : " lacks its " + std::string(plan::EnumNameOpParams(params))));
  if (auto *att = inst->params_as_AttentionParams()) {
    if (att->num_heads() < 1 || att->num_kv_heads() < 1 || att->head_dim() < 1 ||
        att->num_heads() % att->num_kv_heads() != 0 || !att->rope() || !att->rope()->inv_freq() ||
        att->rope()->inv_freq()->size() * 2 > size_t(att->head_dim()))
      return Status::error(where + " has inconsistent attention parameters");
  }
  if (auto *mla = inst->params_as_MlaParams()) {
    if (mla->num_heads() < 1 || mla->kv_lora_rank() < 1 || mla->qk_nope_head_dim() < 1 ||
        mla->qk_rope_head_dim() < 2 || mla->v_head_dim() < 1 || !mla->rope() ||
        !mla->rope()->inv_freq() ||
        mla->rope()->inv_freq()->size() * 2 != size_t(mla->qk_rope_head_dim()))
      return Status::error(where + " has inconsistent MLA parameters");
  }
  if (int layer = kvLayerOf(*inst);
      layer != -1 && (layer < 0 || size_t(layer) >= kv.layers()->size()))
    return Status::error(where + " uses KV-cache layer " + std::to_string(layer) +
                         ", but the cache has " + str(kv.layers()->size()));
  if (auto *r = inst->params_as_RouterParams())
    if (r->num_experts() < 1 || r->top_k() < 1 || r->top_k() > r->num_experts() ||
        r->n_group() < 1 || r->num_experts() % r->n_group() != 0 || r->topk_group() < 1 ||
        r->topk_group() > r->n_group() || r->scoring() > plan::Scoring::MAX ||
        r->method() > plan::TopkMethod::MAX || r->policy() > plan::RoutingPolicy::MAX ||
        (r->policy() != plan::RoutingPolicy::TokenChoice &&
         r->method() != plan::TopkMethod::Greedy) ||
        !(r->capacity_factor() >= 1 && r->capacity_factor() <= 64))
      return Status::error(where + " has inconsistent router parameters");
  // The expert stacks follow the activations: x, weights, indices for
  // experts; rows, slots for expert_rows.
  const size_t stacksAt = inst->op() == plan::OpCode::Experts ? 3 : 2;
  if (auto *e = inst->params_as_ExpertsParams(); e && e->stacked() && !e->held())
    return Status::error(where + " holds a format 2.1 slice of experts (first, stacked), which "
                                 "this runtime no longer reads; recompile with moe-compile");
  if (auto *e = inst->params_as_ExpertsParams())
    if (e->num_experts() < 1 || e->intermediate() < 1 || e->num_shared() < 0 ||
        e->num_shared() > (1 << 20) || nin != stacksAt + (e->fused_gate_up() ? 2u : 3u) ||
        e->first() < 0 || e->stacked() < 0 || e->stacked() > (1 << 20) ||
        (e->stacked() && e->first() + e->num_experts() > e->stacked()) ||
        ((e->first() || e->stacked()) && inst->op() != plan::OpCode::ExpertRows) ||
        !consistentShare(*e))
      return Status::error(where + " has inconsistent expert parameters");
  if (auto *d = inst->params_as_DispatchParams())
    if (d->num_experts() < 1 || d->num_shared() < 0 || d->num_shared() > (1 << 20))
      return Status::error(where + " has inconsistent dispatch parameters");
  return Status::ok();
}

Status checkCollective(const plan::Instruction *inst, const std::string &where) {
  size_t nin = inst->inputs() ? inst->inputs()->size() : 0;
  CollectiveArity want = arityOf(inst->collective(), nin);
  size_t nout = inst->outputs() ? inst->outputs()->size() : 0;
  if (nin != want.ins || nout != want.outs)
    return Status::error(where + " has " + str(nin) + " inputs and " + str(nout) +
                         " outputs; expected " + str(want.ins) + " and " + str(want.outs));
  if (inst->params_type() != plan::OpParams::NONE || inst->op() != plan::OpCode(0))
    return Status::error(where + " is a collective but also names a kernel or its parameters");
  return Status::ok();
}

std::string describe(const plan::Instruction &inst, uint32_t i) {
  return "instruction " + str(i) + " (" + instructionName(inst) + ")";
}

} // namespace

/// An instruction that takes rows of a micro-batch takes every operand led
/// by the tokens as rows of that part (a kernel's rows must match, and its
/// KV block tables are the part's; a part's row exchange sends into the
/// same part of the received rows).
static Status checkParts(const plan::Plan &p, const plan::Instruction &inst,
                         const std::string &where) {
  std::vector<uint32_t> ids(inst.inputs()->begin(), inst.inputs()->end());
  ids.insert(ids.end(), inst.outputs()->begin(), inst.outputs()->end());
  const plan::Tensor *first = nullptr;
  for (uint32_t id : ids)
    if (const plan::Tensor *t = p.tensors()->Get(id); t->parts() > 1 && !first)
      first = t;
  if (!first)
    return Status::ok();
  for (uint32_t id : ids) {
    const plan::Tensor *t = p.tensors()->Get(id);
    if (t->shape()->Get(0) == -1 && (t->parts() != first->parts() || t->part() != first->part()))
      return Status::error(where + " takes rows of part " + std::to_string(first->part()) +
                           " of " + std::to_string(first->parts()) + " and tensor " +
                           std::to_string(id) + ", which is not: every operand led by the "
                           "tokens must be rows of the same part");
  }
  return Status::ok();
}

Status checkProgram(const plan::Plan &p, uint32_t rank) {
  const plan::Program &prog = *p.programs()->Get(rank);
  const uint32_t numTensors = p.tensors()->size();
  auto tensorName = [&](uint32_t id) {
    const auto *t = p.tensors()->Get(id);
    return std::string(t->name() ? t->name()->c_str() : "?");
  };
  if (prog.rank() != int(rank))
    return Status::error("program " + str(rank) + " says it is rank " +
                         std::to_string(prog.rank()) + "; programs are stored in rank order");
  const auto *insts = prog.instructions();
  if (!insts || insts->size() == 0)
    return Status::error("program " + str(rank) + " has no instructions");
  if (!prog.inputs() || !prog.outputs() || prog.inputs()->size() != 2 ||
      prog.outputs()->size() != 1)
    return Status::error("a program takes 2 inputs (tokens, positions) and gives 1 output "
                         "(logits), got " +
                         str(prog.inputs() ? prog.inputs()->size() : 0) + " and " +
                         str(prog.outputs() ? prog.outputs()->size() : 0));
  // Every tensor the program touches, and the storage it must have.
  std::set<uint32_t> touched;
  auto use = [&](uint32_t id, const std::string &what, const plan::Storage *storage) -> Status {
    if (id >= numTensors)
      return Status::error(what + " tensor " + str(id) + ", but the plan has " +
                           str(numTensors));
    if (storage && p.tensors()->Get(id)->storage() != *storage)
      return Status::error(what + " tensor " + str(id) + " ('" + tensorName(id) +
                           "'), which is not " +
                           (*storage == plan::Storage::Arena ? "an arena tensor" : "an input"));
    touched.insert(id);
    return Status::ok();
  };
  const plan::Storage input = plan::Storage::Input, arena = plan::Storage::Arena;
  for (uint32_t id : *prog.inputs())
    if (Status st = use(id, "input", &input); !st)
      return st;
  if (Status st = use(prog.outputs()->Get(0), "output", &arena); !st)
    return st;
  int collectiveStream = -1;
  for (uint32_t i = 0; i < insts->size(); ++i) {
    const plan::Instruction *inst = insts->Get(i);
    std::string where = "instruction " + str(i);
    if (inst->collective() != plan::CollectiveOp::None) {
      // One stream runs them in program order: the same order on every rank.
      if (collectiveStream >= 0 && inst->stream() != collectiveStream)
        return Status::error(where + " is a collective on stream " + str(inst->stream()) +
                             ", but earlier ones run on stream " + str(collectiveStream) +
                             ": collectives run on one stream");
      collectiveStream = inst->stream();
      if (inst->collective() > plan::CollectiveOp::MAX)
        return Status::error(where + " has unknown collective " + str(uint8_t(inst->collective())));
      where = describe(*inst, i);
      if (Status st = checkCollective(inst, where); !st)
        return st;
      if (inst->group() >= 0) {
        if (!p.groups() || uint32_t(inst->group()) >= p.groups()->size())
          return Status::error(where + " names group " + std::to_string(inst->group()) +
                               "; the plan has " + str(p.groups() ? p.groups()->size() : 0));
        const auto *members = p.groups()->Get(uint32_t(inst->group()))->ranks();
        if (std::find(members->begin(), members->end(), int32_t(rank)) == members->end())
          return Status::error(where + " runs among " +
                               groupName(*p.groups()->Get(uint32_t(inst->group()))) +
                               ", which does not include this rank");
      } else if (inst->group() != -1) {
        return Status::error(where + " names group " + std::to_string(inst->group()));
      }
    } else {
      if (inst->group() != -1)
        return Status::error(describe(*inst, i) + " is not a collective but names group " +
                             std::to_string(inst->group()));
      if (!kernelInfo(kernelOf(*inst)))
        return Status::error(where + " has unknown op code " + str(uint8_t(inst->op())));
      where = describe(*inst, i);
      if (Status st = checkKernel(p, inst, where); !st)
        return st;
    }
    for (uint32_t id : *inst->inputs())
      if (Status st = use(id, where + " reads", nullptr); !st)
        return st;
    for (uint32_t id : *inst->outputs())
      if (Status st = use(id, where + " writes", &arena); !st)
        return st;
    if (Status st = checkParts(p, *inst, where); !st)
      return st;
  }
  // Memory: its own weights, counted; its activations inside its arena.
  uint64_t weightBytes = 0;
  std::set<uint32_t> weights;
  for (uint32_t id : touched) {
    const plan::Tensor *t = p.tensors()->Get(id);
    if (t->storage() == plan::Storage::Arena && !fits(t->offset(), t->size(), prog.arena_bytes()))
      return Status::error("tensor " + str(id) + " ('" + tensorName(id) + "') ends at arena byte " +
                           end(t->offset(), t->size()) + ", past the arena (" +
                           str(prog.arena_bytes()) + " bytes)");
    if (t->storage() == plan::Storage::Weight) {
      weights.insert(id);
      if (t->group() > 0)
        weights.insert(t->scales());
    }
  }
  for (uint32_t id : weights) {
    const plan::Tensor *t = p.tensors()->Get(id);
    const plan::WeightFile *file = p.weight_files()->Get(t->weight_file());
    if (file->rank() != int(rank))
      return Status::error("weight '" + tensorName(id) + "' is in " + file->path()->str() +
                           ", a file of rank " + std::to_string(file->rank()));
    weightBytes += t->size();
  }
  if (weightBytes != prog.weight_bytes())
    return Status::error("program " + str(rank) + " states " + str(prog.weight_bytes()) +
                         " weight bytes, but its weights take " + str(weightBytes));
  if (Status st = checkShapes(p, prog); !st)
    return st;
  return checkStreams(p, prog);
}

Status checkGroups(const plan::Plan &p) {
  if (!p.groups())
    return Status::ok();
  const uint32_t ranks = p.programs()->size();
  for (uint32_t g = 0; g < p.groups()->size(); ++g) {
    const plan::Group *group = p.groups()->Get(g);
    if (group->kind() > plan::GroupKind::MAX)
      return Status::error("group " + str(g) + " has unknown kind " +
                           str(uint8_t(group->kind())));
    const auto *members = group->ranks();
    if (!members || members->size() == 0)
      return Status::error("group " + str(g) + " has no ranks");
    for (uint32_t i = 0; i < members->size(); ++i)
      if (members->Get(i) < 0 || uint32_t(members->Get(i)) >= ranks ||
          (i && members->Get(i) <= members->Get(i - 1)))
        return Status::error("group " + str(g) + " lists rank " +
                             std::to_string(members->Get(i)) + " at position " + str(i) +
                             "; a group's ranks are ascending, distinct, and below the plan's " +
                             str(ranks) + " rank(s)");
  }
  return Status::ok();
}

Status checkRanks(const plan::Plan &p) {
  // The collectives, in order, as rank 0 runs them: each rank runs the same
  // ones, each among a group of the same kind and size (or every rank).
  auto signature = [&](const plan::Program &prog) {
    std::vector<std::pair<uint32_t, std::string>> list;
    const auto *insts = prog.instructions();
    for (uint32_t i = 0; i < insts->size(); ++i) {
      const plan::Instruction *inst = insts->Get(i);
      if (inst->collective() == plan::CollectiveOp::None)
        continue;
      const plan::Tensor *x = p.tensors()->Get(inst->inputs()->Get(0));
      std::string shape;
      for (int64_t d : *x->shape())
        shape += (shape.empty() ? "" : "x") + (d < 0 ? std::string("T") : std::to_string(d));
      std::string among = "every rank";
      if (inst->group() >= 0) {
        const plan::Group *g = p.groups()->Get(uint32_t(inst->group()));
        among = groupName(*g);
        among = among.substr(0, among.find(' ')) + " group of " + str(g->ranks()->size());
      }
      list.push_back({i, std::string(collectiveName(inst->collective())) + " of " +
                             dtypeName(x->dtype()) + " [" + shape + "] among " + among});
    }
    return list;
  };
  const auto first = signature(*p.programs()->Get(0));
  for (uint32_t r = 1; r < p.programs()->size(); ++r) {
    const auto mine = signature(*p.programs()->Get(r));
    for (size_t c = 0; c < std::max(first.size(), mine.size()); ++c) {
      std::string a = c < first.size() ? first[c].second : "nothing";
      std::string b = c < mine.size() ? mine[c].second : "nothing";
      if (a != b)
        return Status::error("collective " + str(c) + " of rank " + str(r) + " is " + b +
                             ", but rank 0's is " + a +
                             ": the ranks would wait for each other forever");
    }
  }
  // Collective c of each rank runs among a group whose members all run
  // their collective c among the same group.
  std::vector<std::vector<int>> groupAt(p.programs()->size()); // rank -> group of each
  for (uint32_t r = 0; r < p.programs()->size(); ++r)
    for (const plan::Instruction *inst : *p.programs()->Get(r)->instructions())
      if (inst->collective() != plan::CollectiveOp::None)
        groupAt[r].push_back(inst->group());
  for (uint32_t r = 0; r < groupAt.size(); ++r)
    for (size_t c = 0; c < groupAt[r].size(); ++c) {
      const int g = groupAt[r][c];
      if (g < 0)
        continue;
      for (int32_t member : *p.groups()->Get(uint32_t(g))->ranks())
        if (groupAt[size_t(member)][c] != g)
          return Status::error("collective " + str(c) + " of rank " + str(r) + " runs among " +
                               groupName(*p.groups()->Get(uint32_t(g))) + ", but rank " +
                               std::to_string(member) + "'s runs among " +
                               (groupAt[size_t(member)][c] < 0
                                    ? std::string("every rank")
                                    : groupName(*p.groups()->Get(
                                          uint32_t(groupAt[size_t(member)][c])))) +
                               ": the ranks would wait for each other forever");
    }
  if (Status st = checkShares(p); !st)
    return st;
  // The placement: every routed layer's experts, each on at least one slot.
  std::map<int, int> experts; // layer -> its router's experts
  for (const plan::Program *prog : *p.programs())
    for (const plan::Instruction *inst : *prog->instructions())
      if (const auto *r = inst->params_as_RouterParams()) {
        if (r->layer() < 0)
          return Status::error("a router has no decoder layer; recompile with moe-compile");
        experts[r->layer()] = r->num_experts();
      }
  const auto *placement = p.placement();
  size_t entries = placement ? placement->size() : 0;
  if (entries != experts.size())
    return Status::error("the expert placement covers " + str(entries) +
                         " layer(s), but the "
                         "plan routes " +
                         str(experts.size()));
  auto layer = experts.begin();
  for (uint32_t i = 0; i < entries; ++i, ++layer) {
    const plan::LayerPlacement *lp = placement->Get(i);
    std::string where = "the expert placement of layer " + std::to_string(lp->layer());
    if (lp->layer() != layer->first)
      return Status::error("expert placement entry " + str(i) + " is for layer " +
                           std::to_string(lp->layer()) + "; expected layer " +
                           std::to_string(layer->first) + " (routed layers, in order)");
    size_t n = lp->experts() ? lp->experts()->size() : 0;
    if (n != size_t(layer->second))
      return Status::error(where + " lists " + str(n) + " experts; its router has " +
                           std::to_string(layer->second));
    std::set<std::pair<int, int>> slots;
    for (uint32_t e = 0; e < n; ++e) {
      const auto *copies = lp->experts()->Get(e)->slots();
      if (!copies || copies->size() == 0)
        return Status::error(where + ": expert " + str(e) + " has no slot");
      for (const plan::ExpertSlot *s : *copies) {
        if (s->rank() < 0 || s->rank() >= int(p.programs()->size()) || s->slot() < 0)
          return Status::error(where + ": expert " + str(e) + " has slot " +
                               std::to_string(s->slot()) + " on rank " + std::to_string(s->rank()) +
                               ", which does not exist");
        if (!slots.insert({s->rank(), s->slot()}).second)
          return Status::error(where + ": slot " + std::to_string(s->slot()) + " of rank " +
                               std::to_string(s->rank()) + " holds two experts");
      }
    }
  }
  return Status::ok();
}

} // namespace moe::rt
