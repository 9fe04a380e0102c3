//===- Session.h - run a loaded plan ----------------------------*- C++ -*-===//
#ifndef MOE_RUNTIME_SESSION_H
#define MOE_RUNTIME_SESSION_H

#include "moe/runtime/Collective.h"
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "moe/abi/Schedule.h"
#include "moe/runtime/Trace.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace moe::rt {

struct SessionOptions {
  /// Most tokens of one sequence; 0: the plan's KV-cache context.
  int64_t maxContext = 0;
  /// KV-cache tokens per block.
  int64_t blockSize = 16;
  /// Blocks in the KV pool; 0: enough for one sequence of maxContext.
  int64_t numBlocks = 0;
  /// KV-cache element type instead of the plan's (F32, BF16, I8, F8E4M3).
  std::optional<plan::DType> kvDtype;
  /// Bytes this session may use (weights + activations + KV cache); 0: what
  /// the device has. Checked before anything is allocated.
  uint64_t memoryLimit = 0;
  /// Back each KV block with memory before the first step that writes it
  /// (Device::makeResident): otherwise its first touches land inside the
  /// step's kernels. Blocks no sequence reached take no memory. False:
  /// each page at its first touch (`--prefault off`).
  bool residentKvCache = true;
  /// The job's ranks, for the plan's collective instructions: its size must
  /// be the plan's rank count and its rank the one the plan was loaded for.
  /// Null: one rank, collectives local.
  Collective *ranks = nullptr;
  /// Where to add a span per launch and collective of every step (the
  /// caller writes it out; it must outlive the session). Null: no timing.
  Trace *trace = nullptr;
};

/// Memory one rank needs to run a plan, in bytes, known before it runs.
struct MemoryNeeds {
  uint64_t weights = 0, activations = 0, kvCache = 0;
  uint64_t total() const { return weights + activations + kvCache; }
};
/// The needs of rank `rank` of the plan with a KV cache of `kvTokens` token
/// rows of `kvDtype`; an error when the sizes overflow 64 bits.
Expected<MemoryNeeds> memoryNeeds(const plan::Plan &plan, int rank, uint64_t kvTokens,
                                  plan::DType kvDtype);
/// "1.50 GiB"-style size.
std::string formatBytes(uint64_t bytes);

/// Tokens of one or more sequences run in one forward step.
struct Batch {
  const int32_t *tokens = nullptr, *positions = nullptr;
  /// Per token: the block table of its sequence (block ids in the pool,
  /// covering positions 0 .. position).
  const int32_t *const *blockTables = nullptr;
  int64_t count = 0;
  /// The rows whose logits the caller reads, ascending; null: every row.
  /// Where the plan ends with its LM head on one rank (no collective, no
  /// micro-batches) only these rows go through it, and the other rows of
  /// the logits are left as they were: a prefill's LM head over every
  /// prompt token is most of a vocabulary-sized GEMM per token for nothing.
  const int64_t *logitRows = nullptr;
  int64_t logitCount = 0;
};

/// Tokens routed to each expert of one MoE layer, as counted at run time
/// by the rank that computes them: with expert parallelism a rank counts
/// only the rows its expert_rows computes (none of an expert it does not
/// hold, its replica's share of a replicated one), so that the counts
/// summed over the ranks are every token's picks once.
struct ExpertLoad {
  int layer = -1;                 ///< decoder layer (from the router's location)
  std::vector<uint64_t> counts;   ///< per expert: token selections
};

struct RowExchanges;

/// The state to run a loaded plan: activation arena and a paged KV pool.
class Session {
public:
  static Expected<std::unique_ptr<Session>>
  create(const LoadedPlan &plan, Device &device, const SessionOptions &options = {});
  ~Session();

