//===- Engine.cpp - continuous batching over a paged KV cache ------------===//
#include "moe/runtime/Engine.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <new>

namespace moe::rt {

BlockManager::BlockManager(int64_t blocks) : refs_(size_t(blocks), 0) {
  for (int64_t b = blocks - 1; b >= 0; --b)
    free_.push_back(int32_t(b));
}

int32_t BlockManager::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    inLru_.erase(b);
    byHash_.erase(hashOf_[b]);
    hashOf_.erase(b);
  } else {
    return -1;
  }
  refs_[size_t(b)] = 1;
  return b;
}

void BlockManager::retain(int32_t block) {
  if (refs_[size_t(block)]++ == 0) {
    auto it = inLru_.find(block);
    lru_.erase(it->second);
    inLru_.erase(it);
  }
}

void BlockManager::release(int32_t block) {
  if (--refs_[size_t(block)] != 0)
    return;
  if (hashOf_.count(block)) {
    lru_.push_back(block);
    inLru_[block] = std::prev(lru_.end());
  } else {
    free_.push_back(block);
  }
}

int32_t BlockManager::lookup(uint64_t hash) {
  auto it = byHash_.find(hash);
  if (it == byHash_.end())
    return -1;
  retain(it->second);
  return it->second;
}

void BlockManager::registerHash(int32_t block, uint64_t hash) {
  if (byHash_.count(hash) || hashOf_.count(block))
    return;
  byHash_[hash] = block;
  hashOf_[block] = hash;
}

Expected<std::unique_ptr<Engine>> Engine::create(const LoadedPlan &plan, Device &device,
                                                 const EngineOptions &options) {
  std::unique_ptr<Engine> e(new Engine());
  e->options_ = options;
  e->plan_ = &plan;
  SessionOptions so;
  so.blockSize = options.blockSize;
  so.numBlocks = options.numBlocks;
  so.kvDtype = options.kvDtype;
  so.memoryLimit = options.memoryLimit;
  so.residentKvCache = options.residentKvCache;
  so.ranks = options.ranks;
  so.trace = options.trace;
  auto session = Session::create(plan, device, so);
  if (!session)
    return session.status();
  e->session_ = session.take();
  int64_t maxBatch = e->session_->maxBatchTokens();
  if (e->options_.tokenBudget == 0)
    e->options_.tokenBudget = maxBatch;
  if (e->options_.tokenBudget < 1 || e->options_.tokenBudget > maxBatch)
    return Status::error("token budget " + std::to_string(options.tokenBudget) +
                         " must lie in [1, " + std::to_string(maxBatch) +
                         "] (the plan's --max-batch-tokens)");
  if (options.maxWaiting < 1)
    return Status::error("the waiting queue must hold at least 1 request, got " +
                         std::to_string(options.maxWaiting));
  e->blocks_ = std::make_unique<BlockManager>(e->session_->numBlocks());
  e->vocab_ = e->session_->vocabSize();
  e->maxContext_ = e->session_->maxContext();
  e->kvBytesPerBlock_ = int64_t(e->session_->kvBlockBytes());
  if (options.hostPoolBytes) {
    uint64_t slots = *options.hostPoolBytes / uint64_t(e->kvBytesPerBlock_);
    if (slots == 0)
      return Status::error("a host pool of " + std::to_string(*options.hostPoolBytes) +
                           " bytes holds no KV block (" + std::to_string(e->kvBytesPerBlock_) +
                           " bytes each); give it at least that, or none to preempt by "
                           "recompute");
    if (Status st = e->session_->reserveSwapSlots(int64_t(slots)); !st)
      return Status::error("cannot allocate a host pool of " +
                           std::to_string(slots * uint64_t(e->kvBytesPerBlock_)) +
                           " bytes: " + st.message());
    for (uint64_t b = slots; b-- > 0;)
      e->hostFree_.push_back(int32_t(b));
  }
  e->logits_.reset(new float[size_t(e->options_.tokenBudget * e->vocab_)]);
  e->device_ = &device;
  e->mates_ = !options.ranks                       ? nullptr
              : !e->session_->stepsWithRanks()      ? options.ranks
                                                    : e->session_->dataGroupRanks();
  if (e->mates_ && e->mates_->size() > 1) {
    auto picks = device.allocate(size_t(e->options_.tokenBudget) * sizeof(int32_t),
                                 MemoryKind::HostVisible);
    if (!picks)
      return picks.status();
    e->picks_ = picks.take();
  }
  e->start_ = e->now();
  return std::move(e);
}

