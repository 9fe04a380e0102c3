//===- Engine.h - continuous batching over a paged KV cache -----*- C++ -*-===//
//
// Many sequences share one Session: each holds a block table into the paged
// KV pool. Every step() runs one batch that mixes decode tokens (one per
// running sequence, first) with chunks of prompts, under a token budget.
// Sequences are admitted while the pool has blocks for their next chunk; when
// a running sequence needs a block and none is free, the newest running
// sequence is preempted: its KV blocks are copied to a host pool (when one is
// configured and has room) and copied back when blocks free up, before any
// new request is admitted; otherwise its blocks are freed and it is
// recomputed later (prompt + tokens generated so far). Either way its output
// does not change.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_ENGINE_H
#define MOE_RUNTIME_ENGINE_H

#include "moe/runtime/Logprobs.h"
#include "moe/runtime/Sampler.h"
#include "moe/runtime/Session.h"
#include "moe/runtime/Stopping.h"
#include "moe/runtime/Tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <list>
#include <unordered_map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace moe::rt {

struct EngineOptions {
  int64_t blockSize = 16;
  int64_t numBlocks = 0;   ///< KV pool; 0: one sequence of the full context
  int64_t tokenBudget = 0; ///< tokens per step; 0: the plan's max_batch_tokens
  int64_t maxWaiting = 1024; ///< queue bound: beyond it submit() rejects
  /// Share the KV blocks of identical prompt prefixes across sequences.
  bool prefixCaching = false;
  /// KV-cache element type instead of the plan's.
  std::optional<plan::DType> kvDtype;
  /// Host memory for the KV of preempted sequences, in bytes; unset: none
  /// (preemption recomputes). Must hold at least one KV block.
  std::optional<uint64_t> hostPoolBytes;
  /// Device memory the engine may use (see SessionOptions); 0: the device's.
  uint64_t memoryLimit = 0;
  /// Back the KV pool with memory at creation (see SessionOptions).
  bool residentKvCache = true;
  /// The job's ranks, for a plan with collectives (see SessionOptions):
  /// every rank must submit the same requests at the same steps.
  Collective *ranks = nullptr;
  /// Where to time every step's launches and collectives (see
  /// SessionOptions); null: none.
  Trace *trace = nullptr;
  /// The plan's tokenizer, for stop strings; null: loaded when a request
  /// first has one.
  std::shared_ptr<const Tokenizer> tokenizer;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  /// The most tokens generated; fewer when it ends (stop). 0 scores the
  /// prompt only (with promptLogprobs): the request ends after its
  /// prefill, FinishReason::Length, no token sampled.
  int64_t maxNewTokens = 16;
  SamplingOptions sampling; ///< temperature, top-k/p, min-p, penalties (Sampler.h)
  StopOptions stop; ///< end-of-sequence tokens, stop tokens and strings (Stopping.h)
  /// Log-probabilities of each generated token (Logprobs.h) with the k
  /// likeliest tokens of its position, k in [0, kMaxTopLogprobs]; unset:
  /// none.
  std::optional<int32_t> logprobs;
  /// The same for each prompt token from the second on, given the tokens
  /// before it (OpenAI's echo with logprobs). Every prompt row of the
  /// request then goes through the LM head, and it takes no KV blocks from
  /// the prefix cache while its prompt is unscored.
  std::optional<int32_t> promptLogprobs;
};

struct GenerationResult {
  int64_t id = 0;
  std::vector<int32_t> tokens; ///< generated
  double submitted = 0, firstToken = 0, finished = 0; ///< seconds, engine clock
  std::vector<double> tokenTimes; ///< when each generated token was sampled
  int preemptions = 0;
  FinishReason finishReason = FinishReason::Length;
  /// With GenerationRequest::logprobs: one entry per token of `tokens`.
  std::vector<LogprobEntry> logprobs;
  /// With GenerationRequest::promptLogprobs: entry i is that of prompt
  /// token i + 1 (the first has none); all of them once the prefill is done.
  std::vector<LogprobEntry> promptLogprobs;
};

struct EngineStats {
  uint64_t steps = 0, prefillTokens = 0, decodeTokens = 0, preemptions = 0,
           recomputedTokens = 0, rejected = 0, cachedTokens = 0;
  int64_t peakBlocks = 0;
  double prefillSeconds = 0, decodeSeconds = 0;
  /// Preemptions by swap to the host pool (the rest of `preemptions`
  /// recompute), swaps back in, bytes each way, and the time spent issuing
  /// the copies (they run on the session's swap stream; the next step's
  /// kernels wait for them).
  uint64_t swapOuts = 0, swapIns = 0, swapOutBytes = 0, swapInBytes = 0;
  int64_t peakHostBlocks = 0;
  double swapSeconds = 0;
  uint64_t cancelled = 0;
  /// Ranks in lockstep: tokens where this rank's own pick differed from
  /// rank 0's, which every rank takes (their logits differed in the last
  /// bits); 0 on rank 0 and on one rank.
  uint64_t picksOfRankZero = 0;
};

