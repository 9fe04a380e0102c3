//===- PlanShapes.cpp - every kernel's view of its tensors, checked ------===//
#include "PlanShapes.h"
#include "moe/abi/Kernel.h"
#include "moe/runtime/PlanView.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace moe::rt {
namespace {

constexpr int64_t kTokens = -1; // the token dimension, resolved at run time

std::string shapeText(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + (s[i] == kTokens ? std::string("T") : std::to_string(s[i]));
  return out + "]";
}

class Checker {
public:
  Checker(const plan::Plan &p, const plan::Program &prog) : p_(p), prog_(prog) {}

  Status run() {
    const auto *insts = prog_.instructions();
    tokens_ = prog_.inputs()->Get(0);
    positions_ = prog_.inputs()->Get(1);
    int64_t vocab = p_.config()->vocab_size();
    where_ = "the plan's inputs and output";
    if (Status st = input(tokens_, "tokens"); !st)
      return st;
    if (Status st = input(positions_, "positions"); !st)
      return st;
    if (Status st = act(prog_.outputs()->Get(0), "logits", {kTokens, vocab}); !st)
      return st;
    routerOf_.assign(p_.tensors()->size(), nullptr);
    for (uint32_t i = 0; i < insts->size(); ++i) {
      inst_ = insts->Get(i);
      where_ = "instruction " + std::to_string(i) + " (" + instructionName(*inst_) + ")";
      if (inst_->collective() != plan::CollectiveOp::None) {
        if (Status st = collective(); !st)
          return st;
        continue;
      }
      if (Status st = instruction(); !st)
        return st;
      if (inst_->op() == plan::OpCode::Router)
        routerOf_[out(1)] = inst_;
      // One attention op per KV layer: its heads size the layer's scales.
      int layer = inst_->params_as_AttentionParams() ? inst_->params_as_AttentionParams()->layer()
                  : inst_->params_as_MlaParams()     ? inst_->params_as_MlaParams()->layer()
                                                     : -1;
      // (Micro-batches: one per part, each its rows of the step.)
      const RowRange rows = rowsOf(p_, *inst_);
      if (layer >= 0) {
        auto &users = kvUsers_[layer];
        for (const RowRange &other : users)
          if (other.parts != rows.parts || other.part == rows.part)
            return Status::error(where_ + ": KV-cache layer " + std::to_string(layer) +
                                 " is already used by another attention op");
        users.push_back(rows);
      }
    }
    return Status::ok();
  }

private:
  uint32_t in(uint32_t i) const { return inst_->inputs()->Get(i); }
  uint32_t whole(uint32_t id) const { return baseOf(p_, id); }
  uint32_t out(uint32_t i) const { return inst_->outputs()->Get(i); }
  size_t numIn() const { return inst_->inputs()->size(); }
  const plan::Tensor &tensor(uint32_t id) const { return *p_.tensors()->Get(id); }
  std::vector<int64_t> shape(uint32_t id) const {
    const auto *s = tensor(id).shape();
    return std::vector<int64_t>(s->begin(), s->end());
  }
  int64_t dim(uint32_t id, int i) const {
    std::vector<int64_t> s = shape(id);
    return i < 0 ? s[s.size() + size_t(i)] : s[size_t(i)];
  }

  Status bad(uint32_t id, const std::string &role, const std::string &want) const {
    return Status::error(where_ + ": its " + role + " '" +
                         (tensor(id).name() ? tensor(id).name()->str() : "?") + "' is " +
                         dtypeName(tensor(id).dtype()) + " " + shapeText(shape(id)) + " in " +
                         plan::EnumNameStorage(tensor(id).storage()) + "; expected " + want);
  }
  Status need(bool ok, const std::string &what) const {
    return ok ? Status::ok() : Status::error(where_ + ": " + what);
  }