double Engine::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
             .count() -
         start_;
}

Expected<StopRules> Engine::rules(const GenerationRequest &request) {
  auto reject = [](const std::string &why) -> Expected<StopRules> {
    return Status::error(why);
  };
  if (request.prompt.empty())
    return reject("empty prompt");
  if (request.maxNewTokens < 0 || (request.maxNewTokens == 0 && !request.promptLogprobs))
    return reject("max new tokens must be >= 1 (0 only to score the prompt, with prompt "
                  "logprobs), got " + std::to_string(request.maxNewTokens));
  for (const auto &[name, k] : {std::pair{"logprobs", request.logprobs},
                                std::pair{"prompt logprobs", request.promptLogprobs}})
    if (k && (*k < 0 || *k > kMaxTopLogprobs))
      return reject(std::string(name) + " must lie in [0, " + std::to_string(kMaxTopLogprobs) +
                    "], got " + std::to_string(*k));
  if (Status st = validate(request.sampling); !st)
    return reject(st.message());
  if (request.stop.minTokens > request.maxNewTokens)
    return reject("min tokens (" + std::to_string(request.stop.minTokens) +
                  ") exceed max new tokens (" + std::to_string(request.maxNewTokens) + ")");
  int64_t total = int64_t(request.prompt.size()) + request.maxNewTokens;
  if (total > maxContext_)
    return reject("prompt (" + std::to_string(request.prompt.size()) + ") + new tokens (" +
                  std::to_string(request.maxNewTokens) + ") exceed the context of " +
                  std::to_string(maxContext_) + " tokens");
  int64_t need = (total + options_.blockSize - 1) / options_.blockSize;
  if (need > session_->numBlocks())
    return reject("needs " + std::to_string(need) + " KV blocks, the pool has " +
                  std::to_string(session_->numBlocks()));
  for (int32_t t : request.prompt)
    if (t < 0 || t >= vocab_)
      return reject("token id " + std::to_string(t) + " out of vocabulary [0, " +
                    std::to_string(vocab_) + ")");
  if (!request.stop.strings.empty() && !options_.tokenizer) {
    auto tokenizer = Tokenizer::forPlan(plan_->plan());
    if (!tokenizer)
      return reject("stop strings need a tokenizer: " + tokenizer.status().message());
    options_.tokenizer = *tokenizer;
  }
  return StopRules::create(plan_->plan(), request.stop, options_.tokenizer);
}

Status Engine::check(const GenerationRequest &request) {
  auto stop = rules(request);
  return stop ? Status::ok() : Status::error("request rejected: " + stop.status().message());
}

Expected<int64_t> Engine::submit(GenerationRequest request) {
  auto reject = [&](const std::string &why) -> Expected<int64_t> {
    ++stats_.rejected;
    return Status::error("request rejected: " + why);
  };
  if (int64_t(waiting_.size()) >= options_.maxWaiting)
    return reject("the waiting queue is full (" + std::to_string(waiting_.size()) +
                  " requests); retry later");
  auto stop = rules(request);
  if (!stop)
    return reject(stop.status().message());
  const int64_t total = int64_t(request.prompt.size()) + request.maxNewTokens;
  Sampler sampler(request.sampling, request.prompt, stop->minTokens());
  auto s = std::make_unique<Sequence>(Sequence{nextId_++, request, request.prompt,
                                               request.prompt.size(), 0, {}, {}, {},
                                               std::move(sampler), stop.take(), {}});
  s->result.id = s->id;
  s->result.submitted = now();
  s->blocks.reserve(size_t((total + options_.blockSize - 1) / options_.blockSize));
  waiting_.push_back(std::move(s));
  return waiting_.back()->id;
}