  /// Runs the model on a batch (count <= maxBatchTokens, positions <
  /// maxContext and covered by each token's block table; earlier positions of
  /// each sequence must already be in the KV cache) and writes the logits of
  /// every token, [count, vocab], to `logits` (of Batch::logitRows' rows
  /// only, when it names them).
  Status forward(const Batch &batch, float *logits);
  /// One sequence that owns the whole pool (blocks 0, 1, ... in order);
  /// `lastOnly`: the last token's logits only (Batch::logitRows).
  Status forward(const int32_t *tokens, const int32_t *positions, int64_t count,
                 float *logits, bool lastOnly = false);
  /// Whether the ranks hold different tokens (data-parallel attention: the
  /// plan exchanges expert rows with all_to_all_v). Then every step is one
  /// of all ranks: each forward agrees with the others first, a rank with
  /// nothing to run now joins their step with joinStep, and every rank
  /// ends with waitForRanks.
  bool stepsWithRanks() const;
  /// With stepsWithRanks, the ranks' data-parallel groups: each attends for
  /// its own sequences (one rank each, or M with --dp-attention --tp M,
  /// consecutive ranks). This rank's group and how many there are; one
  /// group (0 of 1) when every rank holds the same tokens.
  int dataGroup() const;
  int dataGroups() const;
  /// The other members of this rank's data group hold the same tokens and
  /// must sample the same: its collective, or null when it is this rank
  /// alone (or every rank: stepsWithRanks is false).
  Collective *dataGroupRanks() const { return mates_; }
  /// A rank with nothing to run now but more to come: if another rank
  /// steps, runs a step of no tokens of its own (which still computes the
  /// rows of its experts that the others send) and returns true; false
  /// when no rank stepped. False at once when the ranks do not step
  /// together.
  Expected<bool> joinStep();
  /// This rank's work is done: serves the other ranks' steps until every
  /// rank has called this; at once when the ranks do not step together.
  Status waitForRanks();

  int64_t blockSize() const { return blockSize_; }
  int64_t numBlocks() const { return numBlocks_; }

  int64_t maxBatchTokens() const;
  int64_t maxContext() const { return maxContext_; }
  int64_t vocabSize() const;
  /// Bytes of the KV cache this session allocated.
  uint64_t kvBytes() const { return kvBytes_; }
  /// Bytes of one KV block over all layers: the unit of a swap to host.
  uint64_t kvBlockBytes() const { return kvBytes_ / uint64_t(numBlocks_); }
  /// Allocates host-visible swap space of `slots` KV blocks.
  Status reserveSwapSlots(int64_t slots);
  /// Swaps between forwards: enqueue copies of KV block `block` of every
  /// layer into swap slot `slot`, or back, on a stream of their own, and
  /// return. The next forward's kernels wait for them (so a block swapped
  /// out may be handed to another sequence at once) and it reports a copy
  /// that failed.
  Status swapOut(int32_t block, int32_t slot);
  Status swapIn(int32_t block, int32_t slot);
  /// Routing counts of every MoE layer since the session began.
  const std::vector<ExpertLoad> &expertLoad() const { return load_; }
  /// The bytes this rank handed to the plan's collectives so far (the
  /// payload: what the wire carries depends on the algorithm, e.g. a ring
  /// all-reduce sends 2 (N - 1) / N of it).
  uint64_t collectiveBytes() const { return collectiveBytes_.load(); }

private:
  Session(const LoadedPlan &plan, Device &device);
  /// Where an arena tensor's view starts in the arena.
  size_t arenaOffset(const TensorView &v) const;
  /// Enqueues an all_reduce instruction (in -> out, summed over the ranks)
  /// on `stream`.
  Status allReduce(Stream &stream, const TensorView &in, const TensorView &out,
                   Collective &among);
  /// The collective instruction `inst` runs among: its group's, or every rank's.
  Collective &groupOf(const plan::Instruction &inst) const;
  /// Whether `inst` is an expert_rows computing rows other ranks sent
  /// (data-parallel attention).
  bool receivesRows(const plan::Instruction &inst) const;
  /// Enqueues collective instruction `i` (call: its views) on `stream`;
  /// its rows are the step's from token `firstToken` on (a micro-batch's).
  Status collective(uint32_t i, Stream &stream, const KernelCall &call, int64_t firstToken);
  /// Runs a checked batch (no tokens: a step for the other ranks).
  Status run(const Batch &batch, float *logits);
  /// Makes resident the KV blocks `batch` writes that are not yet.
  Status makeResident(const Batch &batch);
  /// Every rank says whether it has tokens this step and whether its work
  /// is done: whether any has tokens, whether all are done.
  struct Agreement {
    bool anyStepping = false, allDone = false;
  };
  Expected<Agreement> agree(bool stepping, bool done);
  const LoadedPlan &plan_;
  Collective *mates_ = nullptr; ///< dataGroupRanks()
  const plan::Program &program_; ///< this rank's
  Device &device_;
  std::unique_ptr<Collective> localRanks_; ///< when the options name none
  Collective *ranks_ = nullptr;
  /// The collective of each of the plan's groups this rank is in (null for
  /// the others), owned by ranks_.
  std::vector<Collective *> groups_;
  Trace *trace_ = nullptr;
  /// Writes the batch into the staging buffer and copies it to inputs_.
  Status stageInputs(const Batch &batch);
  /// The kernel calls of a batch of `count` tokens, built on first use:
  /// every address they hold is fixed for the session's life.
  const std::vector<KernelCall> &bind(int64_t count);

