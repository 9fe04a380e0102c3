//===- RowExchange.h - expert rows to their ranks and back ------*- C++ -*-===//
//
// The all_to_all_v pair of a layer whose ranks hold different tokens
// (data-parallel attention with expert parallelism): each dispatched row
// goes, with its slot, to the rank that holds its expert, and comes back
// after that rank's expert_rows into the place it left. Runs as host work
// on the plan's collective stream, so that the routing of the step decides
// the counts: the arena must be host-addressable (as the MPI collective
// also assumes of device memory).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_SRC_ROWEXCHANGE_H
#define MOE_RUNTIME_SRC_ROWEXCHANGE_H

#include "moe/runtime/Collective.h"
#include "moe/abi/KernelCall.h"
#include "moe/runtime/Plan.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

namespace moe::rt {

/// Host memory the exchanges of one micro-batch share (they run one after
/// another: a layer's rows come back before the next layer's go out; the
/// parts of a layer are in flight together, each with its own).
struct RowExchangeScratch {
  std::vector<int64_t> order; ///< the row of each place in the send buffer
  std::vector<float> sendRows, backRows;
  std::vector<int32_t> sendSlots;
  /// Room for `rows` rows of `width` floats.
  void reserve(int64_t rows, int64_t width);
};

class RowExchange {
public:
  using Scratch = RowExchangeScratch;

  /// `holders[e]`: the ranks holding a replica of stacked expert e
  /// (ascending); rows of `width` floats (`scratch` has room for a step's
  /// and outlives this). A row goes to this rank's replica when it holds
  /// one, else to holder t mod n of its expert's n, t its token in the
  /// step (so that micro-batches choose as the whole step does).
  RowExchange(std::vector<std::vector<int>> holders, int64_t width, int ranks, Scratch &scratch);

  /// Enqueues the exchange of `rows` ([T, P, H]) and `slots` ([T, P]),
  /// the step's tokens from `firstToken` on (a micro-batch's), into
  /// `received` and `receivedSlots` (packed from the front, the unused
  /// slots -1). `sentBytes` grows by the bytes sent to other ranks.
  Status send(Stream &stream, Collective &ranks, const TensorView &rows,
              const TensorView &slots, int64_t firstToken, const TensorView &received,
              const TensorView &receivedSlots, std::atomic<uint64_t> &sentBytes);
  /// Sends only the rows of tokens t with t mod `shares` = `share`: the
  /// ranks holding the same tokens share them (their results come back
  /// into zeros, an all_reduce among them adds the shares).
  void shareTokens(int share, int shares) { share_ = share, shares_ = shares; }
  /// Enqueues the return of the last exchange's rows, computed in `results`
  /// (as `received`), into `rows` (as sent).
  Status back(Stream &stream, Collective &ranks, const TensorView &results,
              const TensorView &rows, std::atomic<uint64_t> &sentBytes);

private:
  /// The rank row `row` (of token `token`) with slot `expert` goes to.
  int destination(int32_t expert, int64_t token) const;
  std::vector<std::vector<int>> holders_;
  int64_t width_ = 0;
  int rank_ = 0, share_ = 0, shares_ = 1;
  /// Rows the last exchange sent (places in the send order).
  size_t placed_ = 0;
  /// The last exchange: the elements sent to and received from each rank
  /// (rows, then slots), and where its rows wait (the order in `scratch_`).
  std::vector<size_t> rowsOut_, rowsIn_, slotsOut_, slotsIn_, backIn_;
  Scratch &scratch_;
};

/// The row exchanges of one rank's program.
struct RowExchanges {
  /// Per all_to_all_v that sends rows, its exchange; per one that returns
  /// them, the exchange it returns (the one whose received rows the
  /// expert_rows that computed them read: a micro-batch's own).
  std::map<uint32_t, std::unique_ptr<RowExchange>> sends;
  std::map<uint32_t, RowExchange *> returns;
  /// Tensors holding every rank's rows (received ones and what is computed
  /// from them): bound at the plan's most tokens whatever a step's count.
  std::set<uint32_t> allRanksRows;
  /// Per micro-batch (0 without them).
  std::map<int64_t, RowExchangeScratch> scratch;
  /// The ranks holding this rank's tokens, which share its exchanges
  /// (--dp-attention --tp: its data group); empty when it holds its own.
  std::vector<int> mates;

  /// Those of `program` (rank `rank`'s of plan `p`), steps of at most
  /// `maxTokens` tokens: each sending all_to_all_v's owners from every
  /// rank's expert_rows of its layer. An error names the instruction,
  /// also one of a micro-batch that another rank's fewer tokens could
  /// give more rows than its part of the received rows holds.
  static Expected<std::unique_ptr<RowExchanges>> find(const plan::Plan &p,
                                                      const plan::Program &program,
                                                      int64_t maxTokens);
};

} // namespace moe::rt

#endif