void Engine::extendHashes(Sequence &s, int64_t tokens) {
  for (int64_t b = int64_t(s.hashes.size()); (b + 1) * options_.blockSize <= tokens; ++b) {
    uint64_t h = b ? s.hashes.back() : 0x6a09e667f3bcc909ull;
    for (int64_t i = b * options_.blockSize; i < (b + 1) * options_.blockSize; ++i)
      h = (h ^ uint64_t(uint32_t(s.context[size_t(i)]))) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
    s.hashes.push_back(h);
  }
}

bool Engine::admit(Sequence &s) {
  // A prompt still to score needs the logits of its rows: none from the
  // cache, whose blocks hold KV but no logits.
  if (options_.prefixCaching && !s.scoring()) {
    // Reuse full cached blocks, but leave at least the last prompt token to
    // compute: its logits pick the next token.
    extendHashes(s, int64_t(s.context.size()) - 1);
    for (uint64_t h : s.hashes) {
      int32_t b = blocks_->lookup(h);
      if (b < 0)
        break;
      s.blocks.push_back(b);
      s.computed += options_.blockSize;
    }
  }
  int64_t whole = (int64_t(s.context.size()) + options_.blockSize - 1) / options_.blockSize;
  if (whole - int64_t(s.blocks.size()) > blocks_->freeBlocks()) {
    for (int32_t b : s.blocks)
      blocks_->release(b);
    s.blocks.clear();
    s.computed = 0;
    return false;
  }
  stats_.cachedTokens += uint64_t(s.computed);
  // All of the prompt's blocks now, so its later chunks never wait.
  ensureBlocks(s, int64_t(s.context.size()));
  return true;
}

bool Engine::ensureBlocks(Sequence &s, int64_t tokens) {
  int64_t need = (tokens + options_.blockSize - 1) / options_.blockSize - int64_t(s.blocks.size());
  if (need > blocks_->freeBlocks())
    return false;
  for (int64_t i = 0; i < need; ++i)
    s.blocks.push_back(blocks_->allocate());
  return true;
}

template <typename Queue>
void Engine::insertById(Queue &queue, std::unique_ptr<Sequence> s) {
  auto at = std::upper_bound(queue.begin(), queue.end(), s->id,
                             [](int64_t id, const auto &q) { return id < q->id; });
  queue.insert(at, std::move(s));
}

Status Engine::preempt(size_t index) {
  std::unique_ptr<Sequence> s = std::move(running_[index]);
  running_.erase(running_.begin() + long(index));
  ++s->result.preemptions;
  ++stats_.preemptions;
  int64_t filled = (s->computed + options_.blockSize - 1) / options_.blockSize;
  if (filled > 0 && filled <= int64_t(hostFree_.size())) {
    if (Status st = swapOut(*s, filled); !st)
      return st;
    insertById(swapped_, std::move(s));
    return Status::ok();
  }
  for (int32_t b : s->blocks)
    blocks_->release(b);
  s->blocks.clear();
  stats_.recomputedTokens += uint64_t(s->computed);
  s->computed = 0;
  // Running sequences are older than waiting ones: back to the front.
  waiting_.push_front(std::move(s));
  return Status::ok();
}

Status Engine::swapOut(Sequence &s, int64_t blocks) {
  double t0 = now();
  for (int64_t b = 0; b < blocks; ++b) {
    int32_t slot = hostFree_.back();
    hostFree_.pop_back();
    s.hostSlots.push_back(slot);
    if (Status st = session_->swapOut(s.blocks[size_t(b)], slot); !st)
      return st;
  }
  for (int32_t b : s.blocks)
    blocks_->release(b);
  s.blocks.clear();
  hostUsed_ += blocks;
  ++stats_.swapOuts;
  stats_.swapOutBytes += uint64_t(blocks * kvBytesPerBlock_);
  stats_.peakHostBlocks = std::max(stats_.peakHostBlocks, hostUsed_);
  stats_.swapSeconds += now() - t0;
  return Status::ok();
}