  /// An f32 (or i32) activation in the arena with exactly `dims`.
  Status act(uint32_t id, const std::string &role, const std::vector<int64_t> &dims,
             plan::DType dtype = plan::DType::F32) const {
    const plan::Tensor &t = tensor(id);
    if (t.storage() != plan::Storage::Arena || t.dtype() != dtype || shape(id) != dims)
      return bad(id, role, std::string(dtypeName(dtype)) + " " + shapeText(dims) + " in Arena");
    return Status::ok();
  }
  /// What a kernel takes of a weight beyond F32, BF16 and F16 rows.
  enum Takes : unsigned {
    kFloatRows = 0,
    kQuantized = 1, ///< scaled I8, I4, F8E4M3: a matrix the kernel multiplies or looks rows up in
    kW8A8 = 2,      ///< int8_activations: it quantizes its activations, or has none
    kPanels = 4,    ///< Panels8: it multiplies through linear() or linearGroup(), or looks rows up
  };
  /// A weight of f32, bf16 or f16 (or what `takes` adds) with exactly `dims`.
  Status weight(uint32_t id, const std::string &role, const std::vector<int64_t> &dims,
                unsigned takes = kFloatRows) const {
    const plan::Tensor &t = tensor(id);
    const std::string name = t.name() ? t.name()->str() : "?";
    if (t.int8_activations() && !(takes & kW8A8))
      return Status::error(where_ + ": its " + role + " '" + name + "' is " +
                           (t.dtype() == plan::DType::I4 ? "W4A8" : "W8A8") +
                           " (int8_activations), which this kernel does not take "
                           "(only linear, router, experts, expert_rows and embedding do)");
    if (t.layout() != plan::Layout::Rows && !(takes & kPanels))
      return Status::error(where_ + ": its " + role + " '" + name +
                           "' is in panels (Panels8), which this kernel does not take (only "
                           "linear, router, experts, expert_rows and embedding do)");
    bool floating = t.dtype() == plan::DType::F32 || t.dtype() == plan::DType::BF16 ||
                    t.dtype() == plan::DType::F16;
    bool quantized = t.group() > 0; // I8, I4 or F8E4M3 with scales (checked by the loader)
    const bool stored = floating || ((takes & kQuantized) && quantized);
    if (t.storage() != plan::Storage::Weight || !stored || shape(id) != dims)
      return bad(id, role,
                 std::string((takes & kQuantized) ? "an F32, BF16 or F16 (or scaled I8, I4, F8E4M3)"
                                                  : "an F32, BF16 or F16") +
                     " weight " + shapeText(dims));
    return Status::ok();
  }
  /// A matrix that a kernel multiplies through linear(), linearGroup() or
  /// experts(): these honour int8_activations and panels.
  Status product(uint32_t id, const std::string &role, const std::vector<int64_t> &dims) const {
    return weight(id, role, dims, kQuantized | kW8A8 | kPanels);
  }
  Status input(uint32_t id, const std::string &role) const {
    const plan::Tensor &t = tensor(id);
    if (t.storage() != plan::Storage::Input || t.dtype() != plan::DType::I32 ||
        shape(id) != std::vector<int64_t>{kTokens})
      return bad(id, role, "I32 [T] in Input");
    return Status::ok();
  }
  /// An arena activation [T, C] of any C; returns C through `cols`.
  Status rows(uint32_t id, const std::string &role, int64_t &cols) const {
    std::vector<int64_t> s = shape(id);
    cols = s.size() == 2 ? s[1] : 0;
    return act(id, role, {kTokens, cols});
  }

  /// Expert ids that come from a router (over `experts`, unless -1): in
  /// range. Returns the router's top-k through `topK`.
  Status routedBy(uint32_t ids, int64_t experts, int64_t &topK) const {
    const plan::Instruction *router = routerOf_[ids];
    if (!router || (experts >= 0 && router->params_as_RouterParams()->num_experts() != experts))
      return need(false, "its expert indices must come from a router" +
                             (experts >= 0 ? " over " + std::to_string(experts) + " experts"
                                           : std::string()));
    topK = router->params_as_RouterParams()->top_k();
    return Status::ok();
  }

  /// The stacked expert weights from input `at` on: gate, up, down or
  /// gate_up, down, over the routed and the always-on experts, of hidden
  /// size `hidden`.
  Status stacks(const plan::ExpertsParams &x, uint32_t at, int64_t hidden) const {
    const int64_t e = x.num_experts() + x.num_shared(), inter = x.intermediate();
    const bool fused = x.fused_gate_up();
    return all({fused ? product(in(at), "gate_up", {e, 2 * inter, hidden})
                      : all({product(in(at), "gate", {e, inter, hidden}),
                             product(in(at + 1), "up", {e, inter, hidden})}),
                product(in(at + (fused ? 1 : 2)), "down", {e, hidden, inter})});
  }

  Status kvWidths(int layer, int64_t k, int64_t v) const {
    const plan::KvLayer *l = p_.kv_cache()->layers()->Get(uint32_t(layer));
    return need(l->k_width() == k && l->v_width() == v,
                "KV-cache layer " + std::to_string(layer) + " holds " +
                    std::to_string(l->k_width()) + " + " + std::to_string(l->v_width()) +
                    " elements per token; the op needs " + std::to_string(k) + " + " +
                    std::to_string(v));
  }

