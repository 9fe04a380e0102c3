//===- Session.cpp - run a loaded plan ------------------------------------===//
//
// Binds every plan tensor to memory (weights: the mapped files; activations:
// one arena; inputs: the caller's arrays), then launches the program's
// instructions in order on their streams.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Session.h"
#include "RowExchange.h"
#include "moe/abi/Kernel.h"
#include "moe/runtime/PlanView.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <tuple>

namespace moe::rt {

namespace {

/// Heads per KV layer (one scale per token and head): GQA kv heads, MLA 1.
std::vector<int64_t> kvHeads(const plan::Plan &p, const plan::Program &program) {
  std::vector<int64_t> heads(p.kv_cache()->layers()->size(), 1);
  for (const plan::Instruction *inst : *program.instructions())
    if (auto *a = inst->params_as_AttentionParams())
      heads[size_t(a->layer())] = a->num_kv_heads();
  return heads;
}

Rope ropeOf(const plan::Rope &r) {
  return {r.inv_freq()->data(), int64_t(r.inv_freq()->size()), r.attention_factor(),
          r.interleaved()};
}

/// An instruction's parameter table as the HAL's struct (the loader has
/// checked that each kernel has its table).
KernelParams kernelParams(const plan::Instruction &inst) {
  if (auto *p = inst.params_as_RmsNormParams())
    return RmsNormParams{p->eps()};
  if (auto *p = inst.params_as_AttentionParams())
    return AttentionParams{p->layer(),        p->num_heads(),     p->num_kv_heads(),
                           p->head_dim(),     p->scale(),         ropeOf(*p->rope()),
                           p->sliding_window(), p->qk_norm_eps()};
  if (auto *p = inst.params_as_MlaParams())
    return MlaParams{p->layer(),
                     p->num_heads(),
                     p->kv_lora_rank(),
                     p->qk_nope_head_dim(),
                     p->qk_rope_head_dim(),
                     p->v_head_dim(),
                     p->scale(),
                     ropeOf(*p->rope()),
                     p->norm_eps()};
  if (auto *p = inst.params_as_RouterParams())
    return RouterParams{p->num_experts(),
                        p->top_k(),
                        Scoring(p->scoring()), // same numbers (Plan.cpp)
                        TopkMethod(p->method()),
                        p->norm_topk_prob(),
                        p->n_group(),
                        p->topk_group(),
                        p->routed_scaling_factor(),
                        p->layer(),
                        RoutingPolicy(p->policy()), // same numbers (Plan.cpp)
                        p->capacity_factor()};
  if (auto *p = inst.params_as_ExpertsParams()) {
    ExpertsParams e{p->num_experts(), p->intermediate(), p->fused_gate_up(),
                    p->num_shared(),  p->grouped(),      p->stacked()};
    auto copy = [](const flatbuffers::Vector<int32_t> *v) {
      return v ? std::vector<int32_t>(v->begin(), v->end()) : std::vector<int32_t>();
    };
    e.held = copy(p->held());
    e.replicas = copy(p->replicas());
    e.replica = copy(p->replica());
    return e;
  }
  if (auto *p = inst.params_as_DispatchParams())
    return DispatchParams{p->num_experts(), p->num_shared()};
  return std::monostate();
}

} // namespace

Expected<std::unique_ptr<Session>> Session::create(const LoadedPlan &loaded, Device &device,
                                                   const SessionOptions &options) {
  const plan::Plan &p = loaded.plan();
  std::unique_ptr<Session> s(new Session(loaded, device));
  if (options.ranks) {
    s->ranks_ = options.ranks;
  } else {
    s->localRanks_ = createLocalCollective();
    s->ranks_ = s->localRanks_.get();
  }
  s->trace_ = options.trace;
  if (s->ranks_->size() != loaded.ranks() || s->ranks_->rank() != loaded.rank())
    return Status::error("the plan was loaded for rank " + std::to_string(loaded.rank()) +
                         " of " + std::to_string(loaded.ranks()) + ", but this process is rank " +
                         std::to_string(s->ranks_->rank()) + " of " +
                         std::to_string(s->ranks_->size()));
  if (s->ranks_->size() > 1 && !s->ranks_->movesDeviceMemory() && !device.hostAddressable())
    return Status::error("the " + s->ranks_->name() + " collective moves host memory, but the " +
                         device.name() +
                         " backend's memory is on the device: run multi-rank plans on the cpu "
                         "backend (no device collective, such as NCCL, is built)");
  // The groups this rank is in, in the plan's order on every rank (making
  // one is collective among its members). Making a group has no deadline
  // of its own (MPI_Comm_create_group blocks): every rank first arrives
  // here within the collectives' deadline, so that a peer stopped or lost
  // before it ends the job with a message instead of a hang.
  if (p.groups() && p.groups()->size() && s->ranks_->size() > 1)
    if (auto arrived = gatherWords(*s->ranks_, device, {int32_t(p.groups()->size())});
        !arrived)
      return Status::error("before forming the plan's process groups: " +
                           arrived.status().message());
  if (p.groups())
    for (const plan::Group *g : *p.groups()) {
      std::vector<int> members(g->ranks()->begin(), g->ranks()->end());
      Collective *mine = nullptr;
      if (std::find(members.begin(), members.end(), loaded.rank()) != members.end()) {
        auto made = s->ranks_->group(members);
        if (!made)
          return Status::error("cannot form " + groupName(*g) + ": " + made.status().message());
        mine = *made;
      }
      s->groups_.push_back(mine);
    }
  for (const plan::Instruction *inst : *s->program_.instructions()) {
    if (inst->collective() == plan::CollectiveOp::AllToAllV && inst->group() >= 0)
      return Status::error("all_to_all_v among " +
                           groupName(*p.groups()->Get(uint32_t(inst->group()))) +
                           " is not run by this runtime yet (only among every rank)");
    if (inst->collective() == plan::CollectiveOp::AllGather)
      return Status::error(std::string(collectiveName(inst->collective())) +
                           " instructions are not run by this runtime yet (no kernel reads "
                           "their [ranks, T, ...] results)");
    if (inst->collective() != plan::CollectiveOp::None)
      continue;
    const std::string kernel = kernelInfo(kernelOf(*inst))->name;
    auto unsupported = [&](const std::string &what) {
      return kernel + what + " is not supported by the " + device.name() + " backend (at " +
             (inst->location() ? inst->location()->str() : "?") + ")";
    };
    // Each weight's dtype is asked; a kernel without weights is asked with
    // F32 (its tensors are f32 activations).
    std::vector<plan::DType> weightTypes;
    for (uint32_t id : *inst->inputs())
      if (const plan::Tensor *t = p.tensors()->Get(id); t->storage() == plan::Storage::Weight) {
        weightTypes.push_back(t->dtype());
        auto refuse = [&](const char *stored, const char *instead) {
          return Status::error(unsupported(std::string(" with ") + stored + " ('" +
                                           (t->name() ? t->name()->str() : "?") + "')") +
                               "; compile the plan with " + instead);
        };
        if (t->layout() == plan::Layout::Panels8 && !device.readsWeights(WeightForm::Panels8))
          return refuse("weights in panels", "--weight-layout=rows");
        // An embedding looks a W8A8 (W4A8) table's rows up: it multiplies
        // nothing.
        if (t->int8_activations() && kernelOf(*inst) != Kernel::Embedding &&
            !device.readsWeights(WeightForm::Int8Activations))
          return t->dtype() == plan::DType::I4
                     ? refuse("W4A8 weights (int8 activations)",
                              "--precision=int4 (int4 weights, f32 activations)")
                     : refuse("W8A8 weights (int8 activations)",
                              "--precision=int8 (int8 weights, f32 activations)");
      }
    const bool weightless = weightTypes.empty();
    if (weightless)
      weightTypes.push_back(plan::DType::F32);
    for (plan::DType type : weightTypes)
      if (!device.supports(kernelOf(*inst), dtypeOf(type)))
        return Status::error(unsupported(
            weightless ? std::string() : std::string(" with ") + dtypeName(type) + " weights"));
  }
  const plan::KvCacheSpec &kv = *p.kv_cache();
  s->maxContext_ = options.maxContext > 0 ? options.maxContext : kv.max_context();
  if (s->maxContext_ > kv.max_context())
    return Status::error("context " + std::to_string(s->maxContext_) +
                         " exceeds the plan's maximum " + std::to_string(kv.max_context()));
  if (options.blockSize < 1 || options.numBlocks < 0)
    return Status::error("KV block size must be positive and the block count >= 0, got " +
                         std::to_string(options.blockSize) + " and " +
                         std::to_string(options.numBlocks));
  s->blockSize_ = options.blockSize;
  s->numBlocks_ = options.numBlocks > 0
                      ? options.numBlocks
                      : (s->maxContext_ + s->blockSize_ - 1) / s->blockSize_;
  plan::DType kvType = options.kvDtype.value_or(kv.dtype());
  if (!device.supportsKvCache(dtypeOf(kvType)))
    return Status::error(std::string("KV-cache dtype ") + dtypeName(kvType) +
                         " is not supported by the " + device.name() + " backend");
  bool scaled = kvType == plan::DType::I8 || kvType == plan::DType::F8E4M3;
  std::vector<int64_t> heads = kvHeads(p, s->program_);
  uint64_t rows = uint64_t(s->numBlocks_) * uint64_t(s->blockSize_);
  auto needs = memoryNeeds(p, loaded.rank(), rows, kvType);
  if (!needs)
    return needs.status();
  uint64_t limit = options.memoryLimit ? std::min(options.memoryLimit, device.memoryBytes())
                                       : device.memoryBytes();
  if (needs->total() > limit)
    return Status::error(
        "the plan needs " + formatBytes(needs->total()) + " (weights " +
        formatBytes(needs->weights) + " + activations " + formatBytes(needs->activations) +
        " at " + std::to_string(p.max_batch_tokens()) + " tokens + KV cache " +
        formatBytes(needs->kvCache) + " for " + std::to_string(rows) + " tokens of " +
        dtypeName(kvType) + "); " +
        (options.memoryLimit && options.memoryLimit < device.memoryBytes()
             ? "the memory limit is " + formatBytes(limit)
             : "the " + device.name() + " device has " + formatBytes(limit)) +
        ". To fit: recompile with a smaller --max-batch-tokens (activations), use a smaller "
        "context or fewer KV blocks, --kv-dtype int8 (KV cache), or more ranks (weights)");
  uint64_t kvBytes = needs->kvCache;
  auto arena = device.allocate(s->program_.arena_bytes(), MemoryKind::DeviceLocal);
  if (!arena)
    return arena.status();
  s->arena_ = arena.take();
  // This rank's weight files, as device memory (the CPU uses the mapping).
  for (uint32_t f = 0; f < p.weight_files()->size(); ++f) {
    s->weights_.emplace_back();
    if (const void *bytes = loaded.fileData(f)) {
      auto w = device.importHost(bytes, p.weight_files()->Get(f)->size());
      if (!w)
        return w.status();
      s->weights_.back() = w.take();
    }
  }
  for (size_t l = 0; l < kv.layers()->size(); ++l) {
    const plan::KvLayer *layer = kv.layers()->Get(uint32_t(l));
    KvLayerView view;
    view.kWidth = layer->k_width();
    view.vWidth = layer->v_width();
    view.heads = heads[l];
    view.blockSize = s->blockSize_;
    view.dtype = dtypeOf(kvType);
    for (auto [width, data, scales] : {std::tuple(view.kWidth, &view.k, &view.kScales),
                                       std::tuple(view.vWidth, &view.v, &view.vScales)}) {
      auto array = [&](size_t rowBytes) -> Expected<void *> {
        auto a = device.allocate(rowBytes * rows, MemoryKind::DeviceLocal);
        if (!a)
          return a.status();
        s->kvArrays_.push_back({a->get(), rowBytes * size_t(s->blockSize_)});
        s->kvStorage_.push_back(a.take());
        return s->kvStorage_.back()->data();
      };
      auto plane = array(size_t(width) * dtypeSize(kvType));
      if (!plane)
        return plane.status();
      *data = *plane;
      if (!scaled)
        continue;
      auto sc = array(size_t(view.heads) * sizeof(float));
      if (!sc)
        return sc.status();
      *scales = static_cast<float *>(*sc);
    }
    s->kv_.push_back(view);
  }
  s->kvBytes_ = kvBytes;
  for (int64_t b = 0; b < s->numBlocks_; ++b)
    s->identity_.push_back(int32_t(b));
  if (options.residentKvCache)
    s->residentBlocks_.assign(size_t(s->numBlocks_), false);
  // Inputs are staged through the HAL: tokens, positions and each token's
  // block table, written on the host into a HostVisible buffer and copied
  // into the DeviceLocal one the kernels read; logits come back through a
  // HostVisible buffer. Their addresses never change, so kernel calls are
  // bound once per batch size.
  const uint64_t maxTokens = uint64_t(p.max_batch_tokens());
  auto aligned = [](uint64_t bytes) { return (bytes + 63) / 64 * 64; };
  s->tableStride_ = (s->maxContext_ + s->blockSize_ - 1) / s->blockSize_;
  s->positionsOffset_ = aligned(maxTokens * 4);
  s->tablesOffset_ = 2 * s->positionsOffset_;
  const uint64_t inputBytes = s->tablesOffset_ + maxTokens * uint64_t(s->tableStride_) * 4;
  for (auto [buffer, kind] : {std::pair(&s->inputs_, MemoryKind::DeviceLocal),
                              std::pair(&s->inputsStaging_, MemoryKind::HostVisible)}) {
    auto b = device.allocate(inputBytes, kind);
    if (!b)
      return b.status();
    *buffer = b.take();
  }
  auto logits = device.allocate(maxTokens * uint64_t(p.config()->vocab_size()) * sizeof(float),
                                MemoryKind::HostVisible);
  if (!logits)
    return logits.status();
  s->logits_ = logits.take();
  s->inputsReady_ = device.createEvent();
  for (const plan::Instruction *inst : *s->program_.instructions()) {
    s->streams_ = std::max(s->streams_, int(inst->stream()) + 1);
    // The loader checked that the events are numbered 0..n-1.
    for (size_t e = 0; inst->records() && e < inst->records()->size(); ++e)
      s->events_.push_back(device.createEvent());
  }
  // Routing counts per router, named by its decoder layer (plans before
  // format 1.6 do not say it: their routers are numbered in order).
  // Each router's expert ids come back through a host-visible buffer.
  // The micro-batches of a layer (its routers of parts 0, 1, ...) count
  // into one entry, each its rows of the ids.
  s->routerOf_.assign(s->program_.instructions()->size(), -1);
  for (uint32_t i = 0; i < s->program_.instructions()->size(); ++i) {
    const plan::Instruction *inst = s->program_.instructions()->Get(i);
    s->rows_.push_back(rowsOf(p, *inst));
    auto *r = inst->params_as_RouterParams();
    if (!r)
      continue;
    auto same = std::find_if(s->load_.begin(), s->load_.end(),
                             [&](const ExpertLoad &l) { return r->layer() >= 0 && l.layer == r->layer(); });
    s->routerOf_[i] = int(same - s->load_.begin());
    if (same != s->load_.end())
      continue;
    s->load_.push_back({r->layer() >= 0 ? r->layer() : int(s->load_.size()),
                        std::vector<uint64_t>(size_t(r->num_experts()))});
    auto ids = device.allocate(maxTokens * uint64_t(r->top_k()) * 4, MemoryKind::HostVisible);
    if (!ids)
      return ids.status();
    s->routing_.push_back({ids.take(), size_t(r->top_k()), {}});
  }
  auto exchanges = RowExchanges::find(p, s->program_, s->maxBatchTokens());
  if (!exchanges)
    return exchanges.status();
  s->exchanges_ = exchanges.take();
  if (const std::vector<int> &mates = s->exchanges_->mates; !mates.empty()) {
    auto group = s->ranks_->group(mates);
    if (!group)
      return group.status();
    s->mates_ = *group;
  }
  // With expert parallelism, of each layer's routed experts only this
  // rank's rows (ExpertsParams.held, replicas, replica).
  std::map<int64_t, std::shared_ptr<std::vector<uint64_t>>> rowsSeenOfLayer;
  for (uint32_t i = 0; i < s->program_.instructions()->size(); ++i) {
    const plan::Instruction &inst = *s->program_.instructions()->Get(i);
    const auto *e = inst.params_as_ExpertsParams();
    if (!e || !e->stacked())
      continue;
    ExpertsParams params = std::get<ExpertsParams>(kernelParams(inst));
    // The micro-batches of a layer number its rows on from each other's.
    if (e->replicas() && !s->receivesRows(inst)) {
      std::shared_ptr<std::vector<uint64_t>> &seen = rowsSeenOfLayer[e->layer()];
      if (!seen)
        seen = std::make_shared<std::vector<uint64_t>>(size_t(e->stacked()), 0);
      params.rowsSeen = s->rowsSeen_[i] = seen;
    }
    for (size_t r = 0; r < s->load_.size(); ++r)
      if (s->load_[r].layer == e->layer())
        s->routing_[r].share = expertShare(params);
  }
  s->lmHead_ = narrowableLmHead(p);
  if (s->stepsWithRanks()) {
    // Each rank counts its own tokens' picks, wherever they are computed.
    for (RouterCounts &c : s->routing_)
      c.share = ExpertShare();
    auto flag = device.allocate(2 * sizeof(int32_t), MemoryKind::HostVisible);
    if (!flag)
      return flag.status();
    s->stepFlag_ = flag.take();
  }
  return std::move(s);
}

Expected<MemoryNeeds> memoryNeeds(const plan::Plan &p, int rank, uint64_t kvTokens,
                                  plan::DType kvDtype) {
  const plan::Program &program = *p.programs()->Get(uint32_t(rank));
  bool scaled = kvDtype == plan::DType::I8 || kvDtype == plan::DType::F8E4M3;
  std::vector<int64_t> heads = kvHeads(p, program);
  MemoryNeeds n;
  n.weights = program.weight_bytes();
  n.activations = program.arena_bytes();
  bool overflow = false;
  auto mul = [&](uint64_t a, uint64_t b) {
    uint64_t r = 0;
    overflow |= __builtin_mul_overflow(a, b, &r);
    return r;
  };
  auto add = [&](uint64_t a, uint64_t b) {
    uint64_t r = 0;
    overflow |= __builtin_add_overflow(a, b, &r);
    return r;
  };
  const auto *layers = p.kv_cache()->layers();
  for (uint32_t l = 0; l < layers->size(); ++l) {
    uint64_t width = uint64_t(layers->Get(l)->k_width()) + uint64_t(layers->Get(l)->v_width());
    uint64_t perToken = add(mul(width, dtypeSize(kvDtype)),
                            scaled ? mul(2 * sizeof(float), uint64_t(heads[l])) : 0);
    n.kvCache = add(n.kvCache, mul(perToken, kvTokens));
  }
  (void)add(add(n.weights, n.activations), n.kvCache); // the total must fit too
  if (overflow)
    return Status::error("the plan's memory needs overflow 64 bits: the plan is corrupt");
  return n;
}

std::string formatBytes(uint64_t bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

bool Session::stepsWithRanks() const { return exchanges_ && !exchanges_->sends.empty(); }

int Session::dataGroup() const {
  if (!stepsWithRanks())
    return 0;
  const std::vector<int> &mates = exchanges_->mates;
  return mates.empty() ? ranks_->rank() : mates.front() / int(mates.size());
}

int Session::dataGroups() const {
  if (!stepsWithRanks())
    return 1;
  return ranks_->size() / std::max(1, int(exchanges_->mates.size()));
}

Session::Session(const LoadedPlan &plan, Device &device)
    : plan_(plan), program_(plan.program()), device_(device) {}

Session::~Session() {
  // Copies still running into or out of this session's memory end first.
  if (swapPending_)
    (void)device_.stream(streams_).synchronize();
}

int64_t Session::maxBatchTokens() const { return plan_.plan().max_batch_tokens(); }
int64_t Session::vocabSize() const { return plan_.plan().config()->vocab_size(); }

Status Session::reserveSwapSlots(int64_t slots) {
  auto space = device_.allocate(size_t(slots) * kvBlockBytes(), MemoryKind::HostVisible);
  if (!space)
    return space.status();
  swapSpace_ = space.take();
  swapped_ = device_.createEvent();
  return Status::ok();
}

Status Session::swapOut(int32_t block, int32_t slot) { return swap(block, slot, true); }
Status Session::swapIn(int32_t block, int32_t slot) { return swap(block, slot, false); }

Status Session::swap(int32_t block, int32_t slot, bool out) {
  if (!swapSpace_ || block < 0 || block >= numBlocks_ || slot < 0 ||
      uint64_t(slot + 1) * kvBlockBytes() > swapSpace_->size())
    return Status::error("swap of KV block " + std::to_string(block) + " and slot " +
                         std::to_string(slot) + " outside the pool or the swap space");
  // The stream after the plan's: forwards have finished when this is called,
  // so the copies need wait for nothing, and the next forward waits for them.
  Stream &stream = device_.stream(streams_);
  // A block swapped in is written whole by the copy, on another thread: a
  // later step must not make it resident (before Linux 5.14 that rewrites
  // a byte of each page, which could undo the copy's).
  if (!out && !residentBlocks_.empty())
    residentBlocks_[size_t(block)] = true;
  size_t at = size_t(slot) * kvBlockBytes();
  for (auto [array, bytes] : kvArrays_) {
    const size_t offset = size_t(block) * bytes;
    if (Status st = out ? stream.copy(*swapSpace_, at, *array, offset, bytes)
                        : stream.copy(*array, offset, *swapSpace_, at, bytes);
        !st)
      return st;
    at += bytes;
  }
  swapPending_ = true;
  return stream.record(*swapped_);
}

Status Session::forward(const int32_t *tokens, const int32_t *positions, int64_t count,
                        float *logits, bool lastOnly) {
  if (count < 1 || count > maxBatchTokens())
    return forward(Batch{tokens, positions, nullptr, count}, logits); // reports it
  for (int64_t t = 0; t < count; ++t)
    if (positions[t] >= numBlocks_ * blockSize_)
      return Status::error("position " + std::to_string(positions[t]) +
                           " is beyond the KV pool of " +
                           std::to_string(numBlocks_ * blockSize_) + " tokens");
  std::vector<const int32_t *> tables(size_t(std::max<int64_t>(count, 0)), identity_.data());
  const int64_t last = count - 1;
  return forward(Batch{tokens, positions, tables.data(), count, lastOnly ? &last : nullptr,
                       lastOnly ? 1 : 0},
                 logits);
}

Status Session::forward(const Batch &batch, float *logits) {
  const int32_t *tokens = batch.tokens, *positions = batch.positions;
  const int64_t count = batch.count;
  if (count < 1 || count > maxBatchTokens())
    return Status::error("batch of " + std::to_string(count) + " tokens; the plan takes 1 to " +
                         std::to_string(maxBatchTokens()) + " (its --max-batch-tokens)");
  for (int64_t t = 0; t < count; ++t) {
    if (tokens[t] < 0 || tokens[t] >= vocabSize())
      return Status::error("token id " + std::to_string(tokens[t]) +
                           " out of vocabulary [0, " + std::to_string(vocabSize()) + ")");
    if (positions[t] < 0 || positions[t] >= maxContext_)
      return Status::error("position " + std::to_string(positions[t]) +
                           " out of the context [0, " + std::to_string(maxContext_) + ")");
    // The block its KV row goes to (the earlier ones were written before).
    if (const int32_t b = batch.blockTables ? batch.blockTables[t][positions[t] / blockSize_] : 0;
        b < 0 || b >= numBlocks_)
      return Status::error("token " + std::to_string(t) + " writes KV block " + std::to_string(b) +
                           ", outside the pool of " + std::to_string(numBlocks_) + " blocks");
  }
  for (int64_t j = 0; batch.logitRows && j < batch.logitCount; ++j)
    if (batch.logitRows[j] < (j ? batch.logitRows[j - 1] + 1 : 0) || batch.logitRows[j] >= count)
      return Status::error("logit rows must ascend within the batch of " +
                           std::to_string(count) + " tokens; row " + std::to_string(j) + " is " +
                           std::to_string(batch.logitRows[j]));
  if (Status st = makeResident(batch); !st)
    return st;
  if (stepsWithRanks())
    if (auto agreed = agree(true, false); !agreed)
      return agreed.status();
  return run(batch, logits);
}

Status Session::makeResident(const Batch &batch) {
  if (residentBlocks_.empty() || !batch.blockTables)
    return Status::ok();
  for (int64_t t = 0; t < batch.count; ++t) {
    const int32_t block = batch.blockTables[t][batch.positions[t] / blockSize_]; // checked
    if (residentBlocks_[size_t(block)])
      continue;
    for (auto [array, bytes] : kvArrays_)
      if (Status st = device_.makeResident(*array, size_t(block) * bytes, bytes); !st)
        return st;
    residentBlocks_[size_t(block)] = true;
  }
  return Status::ok();
}

Expected<Session::Agreement> Session::agree(bool stepping, bool done) {
  auto *flags = static_cast<int32_t *>(stepFlag_->host());
  flags[0] = stepping ? 1 : 0; // ranks with tokens this step
  flags[1] = done ? 0 : 1;     // ranks with work to come
  Stream &s0 = device_.stream(0);
  if (Status st = ranks_->allReduce(s0, {flags, DType::I32, 2}); !st)
    return st;
  if (Status st = s0.synchronize(); !st)
    return st;
  return Agreement{flags[0] > 0, flags[1] == 0};
}

Expected<bool> Session::joinStep() {
  if (!stepsWithRanks())
    return false;
  auto agreed = agree(false, false);
  if (!agreed)
    return agreed.status();
  if (agreed->anyStepping)
    if (Status st = run(Batch{}, nullptr); !st)
      return st;
  return agreed->anyStepping;
}

Status Session::waitForRanks() {
  if (!stepsWithRanks())
    return Status::ok();
  for (;;) {
    auto agreed = agree(false, true);
    if (!agreed)
      return agreed.status();
    if (agreed->allDone)
      return Status::ok();
    if (agreed->anyStepping)
      if (Status st = run(Batch{}, nullptr); !st)
        return st;
  }
}

Status Session::run(const Batch &batch, float *logits) {
  const plan::Plan &p = plan_.plan();
  const int64_t count = batch.count;
  if (swapPending_) // blocks swapped in or handed on are written after the copies
    if (Status st = device_.stream(0).wait(*swapped_); !st)
      return st;
  if (Status st = stageInputs(batch); !st)
    return st;
  const std::vector<KernelCall> &calls = bind(count);
  // Only some rows' logits: the LM head runs on those rows, gathered to the
  // top of its input (rows move up or stay: each copy reads a row no
  // earlier copy wrote).
  const bool someRows = batch.logitRows && lmHead_ >= 0 && batch.logitCount < count;
  const int64_t logitRows = someRows ? batch.logitCount : count;
  Status st = Status::ok();
  for (size_t i = 0; i < calls.size(); ++i) {
    const plan::Instruction *inst = program_.instructions()->Get(uint32_t(i));
    const bool narrowed = someRows && int64_t(i) == lmHead_;
    const KernelCall &call = narrowed && logitRows > 0 ? bind(logitRows)[i] : calls[i];
    Stream &stream = device_.stream(inst->stream());
    if (narrowed) {
      const TensorView &in = calls[i].inputs[0];
      const size_t rowBytes = size_t(in.cols()) * dtypeSize(in.dtype);
      for (int64_t j = 0; j < logitRows && st; ++j)
        if (batch.logitRows[j] != j)
          st = stream.copy(*arena_, arenaOffset(in) + size_t(j) * rowBytes, *arena_,
                           arenaOffset(in) + size_t(batch.logitRows[j]) * rowBytes, rowBytes);
      if (!st)
        break;
    }
    if (inst->waits())
      for (uint32_t e : *inst->waits())
        if (st = stream.wait(*events_[e]); !st)
          break;
    const bool isCollective = inst->collective() != plan::CollectiveOp::None;
    // Work on no rows of this rank's (a step of no tokens of its own, a
    // micro-batch of none: fewer tokens than parts) is skipped, but not the
    // row exchange nor what computes other ranks' rows from it: every rank
    // runs those, whatever its own tokens. The all-reduces skipped are
    // skipped by every rank of their group alike (it holds the same tokens).
    const RowRange rows = rows_[i];
    const bool everyRank =
        inst->collective() == plan::CollectiveOp::AllToAllV ||
        std::any_of(inst->outputs()->begin(), inst->outputs()->end(),
                    [&](uint32_t id) { return exchanges_->allRanksRows.count(id) > 0; });
    const bool idle = (rows.first(count) == rows.end(count) && !everyRank) ||
                      (narrowed && logitRows == 0);
    if (st && !idle) {
      auto enqueue = [&] {
        return isCollective ? collective(uint32_t(i), stream, call, rows.first(count))
                            : stream.launch(call);
      };
      st = trace_ ? trace_->time(stream, int(inst->stream()),
                                 {instructionName(*inst), isCollective ? "collective" : "launch",
                                  inst->location() ? inst->location()->str() : "", count, steps_},
                                 enqueue)
                  : enqueue();
    }
    if (st && !isCollective && call.kernel == Kernel::Router) {
      // Routing statistics (the traffic profile): the expert ids are
      // copied back on the router's stream, before anything it records
      // lets another stream reuse their bytes; counted after the step.
      const TensorView &ids = call.outputs[1];
      RouterCounts &c = routing_[size_t(routerOf_[i])];
      st = stream.copy(*c.ids, size_t(rows.first(count)) * c.topK * sizeof(int32_t), *arena_,
                       arenaOffset(ids), size_t(ids.rows() * ids.cols()) * sizeof(int32_t));
    }
    if (st && inst->records())
      for (uint32_t e : *inst->records())
        if (st = stream.record(*events_[e]); !st)
          break;
    if (!st)
      break;
  }
  ++steps_;
  // A run ends when every stream has finished (a stream nobody waits for
  // may still be writing), also when it failed: nothing may still use this
  // step's inputs after we return.
  for (int i = 0; i < streams_ + (swapPending_ ? 1 : 0); ++i)
    if (Status done = device_.stream(i).synchronize(); !done && st)
      st = std::move(done);
  swapPending_ = false;
  if (!st)
    return st;
  // Of ranks holding the same tokens, the first of the group counts.
  const bool countsOwn = stepsWithRanks() ? exchanges_->mates.empty() ||
                                                exchanges_->mates.front() == ranks_->rank()
                                          : ranks_->rank() == 0;
  for (size_t r = 0; r < routing_.size(); ++r) {
    const RouterCounts &c = routing_[r];
    const auto *ids = static_cast<const int32_t *>(c.ids->host());
    std::vector<uint64_t> picks(load_[r].counts.size(), 0);
    for (size_t i = 0; i < size_t(count) * c.topK; ++i)
      if (ids[i] >= 0 && size_t(ids[i]) < picks.size())
        ++picks[size_t(ids[i])];
    // Replica q of n computes an expert's rows numbered q, q + n, ...,
    // numbered on from the earlier steps' (the kernel has counted this
    // step's in): of rows [before, after), those of its number.
    // Experts the plan does not place (one rank, or tensor parallelism:
    // every rank computes a part of every row): rank 0 counts them. Ranks
    // holding different tokens: each counts its own.
    const ExpertShare &share = c.share;
    for (size_t e = 0; e < picks.size(); ++e) {
      if (share.stack.empty()) {
        if (countsOwn)
          load_[r].counts[e] += picks[e];
        continue;
      }
      if (share.stack[e] < 0)
        continue;
      const uint64_t q = uint64_t(share.replica[e]), n = uint64_t(share.replicas[e]);
      const uint64_t after = share.seen ? (*share.seen)[e] : picks[e], before = after - picks[e];
      auto upTo = [&](uint64_t x) { return x > q ? (x - q + n - 1) / n : 0; };
      load_[r].counts[e] += upTo(after) - upTo(before);
    }
  }
  // The logits come back through a copy into host-visible memory.
  const plan::Tensor *out = p.tensors()->Get(program_.outputs()->Get(0));
  const size_t rowBytes = size_t(vocabSize()) * sizeof(float);
  const size_t bytes = size_t(logitRows) * rowBytes;
  Stream &s0 = device_.stream(0);
  if (Status done = s0.copy(*logits_, 0, *arena_, out->offset(), bytes); !done)
    return done;
  if (Status done = s0.synchronize(); !done)
    return done;
  if (!someRows && bytes)
    std::memcpy(logits, logits_->host(), bytes);
  for (int64_t j = 0; someRows && j < logitRows; ++j)
    std::memcpy(logits + batch.logitRows[j] * vocabSize(),
                static_cast<const uint8_t *>(logits_->host()) + size_t(j) * rowBytes, rowBytes);
  return Status::ok();
}

Status Session::stageInputs(const Batch &batch) {
  const size_t count = size_t(batch.count);
  auto *staging = static_cast<uint8_t *>(inputsStaging_->host());
  if (count) { // a step of no tokens (ranks stepping together) has no arrays
    std::memcpy(staging, batch.tokens, count * 4);
    std::memcpy(staging + positionsOffset_, batch.positions, count * 4);
  }
  // Each token's table up to its own position's block.
  for (size_t t = 0; t < count; ++t)
    std::memcpy(staging + tablesOffset_ + t * size_t(tableStride_) * 4, batch.blockTables[t],
                size_t(batch.positions[t] / blockSize_ + 1) * 4);
  Stream &s0 = device_.stream(0);
  for (auto [offset, bytes] : {std::pair(size_t(0), count * 4),
                               std::pair(size_t(positionsOffset_), count * 4),
                               std::pair(size_t(tablesOffset_),
                                         count * size_t(tableStride_) * 4)})
    if (Status st = s0.copy(*inputs_, offset, *inputsStaging_, offset, bytes); !st)
      return st;
  // Every other stream starts after the inputs are in place.
  if (streams_ > 1) {
    if (Status st = s0.record(*inputsReady_); !st)
      return st;
    for (int i = 1; i < streams_; ++i)
      if (Status st = device_.stream(i).wait(*inputsReady_); !st)
        return st;
  }
  return Status::ok();
}

const std::vector<KernelCall> &Session::bind(int64_t count) {
  auto [it, added] = bound_.try_emplace(count);
  if (!added)
    return it->second;
  const plan::Plan &p = plan_.plan();
  auto view = [&](uint32_t id) {
    const plan::Tensor *t = p.tensors()->Get(id);
    TensorView v;
    v.dtype = dtypeOf(t->dtype());
    v.shape.assign(t->shape()->begin(), t->shape()->end());
    // A micro-batch: its rows of the base (the loader checked the base).
    const RowRange rows = rowsOf(*t);
    const uint32_t whole = baseOf(p, id);
    size_t first = 0;
    if (v.shape[0] == -1) {
      v.shape[0] = exchanges_->allRanksRows.count(id) ? maxBatchTokens() : count;
      first = size_t(rows.first(v.shape[0]));
      v.shape[0] = rows.end(v.shape[0]) - rows.first(v.shape[0]);
    }
    size_t rowBytes = dtypeSize(t->dtype());
    for (size_t d = 1; d < v.shape.size(); ++d)
      rowBytes *= size_t(v.shape[d]);
    auto weight = [&](const plan::Tensor *w) {
      return static_cast<uint8_t *>(weights_[w->weight_file()]->data()) + w->offset();
    };
    switch (t->storage()) {
    case plan::Storage::Weight:
      v.data = weight(t);
      v.panels = t->layout() == plan::Layout::Panels8;
      if (t->group() > 0) {
        v.scales = reinterpret_cast<const float *>(weight(p.tensors()->Get(t->scales())));
        v.group = t->group();
        v.rowGroup = t->row_group();
        v.int8Activations = t->int8_activations();
      }
      break;
    case plan::Storage::Arena:
      v.data = static_cast<uint8_t *>(arena_->data()) + t->offset() + first * rowBytes;
      break;
    case plan::Storage::Input:
      v.data = static_cast<uint8_t *>(inputs_->data()) +
               (whole == program_.inputs()->Get(0) ? 0 : positionsOffset_) + first * rowBytes;
      break;
    }
    return v;
  };
  for (uint32_t i = 0; i < program_.instructions()->size(); ++i) {
    const plan::Instruction *inst = program_.instructions()->Get(i);
    KernelCall call;
    call.kernel = kernelOf(*inst);
    call.params = kernelParams(*inst);
    // A replica that receives rows computes every row it is sent (the
    // sender chose the replica).
    if (auto *e = std::get_if<ExpertsParams>(&call.params); e && receivesRows(*inst)) {
      e->replicas.clear();
      e->replica.clear();
    }
    if (auto seen = rowsSeen_.find(i); seen != rowsSeen_.end())
      std::get<ExpertsParams>(call.params).rowsSeen = seen->second;
    for (uint32_t id : *inst->inputs())
      call.inputs.push_back(view(id));
    for (uint32_t id : *inst->outputs())
      call.outputs.push_back(view(id));
    int layer = kvLayerOf(*inst);
    call.kv = layer >= 0 ? &kv_[size_t(layer)] : nullptr;
    if (call.kv) // the block tables of its rows
      call.blockTables = {static_cast<uint8_t *>(inputs_->data()) + tablesOffset_ +
                              size_t(rows_[i].first(count) * tableStride_) * 4,
                          DType::I32,
                          {rows_[i].end(count) - rows_[i].first(count), tableStride_}};
    it->second.push_back(std::move(call));
  }
  return it->second;
}

size_t Session::arenaOffset(const TensorView &v) const {
  return size_t(static_cast<const uint8_t *>(v.data) -
                static_cast<const uint8_t *>(arena_->data()));
}

Status Session::collective(uint32_t i, Stream &stream, const KernelCall &call,
                           int64_t firstToken) {
  // create() refused every collective but all_reduce and all_to_all_v.
  if (auto e = exchanges_->sends.find(i); e != exchanges_->sends.end())
    return e->second->send(stream, *ranks_, call.inputs[0], call.inputs[1], firstToken,
                           call.outputs[0], call.outputs[1], collectiveBytes_);
  if (auto r = exchanges_->returns.find(i); r != exchanges_->returns.end())
    return r->second->back(stream, *ranks_, call.inputs[0], call.outputs[0], collectiveBytes_);
  return allReduce(stream, call.inputs[0], call.outputs[0],
                   groupOf(*program_.instructions()->Get(i)));
}

bool Session::receivesRows(const plan::Instruction &inst) const {
  return kernelOf(inst) == Kernel::ExpertRows && inst.collective() == plan::CollectiveOp::None &&
         exchanges_->allRanksRows.count(inst.inputs()->Get(0)) > 0;
}

Collective &Session::groupOf(const plan::Instruction &inst) const {
  return inst.group() >= 0 ? *groups_[size_t(inst.group())] : *ranks_;
}

Status Session::allReduce(Stream &stream, const TensorView &in, const TensorView &out,
                          Collective &among) {
  size_t count = 1;
  for (int64_t d : out.shape)
    count *= size_t(d);
  // The sum is taken in place, in the output: the input is copied there
  // first (both are arena tensors, disjoint while both live).
  if (in.data != out.data)
    if (Status st = stream.copy(*arena_, arenaOffset(out), *arena_, arenaOffset(in),
                                count * dtypeSize(in.dtype));
        !st)
      return st;
  collectiveBytes_ += count * dtypeSize(out.dtype);
  return among.allReduce(stream, {out.data, out.dtype, count});
}

} // namespace moe::rt