Status Engine::swapIn() {
  while (!swapped_.empty()) {
    Sequence &s = *swapped_.front();
    int64_t need = (int64_t(s.context.size()) + options_.blockSize - 1) / options_.blockSize;
    if (need > blocks_->freeBlocks())
      break;
    double t0 = now();
    for (int32_t slot : s.hostSlots) {
      s.blocks.push_back(blocks_->allocate());
      if (Status st = session_->swapIn(s.blocks.back(), slot); !st)
        return st;
      hostFree_.push_back(slot);
    }
    int64_t moved = int64_t(s.hostSlots.size());
    hostUsed_ -= moved;
    s.hostSlots.clear();
    ensureBlocks(s, int64_t(s.context.size()));
    ++stats_.swapIns;
    stats_.swapInBytes += uint64_t(moved * kvBytesPerBlock_);
    stats_.swapSeconds += now() - t0;
    insertById(running_, std::move(swapped_.front()));
    swapped_.pop_front();
  }
  return Status::ok();
}

void Engine::retire(Sequence &s) {
  for (int32_t b : s.blocks)
    blocks_->release(b);
  s.blocks.clear();
  for (int32_t slot : s.hostSlots)
    hostFree_.push_back(slot);
  hostUsed_ -= int64_t(s.hostSlots.size());
  s.hostSlots.clear();
  s.result.finished = now();
  finished_.push_back(std::move(s.result));
}

void Engine::finish(size_t index) {
  retire(*running_[index]);
  running_.erase(running_.begin() + long(index));
}

bool Engine::cancel(int64_t id) {
  auto take = [&](auto &queue) {
    auto it = std::find_if(queue.begin(), queue.end(), [&](const auto &s) { return s->id == id; });
    if (it == queue.end())
      return false;
    (*it)->result.finishReason = FinishReason::Cancelled;
    retire(**it);
    queue.erase(it);
    ++stats_.cancelled;
    return true;
  };
  return take(running_) || take(waiting_) || take(swapped_);
}

EngineLoad Engine::load() const {
  EngineLoad l;
  l.waiting = int64_t(waiting_.size());
  l.running = int64_t(running_.size());
  l.swapped = int64_t(swapped_.size());
  l.usedBlocks = blocks_->usedBlocks();
  l.totalBlocks = session_->numBlocks();
  l.usedHostBlocks = hostUsed_;
  l.totalHostBlocks = hostBlocks();
  return l;
}