/// Where the engine's requests are now.
struct EngineLoad {
  int64_t waiting = 0, running = 0, swapped = 0;
  int64_t usedBlocks = 0, totalBlocks = 0; ///< KV blocks (cached-unused count as free)
  int64_t usedHostBlocks = 0, totalHostBlocks = 0;
};

/// A token sampled for a request in the last step.
struct SampledToken {
  int64_t id;
  int32_t token;
  std::optional<LogprobEntry> logprob; ///< with GenerationRequest::logprobs
};

/// A request's prompt log-probabilities (GenerationResult::promptLogprobs),
/// reported once, as soon as its prefill is done.
struct ScoredPrompt {
  int64_t id;
  std::vector<LogprobEntry> logprobs;
};

/// Fixed-size KV blocks with reference counts and a prefix cache: a full
/// block can be registered under the hash of its tokens and of every token
/// before it; when its last user lets go it stays cached (reusable by a
/// later sequence with the same prefix) until an allocation evicts it, least
/// recently released first.
class BlockManager {
public:
  explicit BlockManager(int64_t blocks);
  /// A block with one reference (free, else the LRU cached one), or -1.
  int32_t allocate();
  void retain(int32_t block);
  void release(int32_t block);
  /// The cached block holding `hash`, retained, or -1.
  int32_t lookup(uint64_t hash);
  /// Makes `block` findable under `hash` (the first block for a hash wins).
  void registerHash(int32_t block, uint64_t hash);
  /// Blocks an allocation can get: free plus cached-unreferenced.
  int64_t freeBlocks() const { return int64_t(free_.size() + lru_.size()); }
  int64_t usedBlocks() const { return int64_t(refs_.size()) - freeBlocks(); }

private:
  std::vector<int32_t> free_;
  std::vector<int32_t> refs_;
  std::list<int32_t> lru_; ///< cached, unreferenced; front = oldest
  std::unordered_map<int32_t, std::list<int32_t>::iterator> inLru_;
  std::unordered_map<uint64_t, int32_t> byHash_;
  std::unordered_map<int32_t, uint64_t> hashOf_;
};