  /// A collective's data is an F32 or BF16 activation; a gathered result
  /// has a leading rank dimension; exchanged rows keep the token dimension
  /// and have ranks x P picks per token when received, with I32 slots.
  Status collective() const {
    const plan::Tensor &x = tensor(in(0));
    const plan::DType dtype = x.dtype();
    const std::vector<int64_t> dims = shape(in(0));
    if (x.storage() != plan::Storage::Arena ||
        (dtype != plan::DType::F32 && dtype != plan::DType::BF16))
      return bad(in(0), "input", "an F32 or BF16 activation in Arena");
    std::vector<int64_t> ranked = dims;
    const int64_t ranks = ranksOf(p_, *inst_);
    ranked.insert(ranked.begin(), ranks);
    switch (inst_->collective()) {
    case plan::CollectiveOp::AllReduce:
      return act(out(0), "output", dims, dtype);
    case plan::CollectiveOp::AllGather:
      if (dims.size() > 3)
        return bad(in(0), "input", "at most 3 dimensions");
      return act(out(0), "output", ranked, dtype);
    case plan::CollectiveOp::AllToAllV: {
      // Rows [T, P, H] out as [T, ranks x P, H] with their slots, or back.
      if (dims.size() != 3 || dims[0] != kTokens || dims[1] < 1 || dims[2] < 1)
        return bad(in(0), "input", "rows [T, P, H]");
      if (inst_->inputs()->size() == 1) {
        if (dims[1] % ranks)
          return bad(in(0), "input", "received rows [T, ranks x P, H]");
        return act(out(0), "output", {kTokens, dims[1] / ranks, dims[2]}, dtype);
      }
      return all({act(in(1), "slots", {kTokens, dims[1]}, plan::DType::I32),
                  act(out(0), "received rows", {kTokens, ranks * dims[1], dims[2]}, dtype),
                  act(out(1), "received slots", {kTokens, ranks * dims[1]}, plan::DType::I32)});
    }
    default:
      return need(false, "unknown collective");
    }
  }

  static Status all(std::initializer_list<Status> list) {
    for (const Status &s : list)
      if (!s)
        return s;
    return Status::ok();
  }