Status Engine::step() {
  struct Chunk {
    Sequence *seq;
    int64_t offset, count;
  };
  std::vector<Chunk> chunks;
  std::vector<int32_t> tokens, positions;
  std::vector<const int32_t *> tables;
  int64_t budget = options_.tokenBudget, decodeTokens = 0;
  auto add = [&](Sequence &s, int64_t n) {
    chunks.push_back({&s, int64_t(tokens.size()), n});
    for (int64_t i = 0; i < n; ++i) {
      tokens.push_back(s.context[size_t(s.computed + i)]);
      positions.push_back(int32_t(s.computed + i));
      tables.push_back(s.blocks.data());
    }
    budget -= n;
  };
  // Swapped-out sequences come back first: they are older than any waiting.
  if (Status st = swapIn(); !st)
    return st;
  // Decode: one token per running sequence, oldest first; when blocks run
  // out the newest running sequence makes room.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence &s = *running_[i];
    if (int64_t(s.context.size()) - s.computed != 1)
      continue;
    bool preemptedSelf = false;
    while (!ensureBlocks(s, s.computed + 1)) {
      size_t victim = running_.size() - 1;
      preemptedSelf = victim == i;
      if (Status st = preempt(victim); !st)
        return st;
      if (preemptedSelf)
        break;
    }
    if (preemptedSelf)
      break;
    add(s, 1);
    ++decodeTokens;
  }
  // Prefill: unfinished prompts of running sequences, then new admissions
  // (a whole prompt's blocks must be free to admit it).
  for (auto &s : running_) {
    int64_t pending = int64_t(s->context.size()) - s->computed;
    if (pending <= 1 || budget == 0)
      continue;
    int64_t n = std::min(pending, budget);
    if (ensureBlocks(*s, s->computed + n))
      add(*s, n);
  }
  while (budget > 0 && !waiting_.empty() && swapped_.empty()) {
    Sequence &s = *waiting_.front();
    if (!admit(s))
      break;
    std::unique_ptr<Sequence> owned = std::move(waiting_.front());
    waiting_.pop_front();
    insertById(running_, std::move(owned));
    add(s, std::min(int64_t(s.context.size()) - s.computed, budget));
  }
  if (chunks.empty()) {
    if (!idle())
      return Status::error("scheduler made no progress: no KV blocks for any request");
    // Ranks holding different tokens: a step is one of all ranks, also
    // when this one's work went (joinStep).
    auto joined = session_->joinStep();
    return joined ? Status::ok() : joined.status();
  }

  // Only the rows whose logits are read go through the LM head: those that
  // pick a token (a chunk that reaches the end of its sequence's context: a
  // decode token, a prompt's last) and those that score a prompt token not
  // scored yet (promptLogprobs; not again after a recompute). Ascending;
  // reserved, so that even an empty list is not null (every row).
  std::vector<int64_t> logitRows;
  logitRows.reserve(tokens.size());
  for (const Chunk &c : chunks) {
    const Sequence &s = *c.seq;
    for (auto [p, end] = s.toScore(s.computed, c.count); p < end; ++p)
      logitRows.push_back(c.offset + p - s.computed);
    if (s.computed + c.count == int64_t(s.context.size()) && s.request.maxNewTokens > 0)
      logitRows.push_back(c.offset + c.count - 1);
  }
  double t0 = now();
  Batch batch{tokens.data(), positions.data(), tables.data(), int64_t(tokens.size()),
              logitRows.data(), int64_t(logitRows.size())};
  if (Status st = session_->forward(batch, logits_.get()); !st)
    return st;
  double t1 = now(), spent = t1 - t0;
  double decodeShare = double(decodeTokens) / double(tokens.size());
  stats_.decodeSeconds += spent * decodeShare;
  stats_.prefillSeconds += spent * (1 - decodeShare);
  stats_.decodeTokens += uint64_t(decodeTokens);
  stats_.prefillTokens += tokens.size() - uint64_t(decodeTokens);
  ++stats_.steps;
  stats_.peakBlocks = std::max(stats_.peakBlocks, blocks_->usedBlocks());

  std::vector<std::pair<Sequence *, int64_t>> picking; // the sequences that pick, their rows
  for (const Chunk &c : chunks) {
    Sequence &s = *c.seq;
    if (s.request.promptLogprobs)
      if (Status st = scorePrompt(s, s.computed, c.count, c.offset); !st)
        return st;
    s.computed += c.count;
    if (options_.prefixCaching) {
      // Blocks this step filled hold the KV of a known prefix from now on.
      extendHashes(s, s.computed);
      for (size_t b = 0; b < s.hashes.size() && b < s.blocks.size(); ++b)
        blocks_->registerHash(s.blocks[b], s.hashes[b]);
    }
    if (s.computed != int64_t(s.context.size()))
      continue;
    if (s.request.maxNewTokens == 0) { // scored only: done
      s.ended = true;
      continue;
    }
    picking.push_back({&s, c.offset + c.count - 1});
  }
  std::vector<int32_t> picks;
  for (auto [s, row] : picking) {
    auto next = pick(*s, row);
    if (!next)
      return next.status();
    picks.push_back(*next);
  }
  if (Status st = agreeOnPicks(picks); !st)
    return st;
  for (size_t i = 0; i < picking.size(); ++i)
    if (Status st = accept(*picking[i].first, picking[i].second, picks[i], t1); !st)
      return st;
  for (size_t i = running_.size(); i-- > 0;)
    if (running_[i]->ended)
      finish(i);
  return Status::ok();
}