class Engine {
public:
  static Expected<std::unique_ptr<Engine>> create(const LoadedPlan &plan, Device &device,
                                                  const EngineOptions &options);
  /// Queues a request and returns its id; a clear error when the queue is
  /// full or the request can never run (empty, too long, bad token id).
  Expected<int64_t> submit(GenerationRequest request);
  /// Why submit() would refuse `request` whatever the queue holds (the
  /// same error), or ok: for a server that hands it to another rank's
  /// engine of the same plan and options.
  Status check(const GenerationRequest &request);
  /// One batch: decode tokens first, then prompt chunks. With ranks that
  /// hold different tokens it is always one step of all ranks (a joined
  /// one when nothing of this engine's is left to run).
  Status step();
  /// submit() would refuse a request for want of room in the queue.
  bool queueFull() const { return int64_t(waiting_.size()) >= options_.maxWaiting; }
  int64_t maxWaiting() const { return options_.maxWaiting; }
  /// Nothing waiting, running or swapped out.
  bool idle() const { return waiting_.empty() && running_.empty() && swapped_.empty(); }
  /// Results completed since the last call.
  std::vector<GenerationResult> takeFinished();
  /// Every token sampled since the last call, in order. A stop string's
  /// tokens are reported here before check() cuts them from the result.
  std::vector<SampledToken> takeSampled();
  /// The prompt log-probabilities completed since the last call (before
  /// the request's first token comes from takeSampled()).
  std::vector<ScoredPrompt> takeScoredPrompts();
  /// Ends request `id` wherever it is (waiting, running or swapped out):
  /// its KV blocks and host slots are free at once, and its result (the
  /// tokens so far, FinishReason::Cancelled) comes from takeFinished().
  /// False when no such request is pending.
  bool cancel(int64_t id);
  EngineLoad load() const;
  const EngineStats &stats() const { return stats_; }
  int64_t kvBytesPerBlock() const { return kvBytesPerBlock_; }
  /// Blocks the host pool holds (0: no pool).
  int64_t hostBlocks() const { return int64_t(hostFree_.size()) + hostUsed_; }
  /// Seconds on the engine clock (results' timestamps use it).
  double clock() const { return now(); }
  const Session &session() const { return *session_; }
  /// Ranks holding different tokens step together (Session::stepsWithRanks):
  /// with nothing to run now but requests to come, join the other ranks'
  /// step (true when one ran); with this engine's work done, serve theirs
  /// until every rank is done. Neither touches this engine's sequences.
  Expected<bool> joinRanksStep() { return session_->joinStep(); }
  Status waitForRanks() { return session_->waitForRanks(); }

private:
  struct Sequence {
    int64_t id;
    GenerationRequest request;
    std::vector<int32_t> context; ///< prompt + generated
    size_t promptLength = 0;
    int64_t computed = 0;         ///< tokens of context in the KV cache
    std::vector<int32_t> blocks;
    std::vector<uint64_t> hashes; ///< prefix hash of each full block
    std::vector<int32_t> hostSlots; ///< while swapped out: its KV blocks
    Sampler sampler;
    StopRules stop;
    GenerationResult result;
    bool ended = false; ///< it stops here: an end token, a stop string, its token limit
    bool promptReported = false; ///< its prompt log-probabilities went to scored_
    /// With promptLogprobs, the logits of prompt position p score token
    /// p + 1: positions [firstUnscored(), promptLength - 1) are still to
    /// score (kept across a recompute), and scoring() while there are any.
    int64_t firstUnscored() const { return int64_t(result.promptLogprobs.size()); }
    bool scoring() const {
      return request.promptLogprobs && firstUnscored() + 1 < int64_t(promptLength);
    }
    /// The positions of [from, from + count) still to score: [first, end).
    std::pair<int64_t, int64_t> toScore(int64_t from, int64_t count) const {
      if (!scoring())
        return {0, 0};
      return {std::max(firstUnscored(), from), std::min(from + count, int64_t(promptLength) - 1)};
    }
  };
  Engine() = default;
  double now() const;
  bool ensureBlocks(Sequence &s, int64_t tokens);
  /// Prefix hashes of the full blocks of s.context[0, tokens).
  void extendHashes(Sequence &s, int64_t tokens);
  /// Admits the front waiting sequence if its blocks fit; reuses cached
  /// prefix blocks. Returns false (and leaves it waiting) when they do not.
  bool admit(Sequence &s);
  /// The stop rules of a request that can run, else why it cannot.
  Expected<StopRules> rules(const GenerationRequest &request);
  /// Moves running_[index] out: to the host pool if it fits, else back to
  /// the waiting queue to be recomputed.
  Status preempt(size_t index);
  Status swapOut(Sequence &s, int64_t blocks);
  /// Inserts `s` into `queue`, which is ordered by id (submission order).
  template <typename Queue> static void insertById(Queue &queue, std::unique_ptr<Sequence> s);
  /// Swaps sequences back in, oldest first, while their blocks fit.
  Status swapIn();
  void finish(size_t index);
  /// Frees what `s` holds and moves its result to finished_.
  void retire(Sequence &s);
  /// The prompt log-probabilities of the chunk of `s` from position `from`
  /// (`count` rows from batch row `row`), and its report once complete.
  Status scorePrompt(Sequence &s, int64_t from, int64_t count, int64_t row);
  /// The next token of `s` from the logits of batch row `row`.
  Expected<int32_t> pick(Sequence &s, int64_t row);
  /// Ranks in lockstep (several ranks holding the same tokens): every
  /// rank's picks become rank 0's, so that no last bit of a rank's logits
  /// can end a sequence on one rank and not on another.
  Status agreeOnPicks(std::vector<int32_t> &picks);
  /// Appends `next` to `s` (its log-probability from the logits of batch
  /// row `row`) and checks whether `s` ends.
  Status accept(Sequence &s, int64_t row, int32_t next, double time);

  const LoadedPlan *plan_ = nullptr;
  Device *device_ = nullptr;
  std::unique_ptr<Session> session_;
  /// Ranks in lockstep: where rank 0's picks are summed in (host-visible,
  /// one word a batch row).
  std::unique_ptr<Buffer> picks_;
  /// The ranks that hold this rank's tokens and take its group's first
  /// rank's picks (every rank in lockstep; a data group with --dp-attention
  /// --tp); null when none other does.
  Collective *mates_ = nullptr;
  std::unique_ptr<BlockManager> blocks_;
  EngineOptions options_;
  int64_t vocab_ = 0, maxContext_ = 0, kvBytesPerBlock_ = 0;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_; ///< oldest first
  std::deque<std::unique_ptr<Sequence>> swapped_;  ///< oldest first
  std::vector<int32_t> hostFree_;
  int64_t hostUsed_ = 0;
  std::vector<GenerationResult> finished_;
  std::vector<SampledToken> sampled_;
  std::vector<ScoredPrompt> scored_;
  EngineStats stats_;
  int64_t nextId_ = 0;
  double start_ = 0;
  /// A step's logits rows, [tokenBudget][vocab], left uninitialised: a
  /// step writes only the rows it asks for (one a sequence, but for prompt
  /// logprobs), so only those pages become resident (zeroed, 2048 tokens of
  /// a 151,936-token vocabulary were 1.2 GB of RSS).
  std::unique_ptr<float[]> logits_;
};

} // namespace moe::rt

#endif