  std::unique_ptr<Buffer> arena_;
  std::vector<std::unique_ptr<Buffer>> kvStorage_;
  /// Per weight file: its device memory (null: another rank's file).
  std::vector<std::unique_ptr<Buffer>> weights_;
  /// Tokens at 0, positions at positionsOffset_, block tables (tableStride_
  /// entries per token) at tablesOffset_: the kernels read inputs_, the
  /// host writes inputsStaging_ (HostVisible).
  std::unique_ptr<Buffer> inputs_, inputsStaging_;
  uint64_t positionsOffset_ = 0, tablesOffset_ = 0;
  int64_t tableStride_ = 0;
  std::unique_ptr<Event> inputsReady_;  ///< streams 1.. wait for the inputs
  std::unique_ptr<Buffer> logits_;      ///< HostVisible: logits copied back
  /// Per router (in load_'s order): a HostVisible buffer its expert ids
  /// are copied back into, its top-k, and this rank's share of each
  /// expert's rows as the layer's expert_rows states it (empty: all).
  struct RouterCounts {
    std::unique_ptr<Buffer> ids;
    size_t topK = 0;
    ExpertShare share;
  };
  std::vector<RouterCounts> routing_;
  /// Per instruction index of an expert_rows with replicas: its rows so far.
  std::map<uint32_t, std::shared_ptr<std::vector<uint64_t>>> rowsSeen_;
  std::map<int64_t, std::vector<KernelCall>> bound_;
  /// The last instruction when it is the LM head that Batch::logitRows may
  /// narrow (see there); -1 otherwise.
  int64_t lmHead_ = -1;
  std::vector<KvLayerView> kv_;
  /// Every KV array (data and scales, k and v, per layer): its buffer and
  /// the bytes one block takes in it; blocks are contiguous in each.
  std::vector<std::pair<Buffer *, size_t>> kvArrays_;
  /// Per KV block: made resident (SessionOptions::residentKvCache; empty
  /// when it is false).
  std::vector<bool> residentBlocks_;
  std::vector<ExpertLoad> load_;
  /// Per instruction: the index in routing_ and load_ of its router's
  /// layer (-1: not a router), and the rows of a step it runs on.
  std::vector<int> routerOf_;
  std::vector<RowRange> rows_;
  int64_t steps_ = 0; ///< runs so far (the trace's step numbers)
  std::atomic<uint64_t> collectiveBytes_{0};
  /// Data-parallel attention: the program's row exchanges (none: empty).
  std::unique_ptr<RowExchanges> exchanges_;
  std::unique_ptr<Buffer> stepFlag_; ///< HostVisible I32 [2]: what agree() sums
  /// Swapped-out KV blocks: slot s at s * kvBlockBytes(), every KV array's
  /// block in kvArrays_' order. Copies run on stream swapStream_ (after
  /// the plan's), swapped_ is recorded after each, and the next forward
  /// waits for it when swapPending_.
  std::unique_ptr<Buffer> swapSpace_;
  std::unique_ptr<Event> swapped_;
  bool swapPending_ = false;
  /// Enqueues the copies of one block between the KV arrays and a slot.
  Status swap(int32_t block, int32_t slot, bool out);
  /// The program's events (format 1.7), and the streams it uses (0..n-1).
  std::vector<std::unique_ptr<Event>> events_;
  int streams_ = 1;
  int64_t maxContext_ = 0, blockSize_ = 0, numBlocks_ = 0;
  uint64_t kvBytes_ = 0;
  std::vector<int32_t> identity_; ///< block table of the one-sequence forward
};

} // namespace moe::rt

#endif