Status Engine::scorePrompt(Sequence &s, int64_t from, int64_t count, int64_t row) {
  for (auto [p, end] = s.toScore(from, count); p < end; ++p) {
    auto entry = logprobEntry(logits_.get() + (row + p - from) * vocab_, vocab_,
                              s.context[size_t(p + 1)], *s.request.promptLogprobs);
    if (!entry)
      return entry.status();
    s.result.promptLogprobs.push_back(entry.take());
  }
  if (!s.scoring() && !s.promptReported) {
    scored_.push_back({s.id, s.result.promptLogprobs});
    s.promptReported = true;
  }
  return Status::ok();
}

Expected<int32_t> Engine::pick(Sequence &s, int64_t row) {
  return s.sampler.next(logits_.get() + row * vocab_, vocab_);
}

Status Engine::agreeOnPicks(std::vector<int32_t> &picks) {
  if (!picks_ || picks.empty())
    return Status::ok();
  // Rank 0's picks plus zeros from every other rank: rank 0's, exactly
  // (of a data group: its first rank's).
  auto *words = static_cast<int32_t *>(picks_->host());
  const bool first = mates_->rank() == 0;
  for (size_t i = 0; i < picks.size(); ++i)
    words[i] = first ? picks[i] : 0;
  Stream &stream = device_->stream(0);
  if (Status st = mates_->allReduce(stream, {picks_->data(), DType::I32, picks.size()});
      !st)
    return st;
  if (Status st = stream.synchronize(); !st)
    return st;
  for (size_t i = 0; i < picks.size(); ++i) {
    stats_.picksOfRankZero += words[i] != picks[i];
    picks[i] = words[i];
  }
  return Status::ok();
}

Status Engine::accept(Sequence &s, int64_t row, int32_t next, double time) {
  // pick() put the raw logits back: a log-softmax is of those.
  float *logits = logits_.get() + row * vocab_;
  std::optional<LogprobEntry> logprob;
  if (s.request.logprobs) {
    auto entry = logprobEntry(logits, vocab_, next, *s.request.logprobs);
    if (!entry)
      return entry.status();
    logprob = entry.take();
    s.result.logprobs.push_back(*logprob);
  }
  if (s.result.tokens.empty())
    s.result.firstToken = time;
  s.context.push_back(next);
  s.result.tokens.push_back(next);
  s.result.tokenTimes.push_back(time);
  sampled_.push_back({s.id, next, std::move(logprob)});
  if (auto reason = s.stop.check(s.result.tokens)) {
    s.result.finishReason = *reason;
    // A stop string's tokens went: their times and log-probabilities too.
    s.result.tokenTimes.resize(s.result.tokens.size());
    if (s.request.logprobs)
      s.result.logprobs.resize(s.result.tokens.size());
    s.ended = true;
  }
  if (int64_t(s.result.tokens.size()) >= s.request.maxNewTokens)
    s.ended = true;
  return Status::ok();
}

std::vector<SampledToken> Engine::takeSampled() {
  std::vector<SampledToken> out;
  out.swap(sampled_);
  return out;
}

std::vector<ScoredPrompt> Engine::takeScoredPrompts() {
  std::vector<ScoredPrompt> out;
  out.swap(scored_);
  return out;
}

std::vector<GenerationResult> Engine::takeFinished() {
  std::vector<GenerationResult> out;
  out.swap(finished_);
  return out;
}

} // namespace moe::rt
