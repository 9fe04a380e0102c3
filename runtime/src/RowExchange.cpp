//===- RowExchange.cpp - expert rows to their ranks and back --------------===//
#include "RowExchange.h"

#include "moe/runtime/PlanView.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

namespace moe::rt {

void RowExchangeScratch::reserve(int64_t rows, int64_t width) {
  const auto n = size_t(rows);
  if (order.size() < n)
    order.resize(n);
  if (sendSlots.size() < n)
    sendSlots.resize(n);
  if (sendRows.size() < n * size_t(width)) {
    sendRows.resize(n * size_t(width));
    backRows.resize(n * size_t(width));
  }
}

RowExchange::RowExchange(std::vector<std::vector<int>> holders, int64_t width, int ranks,
                         Scratch &scratch)
    : holders_(std::move(holders)), width_(width), rowsOut_(size_t(ranks)),
      rowsIn_(size_t(ranks)), slotsOut_(size_t(ranks)), slotsIn_(size_t(ranks)),
      backIn_(size_t(ranks)), scratch_(scratch) {}

int RowExchange::destination(int32_t expert, int64_t token) const {
  const std::vector<int> &h = holders_[size_t(expert)];
  if (h.size() == 1)
    return h[0];
  if (std::binary_search(h.begin(), h.end(), rank_))
    return rank_;
  return h[size_t(token) % h.size()];
}

Status RowExchange::send(Stream &stream, Collective &ranks, const TensorView &rows,
                         const TensorView &slots, int64_t firstToken,
                         const TensorView &received, const TensorView &receivedSlots,
                         std::atomic<uint64_t> &sentBytes) {
  rank_ = ranks.rank();
  const int64_t count = slots.rows() * slots.cols(), picks = slots.cols();
  const auto *in = static_cast<const float *>(rows.data);
  const auto *slotOf = static_cast<const int32_t *>(slots.data);
  // Rows in order of their destination (stably: each rank receives a
  // sender's rows in the order dispatch left them, grouped by expert).
  // Ranks that hold the same tokens send a share each: token t by the
  // member t mod shares.
  auto mine = [=, this](int64_t r) { return (firstToken + r / picks) % shares_ == share_; };
  Status packed = stream.enqueueHost([=, this, &sentBytes]() -> Status {
    const size_t n = rowsOut_.size();
    std::vector<size_t> next(n + 1, 0);
    for (int64_t r = 0; r < count; ++r) {
      const int32_t e = slotOf[r];
      if (e < 0 || size_t(e) >= holders_.size())
        return Status::error("all_to_all_v: slot " + std::to_string(e) + " is outside [0, " +
                             std::to_string(holders_.size()) +
                             ") (a corrupt plan: another op overwrote it)");
      if (mine(r))
        ++next[size_t(destination(e, firstToken + r / picks)) + 1];
    }
    std::partial_sum(next.begin(), next.end(), next.begin());
    uint64_t remote = 0;
    for (size_t d = 0; d < n; ++d) {
      slotsOut_[d] = next[d + 1] - next[d];
      rowsOut_[d] = slotsOut_[d] * size_t(width_);
      if (int(d) != rank_)
        remote += slotsOut_[d];
    }
    placed_ = next[n];
    for (int64_t r = 0; r < count; ++r) {
      if (!mine(r))
        continue;
      const size_t place = next[size_t(destination(slotOf[r], firstToken + r / picks))]++;
      scratch_.order[place] = r;
      scratch_.sendSlots[place] = slotOf[r];
      std::memcpy(scratch_.sendRows.data() + place * size_t(width_), in + r * width_,
                  size_t(width_) * sizeof(float));
    }
    sentBytes += remote * (uint64_t(width_) * sizeof(float) + sizeof(int32_t));
    return Status::ok();
  });
  if (!packed)
    return packed;
  const size_t capacity = size_t(receivedSlots.rows() * receivedSlots.cols());
  if (Status st = ranks.allToAllV(stream,
                                  {scratch_.sendRows.data(), DType::F32, scratch_.sendRows.size()},
                                  rowsOut_, {received.data, DType::F32, capacity * size_t(width_)},
                                  rowsIn_);
      !st)
    return st;
  if (Status st = ranks.allToAllV(stream,
                                  {scratch_.sendSlots.data(), DType::I32, scratch_.sendSlots.size()},
                                  slotsOut_, {receivedSlots.data, DType::I32, capacity}, slotsIn_);
      !st)
    return st;
  auto *got = static_cast<int32_t *>(receivedSlots.data);
  return stream.enqueueHost([=, this] {
    const size_t arrived = std::accumulate(slotsIn_.begin(), slotsIn_.end(), size_t(0));
    std::fill(got + arrived, got + capacity, -1);
    return Status::ok();
  });
}

Status RowExchange::back(Stream &stream, Collective &ranks, const TensorView &results,
                         const TensorView &rows, std::atomic<uint64_t> &sentBytes) {
  // What each rank sent here goes back to it, in the order it came.
  const size_t capacity = size_t(results.rows() * results.shape[1]);
  Status counted = stream.enqueueHost([this, &sentBytes] {
    for (size_t d = 0; d < rowsIn_.size(); ++d)
      if (int(d) != rank_)
        sentBytes += rowsIn_[d] * sizeof(float);
    return Status::ok();
  });
  if (!counted)
    return counted;
  if (Status st = ranks.allToAllV(stream, {results.data, DType::F32, capacity * size_t(width_)},
                                  rowsIn_,
                                  {scratch_.backRows.data(), DType::F32, scratch_.backRows.size()},
                                  backIn_);
      !st)
    return st;
  auto *out = static_cast<float *>(rows.data);
  const int64_t count = rows.rows() * rows.shape[1];
  return stream.enqueueHost([=, this] {
    // Rows of another member's share: zeros (its all_reduce adds them).
    if (shares_ > 1)
      std::fill(out, out + count * width_, 0.0f);
    for (size_t place = 0; place < placed_; ++place)
      std::memcpy(out + scratch_.order[size_t(place)] * width_,
                  scratch_.backRows.data() + size_t(place) * size_t(width_),
                  size_t(width_) * sizeof(float));
    return Status::ok();
  });
}

namespace {

/// The expert_rows of decoder layer `layer` in `program`, or null.
const plan::ExpertsParams *expertRowsOf(const plan::Program &program, int layer) {
  for (const plan::Instruction *inst : *program.instructions())
    if (const auto *e = inst->params_as_ExpertsParams();
        e && inst->op() == plan::OpCode::ExpertRows && e->layer() == layer && e->stacked())
      return e;
  return nullptr;
}

/// When the rows that return instruction `i` brings back are then summed
/// among a data group (the ranks holding the same tokens), each member
/// sends its share of them: `exchange` is told its share, and `mates` the
/// group (the same for every exchange of the program).
Status shareAmongMates(const plan::Plan &p, const plan::Program &program, uint32_t i,
                       RowExchange &exchange, std::vector<int> &mates) {
  const auto *insts = program.instructions();
  const uint32_t rows = insts->Get(i)->outputs()->Get(0);
  const plan::Instruction *sum = nullptr;
  for (uint32_t j = i + 1; j < insts->size() && !sum; ++j)
    if (const plan::Instruction *reader = insts->Get(j);
        std::find(reader->inputs()->begin(), reader->inputs()->end(), rows) !=
        reader->inputs()->end())
      sum = reader;
  const std::string where = "instruction " + std::to_string(i) + " (all_to_all_v)";
  const bool shared = sum && sum->collective() == plan::CollectiveOp::AllReduce &&
                      sum->group() >= 0;
  if (!shared) {
    if (!mates.empty())
      return Status::error(where + " returns rows that no all_reduce adds up, but the "
                                   "program's other exchanges share their tokens among ranks " +
                           std::to_string(mates.front()) + " to " +
                           std::to_string(mates.back()));
    return Status::ok();
  }
  const plan::Group &group = *p.groups()->Get(uint32_t(sum->group()));
  std::vector<int> members(group.ranks()->begin(), group.ranks()->end());
  const int m = int(members.size());
  if (group.kind() != plan::GroupKind::Data || members.front() % m ||
      members.back() != members.front() + m - 1 || int(p.programs()->size()) % m)
    return Status::error(where + " returns rows that an all_reduce among " + groupName(group) +
                         " adds up: the ranks holding the same tokens must be a data group of " +
                         "consecutive ranks, as many in each group");
  if (!mates.empty() && mates != members)
    return Status::error(where + " shares its tokens among " + groupName(group) +
                         ", another exchange of the program among other ranks");
  mates = members;
  exchange.shareTokens(program.rank() - members.front(), m);
  return Status::ok();
}

/// The most rows micro-batch `part` has in a step of at most `tokens`
/// tokens (not always its rows at `tokens`: part 2 of 5 has 1 of 2 tokens,
/// none of 3).
int64_t mostRows(const RowRange &part, int64_t tokens) {
  int64_t most = 0;
  for (int64_t t = 0; t <= tokens; ++t)
    most = std::max(most, part.end(t) - part.first(t));
  return most;
}

} // namespace

Expected<std::unique_ptr<RowExchanges>> RowExchanges::find(const plan::Plan &p,
                                                           const plan::Program &program,
                                                           int64_t maxTokens) {
  auto found = std::make_unique<RowExchanges>();
  RowExchanges &x = *found;
  const auto *insts = program.instructions();
  // The exchange whose rows a tensor holds: received ones, and the
  // results an expert_rows computes from them.
  std::map<uint32_t, RowExchange *> exchangeOf;
  for (uint32_t i = 0; i < insts->size(); ++i) {
    const plan::Instruction *inst = insts->Get(i);
    if (inst->collective() == plan::CollectiveOp::None) {
      // Computed from every rank's rows: as many rows.
      for (uint32_t id : *inst->inputs())
        if (x.allRanksRows.count(id))
          x.allRanksRows.insert(inst->outputs()->begin(), inst->outputs()->end());
      if (auto from = exchangeOf.find(inst->inputs()->Get(0));
          inst->op() == plan::OpCode::ExpertRows && from != exchangeOf.end())
        exchangeOf[inst->outputs()->Get(0)] = from->second;
      continue;
    }
    if (inst->collective() != plan::CollectiveOp::AllToAllV)
      continue;
    const std::string where = "instruction " + std::to_string(i) + " (all_to_all_v)";
    if (inst->inputs()->size() == 1) {
      auto from = exchangeOf.find(inst->inputs()->Get(0));
      if (from == exchangeOf.end())
        return Status::error(where + " returns rows that no expert_rows computed from rows an "
                                     "all_to_all_v sent");
      x.returns[i] = from->second;
      if (Status st = shareAmongMates(p, program, i, *from->second, x.mates); !st)
        return st;
      continue;
    }
    // The expert_rows that reads what arrives says the layer; every rank's
    // expert_rows of that layer, which experts each rank holds.
    const plan::ExpertsParams *mine = nullptr;
    for (uint32_t j = i + 1; j < insts->size() && !mine; ++j) {
      const plan::Instruction *reader = insts->Get(j);
      if (reader->op() == plan::OpCode::ExpertRows && reader->collective() ==
                                                          plan::CollectiveOp::None &&
          reader->inputs()->Get(0) == inst->outputs()->Get(0))
        mine = reader->params_as_ExpertsParams();
    }
    if (!mine || !mine->stacked())
      return Status::error(where + " sends rows that no expert_rows of a sharded layer reads");
    std::vector<std::vector<int>> holders(size_t(mine->stacked()));
    for (uint32_t r = 0; r < p.programs()->size(); ++r) {
      const plan::ExpertsParams *e = expertRowsOf(*p.programs()->Get(r), mine->layer());
      for (size_t h = 0; e && e->held() && h < e->held()->size(); ++h) {
        const int32_t x = e->held()->Get(uint32_t(h));
        if (x < 0 || x >= mine->stacked() ||
            (!holders[size_t(x)].empty() && holders[size_t(x)].back() == int(r)))
          return Status::error(where + ": rank " + std::to_string(r) + " holds expert " +
                               std::to_string(x) + " of layer " + std::to_string(mine->layer()) +
                               ", which is not one of its " + std::to_string(mine->stacked()) +
                               " stacked experts or is held twice");
        holders[size_t(x)].push_back(int(r)); // ascending: ranks in order
      }
    }
    for (size_t x = 0; x < holders.size(); ++x)
      if (holders[x].empty())
        return Status::error(where + ": no rank holds expert " + std::to_string(x) +
                             " of layer " + std::to_string(mine->layer()));
    // A micro-batch's received rows hold its part of the plan's most
    // tokens from each rank: no rank's part of fewer tokens may have more.
    const RowRange part = rt::rowsOf(p, *inst);
    const int64_t most = mostRows(part, maxTokens);
    if (most > part.end(maxTokens) - part.first(maxTokens))
      return Status::error(
          where + " exchanges micro-batch " + std::to_string(part.part) + " of " +
          std::to_string(part.parts) + ", which has " + std::to_string(most) +
          " rows in some step of fewer tokens but its received rows hold " +
          std::to_string(part.end(maxTokens) - part.first(maxTokens)) + " at the plan's " +
          std::to_string(maxTokens) + " (compile with a max batch tokens that " +
          std::to_string(part.parts) + " divides, or at most 4 micro-batches)");
    const plan::Tensor *rows = p.tensors()->Get(inst->inputs()->Get(0));
    const int64_t picks = rows->shape()->Get(1), width = rows->shape()->Get(2);
    RowExchangeScratch &scratch = x.scratch[part.part];
    scratch.reserve(most * picks, width);
    auto exchange = std::make_unique<RowExchange>(std::move(holders), width,
                                                  int(p.programs()->size()), scratch);
    exchangeOf[inst->outputs()->Get(0)] = exchange.get();
    x.sends[i] = std::move(exchange);
    x.allRanksRows.insert(inst->outputs()->begin(), inst->outputs()->end());
  }
  return found;
}

} // namespace moe::rt