  Status instruction() const {
    int64_t c = 0, k = 0;
    Status st = Status::ok();
    switch (inst_->op()) {
    case plan::OpCode::Embedding:
      c = dim(in(1), -1);
      return all(
          {need(whole(in(0)) == tokens_, "its ids must be the plan's tokens input"),
           // A W8A8 table is tied to a W8A8 LM head: a lookup multiplies
           // nothing and reads its int8 rows times their scales. A table
           // in panels is tied to an LM head in panels: a lookup gathers
           // each row from its panel.
           weight(in(1), "table", {p_.config()->vocab_size(), c}, kQuantized | kW8A8 | kPanels),
           act(out(0), "output", {kTokens, c})});
    case plan::OpCode::RmsNorm:
      if (!(st = rows(in(0), "input", c)))
        return st;
      return all({weight(in(1), "weight", {c}), act(out(0), "output", {kTokens, c})});
    case plan::OpCode::AddRmsNorm:
      if (!(st = rows(in(0), "input", c)))
        return st;
      return all({act(in(1), "second input", {kTokens, c}), weight(in(2), "weight", {c}),
                  act(out(0), "sum", {kTokens, c}), act(out(1), "output", {kTokens, c})});
    case plan::OpCode::Linear: {
      if (!(st = rows(in(0), "input", k)))
        return st;
      int64_t n = dim(in(1), 0);
      return all({product(in(1), "weight", {n, k}),
                  numIn() > 2 ? weight(in(2), "bias", {n}) : Status::ok(),
                  act(out(0), "output", {kTokens, n})});
    }
    case plan::OpCode::Add:
    case plan::OpCode::SiluMul:
      if (!(st = rows(in(0), "first input", c)))
        return st;
      return all({act(in(1), "second input", {kTokens, c}),
                  act(out(0), "output", {kTokens, c})});
    case plan::OpCode::SigmoidGate:
      if (!(st = rows(in(0), "input", c)))
        return st;
      return all({weight(in(1), "gate", {1, c}), act(in(2), "gated input", {kTokens, c}),
                  act(out(0), "output", {kTokens, c})});
    case plan::OpCode::Attention: {
      const auto *a = inst_->params_as_AttentionParams();
      int64_t hd = a->head_dim(), q = a->num_heads() * hd, kv = a->num_kv_heads() * hd;
      return all({act(in(0), "query", {kTokens, q}), act(in(1), "key", {kTokens, kv}),
                  act(in(2), "value", {kTokens, kv}),
                  need(whole(in(3)) == positions_, "its positions must be the plan's positions input"),
                  numIn() > 4 ? weight(in(4), "query norm", {hd}) : Status::ok(),
                  numIn() > 5 ? weight(in(5), "key norm", {hd}) : Status::ok(),
                  need(numIn() != 5, "query and key norms come together"),
                  act(out(0), "output", {kTokens, q}), kvWidths(a->layer(), kv, kv)});
    }
    case plan::OpCode::MlaAttention: {
      const auto *m = inst_->params_as_MlaParams();
      int64_t h = m->num_heads(), rank = m->kv_lora_rank(), nope = m->qk_nope_head_dim(),
              rope = m->qk_rope_head_dim(), v = m->v_head_dim();
      return all({act(in(0), "query", {kTokens, h * (nope + rope)}),
                  act(in(1), "compressed kv", {kTokens, rank + rope}),
                  weight(in(2), "kv norm", {rank}),
                  weight(in(3), "kv_b", {h * (nope + v), rank}, kQuantized),
                  need(whole(in(4)) == positions_, "its positions must be the plan's positions input"),
                  act(out(0), "output", {kTokens, h * v}), kvWidths(m->layer(), rank, rope)});
    }
    case plan::OpCode::Router: {
      const auto *r = inst_->params_as_RouterParams();
      int64_t e = r->num_experts(), topK = r->top_k();
      if (!(st = rows(in(0), "input", c)))
        return st;
      // The router's logits are a linear() (kernels/cpu/Router.cpp).
      return all({product(in(1), "weight", {e, c}),
                  numIn() > 2 ? weight(in(2), "bias", {e}) : Status::ok(),
                  act(out(0), "weights", {kTokens, topK}),
                  act(out(1), "indices", {kTokens, topK}, plan::DType::I32)});
    }
    case plan::OpCode::Experts: {
      const auto *x = inst_->params_as_ExpertsParams();
      int64_t topK = 0;
      if (!(st = rows(in(0), "input", c)) || !(st = routedBy(in(2), x->num_experts(), topK)))
        return st;
      return all({act(in(1), "routing weights", {kTokens, topK}), stacks(*x, 3, c),
                  act(out(0), "output", {kTokens, c})});
    }
    case plan::OpCode::Dispatch: {
      const auto *d = inst_->params_as_DispatchParams();
      int64_t topK = 0;
      if (!(st = rows(in(0), "input", c)) || !(st = routedBy(in(1), d->num_experts(), topK)))
        return st;
      const int64_t picks = topK + d->num_shared();
      return all({act(out(0), "rows", {kTokens, picks, c}),
                  act(out(1), "slots", {kTokens, picks}, plan::DType::I32),
                  act(out(2), "map", {kTokens, picks}, plan::DType::I32)});
    }
    case plan::OpCode::ExpertRows: {
      // Slots and rows may come from another rank: the kernel checks the
      // slots' range.
      std::vector<int64_t> r = shape(in(0));
      if (r.size() != 3)
        return bad(in(0), "rows", "F32 [T, P, H] in Arena");
      return all({act(in(0), "rows", {kTokens, r[1], r[2]}),
                  act(in(1), "slots", {kTokens, r[1]}, plan::DType::I32),
                  stacks(*inst_->params_as_ExpertsParams(), 2, r[2]),
                  act(out(0), "output", {kTokens, r[1], r[2]})});
    }
    case plan::OpCode::Combine: {
      // The map may come from another rank: the kernel checks its range.
      std::vector<int64_t> y = shape(in(0));
      int64_t topK = 0;
      if (y.size() != 3)
        return bad(in(0), "expert rows", "F32 [T, P, H] in Arena");
      if (!(st = routedBy(in(3), -1, topK)))
        return st;
      return all({act(in(0), "expert rows", {kTokens, y[1], y[2]}),
                  act(in(1), "map", {kTokens, y[1]}, plan::DType::I32),
                  need(topK <= y[1], "it combines " + std::to_string(y[1]) +
                                         " rows per token, fewer than the router's " +
                                         std::to_string(topK) + " picks"),
                  act(in(2), "routing weights", {kTokens, topK}),
                  act(out(0), "output", {kTokens, y[2]})});
    }
    }
    return need(false, "unknown op");
  }

  const plan::Plan &p_;
  const plan::Program &prog_;
  const plan::Instruction *inst_ = nullptr;
  std::string where_;
  uint32_t tokens_ = 0, positions_ = 0;
  std::vector<const plan::Instruction *> routerOf_; ///< router whose indices a tensor is
  std::map<int, std::vector<RowRange>> kvUsers_; ///< per KV layer: its attention ops' rows
};

} // namespace

Status checkShapes(const plan::Plan &plan, const plan::Program &program) {
  return Checker(plan, program).run();
}

} // namespace moe::rt
