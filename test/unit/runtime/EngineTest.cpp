// The serving engine's decisions, step by step, on the trained example
// (examples/kjv-moe, compiled by the build with --max-batch-tokens 16
// --max-context 64): how prompts are chunked under the token budget, that
// decode tokens go first, when a request waits for KV blocks, which
// sequence is preempted and how (recompute or swap), what is rejected and
// why, and that every block comes back. Counts are worked out by hand from
// the rules in Engine.h; generated tokens are compared with the same
// request run alone (greedy: the engine guarantees they do not change).
// Log-probabilities are compared with a naive double log-softmax of the
// logits a Session of its own computes for the same tokens. The
// BlockManager is tested by itself first.
#include "moe/runtime/Engine.h"
#include "moe/runtime/EngineService.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <future>
#include <map>
#include <numeric>
#include <set>
#include <thread>

namespace {

using namespace moe::rt;

// --- BlockManager ---

TEST(BlockManager, AllocatesUntilEmptyAndTakesBlocksBack) {
  BlockManager m(3);
  int32_t a = m.allocate(), b = m.allocate(), c = m.allocate();
  EXPECT_GE(a, 0);
  EXPECT_GE(b, 0);
  EXPECT_GE(c, 0);
  EXPECT_EQ(m.allocate(), -1);
  EXPECT_EQ(m.usedBlocks(), 3);
  m.release(b);
  EXPECT_EQ(m.freeBlocks(), 1);
  EXPECT_EQ(m.allocate(), b);
}

TEST(BlockManager, ABlockIsFreeWhenItsLastUserLetsGo) {
  BlockManager m(1);
  int32_t a = m.allocate();
  m.retain(a);
  m.release(a);
  EXPECT_EQ(m.freeBlocks(), 0);
  m.release(a);
  EXPECT_EQ(m.freeBlocks(), 1);
}

TEST(BlockManager, CachedPrefixBlocksAreFoundThenEvictedOldestFirst) {
  BlockManager m(2);
  int32_t a = m.allocate(), b = m.allocate();
  m.registerHash(a, 11);
  m.registerHash(b, 22);
  m.registerHash(b, 33); // a block keeps its first hash
  m.release(a);          // cached, unreferenced: free for allocation too
  m.release(b);
  EXPECT_EQ(m.freeBlocks(), 2);
  EXPECT_EQ(m.lookup(33), -1);
  EXPECT_EQ(m.lookup(22), b); // retained again
  EXPECT_EQ(m.usedBlocks(), 1);
  // The only block an allocation can get is a, released before b: evicted,
  // its hash forgotten.
  EXPECT_EQ(m.allocate(), a);
  EXPECT_EQ(m.lookup(11), -1);
  EXPECT_EQ(m.allocate(), -1);
}

// --- Engine ---

class EngineTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    auto p = LoadedPlan::open(MOE_KJV_PLAN);
    ASSERT_TRUE(p) << p.status().message();
    plan_ = p.take().release();
    device_ = createCpuDevice().release();
  }
  static void TearDownTestSuite() {
    delete plan_;
    delete device_;
  }

  std::unique_ptr<Engine> engine(EngineOptions o) {
    auto e = Engine::create(*plan_, *device_, o);
    EXPECT_TRUE(e) << e.status().message();
    return e ? e.take() : nullptr;
  }
  static GenerationRequest request(int32_t first, size_t length, int64_t maxNew) {
    GenerationRequest r;
    for (size_t i = 0; i < length; ++i)
      r.prompt.push_back(int32_t(3 + (first + 7 * int32_t(i)) % 250));
    r.maxNewTokens = maxNew;
    return r;
  }
  /// What `r` generates alone, with room to spare.
  std::vector<int32_t> alone(const GenerationRequest &r) {
    EngineOptions o;
    o.blockSize = 4;
    o.numBlocks = 16;
    auto e = engine(o);
    EXPECT_TRUE(e->submit(r));
    while (!e->idle())
      EXPECT_TRUE(e->step());
    auto done = e->takeFinished();
    return done.size() == 1 ? done[0].tokens : std::vector<int32_t>{};
  }
  /// Steps until idle; results by id.
  static std::map<int64_t, GenerationResult> drain(Engine &e) {
    std::map<int64_t, GenerationResult> out;
    for (int i = 0; i < 1000 && !e.idle(); ++i)
      EXPECT_TRUE(e.step());
    for (GenerationResult &r : e.takeFinished())
      out[r.id] = std::move(r);
    return out;
  }
  static int64_t vocab() { return plan_->plan().config()->vocab_size(); }
  /// The logits of every position of `sequence`, from a Session of its own
  /// run in chunks of the plan's batch: [size, vocab].
  static std::vector<float> referenceLogits(const std::vector<int32_t> &sequence) {
    auto s = Session::create(*plan_, *device_);
    EXPECT_TRUE(s) << s.status().message();
    const int64_t chunk = (*s)->maxBatchTokens(), n = int64_t(sequence.size());
    std::vector<float> all(size_t(n * vocab())), rows(size_t(chunk * vocab()));
    std::vector<int32_t> positions;
    for (int64_t start = 0; start < n; start += chunk) {
      const int64_t count = std::min(chunk, n - start);
      positions.resize(size_t(count));
      std::iota(positions.begin(), positions.end(), int32_t(start));
      EXPECT_TRUE((*s)->forward(sequence.data() + start, positions.data(), count, rows.data()));
      std::copy(rows.begin(), rows.begin() + count * vocab(), all.begin() + start * vocab());
    }
    return all;
  }
  /// `entry` is the log-softmax, in double, of `row` for `token`, with the
  /// `k` likeliest tokens (the lower id first among equals), rounded once.
  static void expectLogSoftmax(const LogprobEntry &entry, const float *row, int32_t token,
                               int32_t k, const std::string &where) {
    double sum = 0;
    for (int64_t v = 0; v < vocab(); ++v)
      sum += std::exp(double(row[v]));
    auto logprob = [&](int32_t v) { return float(double(row[v]) - std::log(sum)); };
    EXPECT_EQ(entry.chosen.token, token) << where;
    EXPECT_FLOAT_EQ(entry.chosen.logprob, logprob(token)) << where;
    std::vector<int32_t> order(static_cast<size_t>(vocab()));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    ASSERT_EQ(entry.top.size(), size_t(k)) << where;
    for (size_t i = 0; i < size_t(k); ++i) {
      EXPECT_EQ(entry.top[i].token, order[i]) << where << ", rank " << i;
      EXPECT_FLOAT_EQ(entry.top[i].logprob, logprob(order[i])) << where << ", rank " << i;
    }
  }
  /// The result's log-probabilities, of the prompt (when asked) and of the
  /// tokens, against the reference logits of prompt + tokens.
  static void expectLogprobs(const GenerationRequest &r, const GenerationResult &result) {
    std::vector<int32_t> sequence = r.prompt;
    sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
    const std::vector<float> logits = referenceLogits(sequence);
    auto row = [&](size_t position) { return logits.data() + position * size_t(vocab()); };
    if (r.promptLogprobs) {
      ASSERT_EQ(result.promptLogprobs.size(), r.prompt.size() - 1);
      for (size_t i = 0; i + 1 < r.prompt.size(); ++i)
        expectLogSoftmax(result.promptLogprobs[i], row(i), r.prompt[i + 1], *r.promptLogprobs,
                         "prompt token " + std::to_string(i + 1));
    }
    if (r.logprobs) {
      ASSERT_EQ(result.logprobs.size(), result.tokens.size());
      for (size_t i = 0; i < result.tokens.size(); ++i)
        expectLogSoftmax(result.logprobs[i], row(r.prompt.size() - 1 + i), result.tokens[i],
                         *r.logprobs, "generated token " + std::to_string(i));
    }
  }

  static LoadedPlan *plan_;
  static Device *device_;
};

LoadedPlan *EngineTest::plan_ = nullptr;
Device *EngineTest::device_ = nullptr;

// Batch::logitRows: the named rows' logits are those of the full forward,
// bit for bit (the LM head is the same kernel on gathered rows), the other
// rows are left alone, and rows out of order are refused.
TEST_F(EngineTest, LogitRowsGiveThoseRowsOfTheFullForward) {
  const std::vector<int32_t> tokens = {72, 101, 108, 108, 111, 44, 32, 119, 111};
  std::vector<int32_t> positions(tokens.size());
  for (size_t i = 0; i < positions.size(); ++i)
    positions[i] = int32_t(i);
  const int64_t count = int64_t(tokens.size());
  auto run = [&](const std::vector<int64_t> *rows, std::vector<float> &logits) {
    auto s = Session::create(*plan_, *device_);
    EXPECT_TRUE(s) << s.status().message();
    std::vector<int32_t> blocks(tokens.size()); // one sequence: blocks 0, 1, ...
    std::iota(blocks.begin(), blocks.end(), 0);
    std::vector<const int32_t *> tables(tokens.size(), blocks.data());
    Batch b{tokens.data(), positions.data(), tables.data(), count,
            rows ? rows->data() : nullptr, rows ? int64_t(rows->size()) : 0};
    return (*s)->forward(b, logits.data());
  };
  const int64_t vocab = plan_->plan().config()->vocab_size();
  std::vector<float> all(size_t(count * vocab)), some(all.size(), -7.0f);
  ASSERT_TRUE(run(nullptr, all));
  const std::vector<int64_t> rows = {0, 4, 8};
  ASSERT_TRUE(run(&rows, some));
  for (int64_t r = 0; r < count; ++r) {
    const bool named = std::count(rows.begin(), rows.end(), r) > 0;
    for (int64_t v = 0; v < vocab; ++v)
      ASSERT_EQ(some[size_t(r * vocab + v)], named ? all[size_t(r * vocab + v)] : -7.0f)
          << "row " << r << ", logit " << v;
  }
  const std::vector<int64_t> unordered = {4, 2};
  Status bad = run(&unordered, some);
  EXPECT_EQ(bad.message(), "logit rows must ascend within the batch of 9 tokens; row 1 is 2");
}

TEST_F(EngineTest, PromptsAreChunkedByTheTokenBudget) {
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 16;
  o.tokenBudget = 8;
  auto e = engine(o);
  ASSERT_TRUE(e->submit(request(1, 20, 3)));
  // 20 prompt tokens at 8 a step: 8, 8, 4 (the last chunk samples the first
  // token), then one decode token per step for the other two.
  const uint64_t prefill[] = {8, 16, 20, 20, 20}, decode[] = {0, 0, 0, 1, 2};
  for (int s = 0; s < 5; ++s) {
    ASSERT_TRUE(e->step());
    EXPECT_EQ(e->stats().prefillTokens, prefill[s]) << "step " << s + 1;
    EXPECT_EQ(e->stats().decodeTokens, decode[s]) << "step " << s + 1;
  }
  EXPECT_TRUE(e->idle());
  EXPECT_EQ(e->takeFinished().at(0).tokens, alone(request(1, 20, 3)));
}

TEST_F(EngineTest, DecodeTokensGoFirstAndPromptsTakeTheRest) {
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 16;
  o.tokenBudget = 8;
  auto e = engine(o);
  ASSERT_TRUE(e->submit(request(1, 4, 4)));
  ASSERT_TRUE(e->step()); // A's prompt, 4 tokens
  ASSERT_TRUE(e->submit(request(2, 10, 2)));
  ASSERT_TRUE(e->step()); // A decodes 1, B's prompt takes the other 7
  EXPECT_EQ(e->stats().decodeTokens, 1u);
  EXPECT_EQ(e->stats().prefillTokens, 4u + 7u);
  ASSERT_TRUE(e->step()); // A 1, B's last 3 prompt tokens
  EXPECT_EQ(e->stats().decodeTokens, 2u);
  EXPECT_EQ(e->stats().prefillTokens, 14u);
  auto done = drain(*e);
  EXPECT_EQ(done.at(0).tokens, alone(request(1, 4, 4)));
  EXPECT_EQ(done.at(1).tokens, alone(request(2, 10, 2)));
}

TEST_F(EngineTest, ARequestWaitsForTheBlocksOfItsWholePrompt) {
  // 3 blocks of 4 tokens. A (8 + 4) takes 2 blocks at admission and a third
  // when it grows; B's 8-token prompt needs 2: it waits until A is done.
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 3;
  auto e = engine(o);
  ASSERT_TRUE(e->submit(request(1, 8, 4)));
  ASSERT_TRUE(e->submit(request(2, 8, 4)));
  ASSERT_TRUE(e->step());
  EXPECT_EQ(e->stats().prefillTokens, 8u); // A's prompt only
  auto done = drain(*e);
  EXPECT_EQ(e->stats().preemptions, 0u);
  EXPECT_EQ(e->stats().peakBlocks, 3);
  EXPECT_GT(done.at(1).firstToken, done.at(0).finished);
  EXPECT_EQ(done.at(0).tokens, alone(request(1, 8, 4)));
  EXPECT_EQ(done.at(1).tokens, alone(request(2, 8, 4)));
}

/// 4 blocks of 4 tokens; A and B (8-token prompts, 8 new tokens each) are
/// admitted together (2 blocks each). A's first decode token needs a third
/// block: B, the newest, is preempted and resumes once A is done.
struct Preemption {
  EngineOptions options() const {
    EngineOptions o;
    o.blockSize = 4;
    o.numBlocks = 4;
    return o;
  }
};

TEST_F(EngineTest, PreemptsTheNewestSequenceAndRecomputesIt) {
  auto e = engine(Preemption().options());
  ASSERT_TRUE(e->submit(request(1, 8, 8)));
  ASSERT_TRUE(e->submit(request(2, 8, 8)));
  auto done = drain(*e);
  EXPECT_EQ(e->stats().preemptions, 1u);
  EXPECT_EQ(done.at(0).preemptions, 0);
  EXPECT_EQ(done.at(1).preemptions, 1);
  // B had its 8 prompt tokens computed; they are computed again.
  EXPECT_EQ(e->stats().recomputedTokens, 8u);
  EXPECT_EQ(e->stats().swapOuts, 0u);
  EXPECT_EQ(done.at(0).tokens, alone(request(1, 8, 8)));
  EXPECT_EQ(done.at(1).tokens, alone(request(2, 8, 8)));
  // Every block came back: a request that needs all four runs.
  ASSERT_TRUE(e->submit(request(3, 8, 8)));
  EXPECT_EQ(drain(*e).at(2).tokens, alone(request(3, 8, 8)));
}

TEST_F(EngineTest, PreemptsBySwappingWhenTheHostPoolHasRoom) {
  EngineOptions o = Preemption().options();
  auto probe = engine(o);
  o.hostPoolBytes = uint64_t(2 * probe->kvBytesPerBlock()); // B's two blocks
  auto e = engine(o);
  EXPECT_EQ(e->hostBlocks(), 2);
  ASSERT_TRUE(e->submit(request(1, 8, 8)));
  ASSERT_TRUE(e->submit(request(2, 8, 8)));
  auto done = drain(*e);
  EXPECT_EQ(e->stats().preemptions, 1u);
  EXPECT_EQ(e->stats().swapOuts, 1u);
  EXPECT_EQ(e->stats().swapIns, 1u);
  EXPECT_EQ(e->stats().swapOutBytes, uint64_t(2 * e->kvBytesPerBlock()));
  EXPECT_EQ(e->stats().recomputedTokens, 0u);
  EXPECT_EQ(e->stats().peakHostBlocks, 2);
  EXPECT_EQ(done.at(1).tokens, alone(request(2, 8, 8)));
}

TEST_F(EngineTest, IdenticalPromptPrefixesShareCachedBlocks) {
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 16;
  o.prefixCaching = true;
  auto e = engine(o);
  ASSERT_TRUE(e->submit(request(5, 9, 2)));
  drain(*e);
  const uint64_t first = e->stats().prefillTokens;
  EXPECT_EQ(first, 9u);
  ASSERT_TRUE(e->submit(request(5, 9, 2)));
  auto done = drain(*e);
  // Two full blocks (8 tokens) come from the cache: 1 prompt token is left.
  EXPECT_EQ(e->stats().cachedTokens, 8u);
  EXPECT_EQ(e->stats().prefillTokens, first + 1);
  EXPECT_EQ(done.at(1).tokens, alone(request(5, 9, 2)));
}

TEST_F(EngineTest, RejectsWhatCanNeverRunAndWhatDoesNotFit) {
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 4;
  o.maxWaiting = 1;
  auto e = engine(o);
  // check() (a server giving the request to another rank's engine) says
  // what submit() says, whatever the queue holds, and queues nothing.
  auto message = [&](GenerationRequest r) {
    const Status checked = e->check(r);
    const bool full = e->queueFull();
    auto id = e->submit(std::move(r));
    const std::string said = id ? std::string() : id.status().message();
    EXPECT_EQ(checked ? std::string() : checked.message(), full && checked ? "" : said);
    return said;
  };
  EXPECT_EQ(message(request(1, 0, 4)), "request rejected: empty prompt");
  GenerationRequest bad = request(1, 3, 2);
  bad.prompt[1] = 259;
  EXPECT_EQ(message(bad), "request rejected: token id 259 out of vocabulary [0, 259)");
  EXPECT_EQ(message(request(1, 60, 8)),
            "request rejected: prompt (60) + new tokens (8) exceed the context of 64 tokens");
  EXPECT_EQ(message(request(1, 16, 4)),
            "request rejected: needs 5 KV blocks, the pool has 4");
  EXPECT_EQ(message(request(1, 4, 4)), "");
  EXPECT_EQ(message(request(2, 4, 4)),
            "request rejected: the waiting queue is full (1 requests); retry later");
  EXPECT_EQ(e->stats().rejected, 5u);
  EXPECT_EQ(e->load().waiting, 1);
}

TEST_F(EngineTest, CancelFreesBlocksWhereverTheRequestIs) {
  // Blocks for three prompts of 6 tokens (2 blocks each) and a host pool
  // of 4: a, b and c run, d waits; when a needs a third block the newest
  // running sequence, c, is swapped out. Cancel b (running), c (swapped)
  // and d (waiting): every block and host slot comes back, and a generates
  // what it does alone.
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 6;
  o.hostPoolBytes = uint64_t(engine(EngineOptions{})->kvBytesPerBlock()) * 4;
  auto e = engine(o);
  GenerationRequest a = request(1, 6, 12);
  int64_t ia = *e->submit(a), ib = *e->submit(request(2, 6, 12)),
          ic = *e->submit(request(3, 6, 12)), id = *e->submit(request(4, 6, 12));
  for (int i = 0; i < 200 && e->load().swapped == 0; ++i)
    ASSERT_TRUE(e->step());
  EngineLoad l = e->load();
  ASSERT_EQ(l.running, 2);
  ASSERT_EQ(l.swapped, 1);
  ASSERT_EQ(l.waiting, 1);
  ASSERT_GT(l.usedHostBlocks, 0);
  EXPECT_TRUE(e->cancel(ib));
  EXPECT_TRUE(e->cancel(ic));
  EXPECT_TRUE(e->cancel(id));
  EXPECT_FALSE(e->cancel(id)); // already gone
  EXPECT_FALSE(e->cancel(999));
  l = e->load();
  EXPECT_EQ(l.running + l.swapped + l.waiting, 1);
  EXPECT_EQ(l.usedHostBlocks, 0);
  std::map<int64_t, GenerationResult> done;
  for (GenerationResult &r : e->takeFinished())
    done[r.id] = std::move(r);
  for (auto &[rid, r] : drain(*e))
    done[rid] = std::move(r);
  ASSERT_EQ(done.size(), 4u);
  for (int64_t cancelled : {ib, ic, id})
    EXPECT_EQ(done[cancelled].finishReason, FinishReason::Cancelled) << cancelled;
  EXPECT_TRUE(done[id].tokens.empty());
  EXPECT_EQ(done[ia].tokens, alone(a));
  EXPECT_EQ(e->load().usedBlocks, 0);
  EXPECT_EQ(e->stats().cancelled, 3u);
}

TEST_F(EngineTest, TheServiceStreamsWhatTheEngineGenerates) {
  // Requests from several threads: each stream's tokens, in order, are the
  // result's, and equal the request run alone; a cancelled one frees its
  // blocks; drain() with no grace cancels what is left.
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 16;
  EngineService service(engine(o));
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 4; ++i) {
    requests.push_back(request(10 + i, 5 + size_t(i), 10));
    requests.back().sampling = {0.8f, 0.9f, 0, uint64_t(i)};
  }
  std::vector<std::vector<int32_t>> streamed(requests.size()), results(requests.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < requests.size(); ++i)
    threads.emplace_back([&, i] {
      Submitted s = service.submit(requests[i]);
      ASSERT_TRUE(s.stream) << s.reason;
      for (;;) {
        RequestStream::Update u = s.stream->next(std::chrono::milliseconds(100));
        streamed[i].insert(streamed[i].end(), u.tokens.begin(), u.tokens.end());
        if (u.result) {
          results[i] = u.result->tokens;
          return;
        }
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(streamed[i], results[i]) << i;
    EXPECT_EQ(results[i], alone(requests[i])) << i;
  }
  // Cancelled mid-way: the stream ends cancelled and the blocks come back.
  // A result that comes with the first tokens is kept: on a loaded machine
  // the request can finish before this thread looks, and waiting for a
  // second result hung the test. The tiny model's 40 tokens take a few ms,
  // so a thread descheduled that long after the first tokens (ctest -j2 on
  // a fast 2-core machine) cancels a finished request: then another one is
  // tried, up to 20.
  std::optional<GenerationResult> end;
  for (int attempt = 0; attempt < 20; ++attempt) {
    Submitted s = service.submit(request(30 + attempt, 6, 40));
    ASSERT_TRUE(s.stream);
    end.reset();
    for (;;) {
      RequestStream::Update u = s.stream->next(std::chrono::milliseconds(100));
      end = std::move(u.result);
      if (end || !u.tokens.empty())
        break;
    }
    service.cancel(s.stream->id());
    while (!end)
      end = s.stream->next(std::chrono::milliseconds(100)).result;
    if (end->finishReason == FinishReason::Cancelled)
      break;
  }
  EXPECT_EQ(end->finishReason, FinishReason::Cancelled)
      << "20 requests finished before the cancel reached the engine";
  EXPECT_LT(end->tokens.size(), 40u);
  // A rejection says why, in kind.
  Submitted bad = service.submit(request(1, 80, 4));
  EXPECT_FALSE(bad.stream);
  EXPECT_EQ(bad.rejection, Rejection::Invalid);
  // Drain without grace: what is still running or waiting is cancelled and
  // reported, and its stream ends cancelled. Eight requests queue (one runs
  // at a time in 16 blocks of 4), so some are pending when the drain looks
  // even if this thread was descheduled for a few requests' time.
  std::vector<Submitted> lasts;
  for (int i = 0; i < 8; ++i) {
    lasts.push_back(service.submit(request(31 + i, 6, 40)));
    ASSERT_TRUE(lasts.back().stream);
  }
  std::vector<int64_t> cancelled = service.drain(std::chrono::milliseconds(0));
  EXPECT_FALSE(cancelled.empty());
  for (Submitted &l : lasts) {
    std::optional<GenerationResult> r;
    while (!r)
      r = l.stream->next(std::chrono::milliseconds(100)).result;
    const bool reported =
        std::count(cancelled.begin(), cancelled.end(), l.stream->id()) == 1;
    EXPECT_EQ(r->finishReason == FinishReason::Cancelled, reported) << l.stream->id();
  }
  EXPECT_EQ(service.submit(request(1, 4, 4)).rejection, Rejection::Unavailable);
  for (int i = 0; i < 100 && service.snapshot().load.usedBlocks != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(service.snapshot().load.usedBlocks, 0);
}

} // namespace

namespace {

// --- Log-probabilities, penalties and stop rules through the engine ---

TEST_F(EngineTest, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  // Generated tokens (sampled with penalties: the entries are of the raw
  // logits all the same) and prompt tokens, the prompt in chunks of 8.
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 16;
  o.tokenBudget = 8;
  auto e = engine(o);
  GenerationRequest r = request(3, 20, 6);
  r.logprobs = 5;
  r.promptLogprobs = 3;
  r.sampling.temperature = 0.9f;
  r.sampling.seed = 4;
  r.sampling.repetitionPenalty = 1.3f;
  r.sampling.frequencyPenalty = 0.5f;
  GenerationRequest plain = request(9, 7, 4);
  plain.logprobs = 0;
  ASSERT_TRUE(e->submit(r));
  ASSERT_TRUE(e->submit(plain));
  // The prompt's entries come once, before its first token.
  ASSERT_TRUE(e->step());
  ASSERT_TRUE(e->step());
  EXPECT_TRUE(e->takeScoredPrompts().empty());
  EXPECT_TRUE(e->takeSampled().empty());
  ASSERT_TRUE(e->step()); // the prompt's last 4 tokens
  std::vector<ScoredPrompt> scored = e->takeScoredPrompts();
  ASSERT_EQ(scored.size(), 1u);
  EXPECT_EQ(scored[0].id, 0);
  EXPECT_EQ(scored[0].logprobs.size(), 19u);
  std::vector<SampledToken> first = e->takeSampled();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(first[0].logprob);
  auto done = drain(*e);
  EXPECT_TRUE(e->takeScoredPrompts().empty());
  EXPECT_EQ(done.at(0).tokens.size(), 6u);
  EXPECT_EQ(first[0].logprob->chosen.logprob, done.at(0).logprobs.at(0).chosen.logprob);
  expectLogprobs(r, done.at(0));
  expectLogprobs(plain, done.at(1));
  EXPECT_TRUE(done.at(1).promptLogprobs.empty());
  EXPECT_TRUE(done.at(1).logprobs[0].top.empty());
}

TEST_F(EngineTest, AskingForLogprobsChangesNoToken) {
  // Greedy, and sampled with a seed and no penalty: the same tokens with
  // and without log-probabilities. The sampled ones are also those this
  // engine drew before logprobs and penalties came (recorded at c18e529:
  // batch invariance and the seeded sampler held).
  const std::vector<std::vector<int32_t>> before = {
      {61, 52, 57, 35, 87, 107, 104, 113, 35, 119, 107, 104},
      {73, 57, 73, 70, 107, 117, 57, 61, 57, 57, 35, 69},
      {86, 35, 86, 100, 112, 120, 104, 111, 35, 100, 113, 103}};
  for (bool asked : {false, true}) {
    EngineOptions o;
    o.blockSize = 4;
    o.numBlocks = 16;
    auto e = engine(o);
    std::vector<GenerationRequest> requests;
    for (int i = 0; i < 3; ++i) {
      requests.push_back(request(20 + i, size_t(6 + i), 12));
      requests.back().sampling = {0.8f, 0.9f, i == 2 ? 5 : 0, uint64_t(i + 1)};
      if (asked) {
        requests.back().logprobs = 20;
        requests.back().promptLogprobs = 2;
      }
      ASSERT_TRUE(e->submit(requests.back()));
    }
    GenerationRequest greedy = request(40, 9, 10);
    greedy.logprobs = asked ? std::optional<int32_t>(1) : std::nullopt;
    ASSERT_TRUE(e->submit(greedy));
    auto done = drain(*e);
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(done.at(i).tokens, before[size_t(i)]) << "request " << i << ", logprobs " << asked;
    greedy.logprobs.reset();
    EXPECT_EQ(done.at(3).tokens, alone(greedy)) << "logprobs " << asked;
  }
}

TEST_F(EngineTest, PromptLogprobsSurviveRecomputeOnce) {
  // 4 blocks of 4, 5 tokens a step. A's 8-token prompt takes two steps (5,
  // 3) and B's prefill starts with the second (2 of 8 tokens: its rows 0
  // and 1 score prompt tokens 1 and 2). A's first decode token needs a
  // third block: B, the newest, is preempted and recomputed from the
  // start, but its scored rows are not scored again.
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 4;
  o.tokenBudget = 5;
  auto e = engine(o);
  GenerationRequest a = request(1, 8, 6), b = request(2, 8, 4);
  a.promptLogprobs = 2;
  b.promptLogprobs = 4;
  b.logprobs = 2;
  ASSERT_TRUE(e->submit(a));
  ASSERT_TRUE(e->submit(b));
  std::map<int64_t, int> reports;
  std::map<int64_t, GenerationResult> done;
  for (int i = 0; i < 100 && !e->idle(); ++i) {
    ASSERT_TRUE(e->step());
    for (const ScoredPrompt &p : e->takeScoredPrompts())
      ++reports[p.id];
    for (GenerationResult &r : e->takeFinished())
      done[r.id] = std::move(r);
  }
  EXPECT_EQ(e->stats().preemptions, 1u);
  EXPECT_EQ(done.at(1).preemptions, 1);
  EXPECT_EQ(e->stats().recomputedTokens, 2u);
  EXPECT_EQ(reports, (std::map<int64_t, int>{{0, 1}, {1, 1}}));
  expectLogprobs(a, done.at(0));
  expectLogprobs(b, done.at(1));
  EXPECT_EQ(done.at(1).tokens, alone(request(2, 8, 4)));
}

TEST_F(EngineTest, AScoredPromptTakesNoCachedBlocks) {
  // A caches the blocks of its prompt; B, the same prompt with prompt
  // logprobs, computes every row again (their logits are not cached) and
  // gets what an engine without a cache gives; C, the same prompt without,
  // takes the cached blocks as before.
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 16;
  o.prefixCaching = true;
  auto e = engine(o);
  GenerationRequest r = request(5, 13, 3);
  ASSERT_TRUE(e->submit(r));
  drain(*e);
  GenerationRequest scored = r;
  scored.promptLogprobs = 3;
  scored.logprobs = 1;
  ASSERT_TRUE(e->submit(scored));
  auto withCache = drain(*e);
  EXPECT_EQ(e->stats().cachedTokens, 0u);
  EXPECT_EQ(e->stats().prefillTokens, 26u);
  expectLogprobs(scored, withCache.at(1));
  o.prefixCaching = false;
  auto uncached = engine(o);
  ASSERT_TRUE(uncached->submit(scored));
  auto reference = drain(*uncached);
  const GenerationResult &x = withCache.at(1), &y = reference.at(0);
  ASSERT_EQ(x.promptLogprobs.size(), y.promptLogprobs.size());
  for (size_t i = 0; i < x.promptLogprobs.size(); ++i)
    EXPECT_EQ(x.promptLogprobs[i].chosen.logprob, y.promptLogprobs[i].chosen.logprob) << i;
  EXPECT_EQ(x.tokens, y.tokens);
  ASSERT_TRUE(e->submit(r));
  drain(*e);
  EXPECT_EQ(e->stats().cachedTokens, 12u);
}

TEST_F(EngineTest, ScoringOnlyEndsAfterThePrefill) {
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 16;
  o.tokenBudget = 8;
  auto e = engine(o);
  GenerationRequest r = request(7, 20, 0);
  EXPECT_EQ(e->submit(r).status().message(),
            "request rejected: max new tokens must be >= 1 (0 only to score the prompt, with "
            "prompt logprobs), got 0");
  r.promptLogprobs = 0;
  ASSERT_TRUE(e->submit(r));
  auto done = drain(*e);
  EXPECT_EQ(e->stats().steps, 3u); // 8 + 8 + 4 prompt tokens, no decode
  EXPECT_EQ(e->stats().decodeTokens, 0u);
  EXPECT_EQ(done.at(0).finishReason, FinishReason::Length);
  EXPECT_TRUE(done.at(0).tokens.empty());
  expectLogprobs(r, done.at(0));
  EXPECT_EQ(e->load().usedBlocks, 0);
}

TEST_F(EngineTest, RejectsSamplingAndLogprobOptionsOutOfRange) {
  auto e = engine(EngineOptions{});
  auto message = [&](void (*change)(GenerationRequest &)) {
    GenerationRequest r = request(1, 4, 4);
    change(r);
    auto id = e->submit(std::move(r));
    return id ? std::string() : id.status().message();
  };
  EXPECT_EQ(message([](GenerationRequest &r) { r.logprobs = 21; }),
            "request rejected: logprobs must lie in [0, 20], got 21");
  EXPECT_EQ(message([](GenerationRequest &r) { r.promptLogprobs = -1; }),
            "request rejected: prompt logprobs must lie in [0, 20], got -1");
  EXPECT_EQ(message([](GenerationRequest &r) { r.sampling.minP = -0.5f; }),
            "request rejected: min-p must lie in [0, 1], got -0.5");
  EXPECT_EQ(message([](GenerationRequest &r) { r.stop.minTokens = 5; }),
            "request rejected: min tokens (5) exceed max new tokens (4)");
  EXPECT_EQ(message([](GenerationRequest &r) { r.stop.stopTokenIds = {259}; }),
            "request rejected: stop token id 259 out of vocabulary [0, 259)");
}

TEST_F(EngineTest, StopTokensMinTokensAndKeptStopStrings) {
  // What request 11 generates greedily alone, then the same with: its
  // third token as a stop token (it ends there, kept, with its entry);
  // that and min tokens 5 (the token cannot come before the sixth pick:
  // at least five tokens, none of the first five the stop token); its
  // third and fourth tokens' text as a stop string, cut or kept.
  GenerationRequest base = request(11, 6, 12);
  base.stop.ignoreEos = true; // the model's end comes first here
  const std::vector<int32_t> free = alone(base);
  ASSERT_GE(free.size(), 6u);
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 16;
  auto e = engine(o);
  GenerationRequest stopToken = base;
  stopToken.stop.stopTokenIds = {free[2]};
  stopToken.logprobs = 0;
  GenerationRequest least = stopToken;
  least.stop.minTokens = 5;
  auto byteText = [](std::vector<int32_t> ids) { return ByteTokenizer().decode(ids); };
  GenerationRequest cut = base, kept = base;
  cut.stop.strings = {byteText({free[2], free[3]})};
  cut.logprobs = 1;
  kept.stop = cut.stop;
  kept.stop.includeStopString = true;
  for (const GenerationRequest &r : {stopToken, least, cut, kept})
    ASSERT_TRUE(e->submit(r));
  auto done = drain(*e);
  const size_t firstStop = size_t(std::find(free.begin(), free.end(), free[2]) - free.begin());
  EXPECT_EQ(done.at(0).tokens, std::vector<int32_t>(free.begin(), free.begin() + long(firstStop) + 1));
  EXPECT_EQ(done.at(0).finishReason, FinishReason::Eos);
  EXPECT_EQ(done.at(0).logprobs.size(), done.at(0).tokens.size());
  const std::vector<int32_t> &longer = done.at(1).tokens;
  ASSERT_GE(longer.size(), 5u);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_NE(longer[i], free[2]) << "pick " << i;
  EXPECT_TRUE(done.at(1).finishReason == FinishReason::Length || longer.back() == free[2]);
  EXPECT_EQ(done.at(2).finishReason, FinishReason::Stop);
  EXPECT_EQ(byteText(done.at(2).tokens) + cut.stop.strings[0],
            byteText({free.begin(), free.begin() + 4}));
  EXPECT_EQ(done.at(2).logprobs.size(), done.at(2).tokens.size());
  EXPECT_EQ(done.at(3).finishReason, FinishReason::Stop);
  EXPECT_EQ(done.at(3).tokens, std::vector<int32_t>(free.begin(), free.begin() + 4));
}

TEST_F(EngineTest, TheServiceHandsOverWithoutBlocking) {
  // submit() with a callback returns at once; the callback runs once, on
  // the engine's thread; the stream's notify hook fires as tokens come and
  // take() collects them with their log-probabilities, the prompt's first.
  EngineOptions o;
  o.blockSize = 4;
  o.numBlocks = 16;
  EngineService service(engine(o));
  std::mutex mutex;
  std::condition_variable changed;
  int doneCalls = 0, notified = 0;
  std::thread::id doneThread;
  std::shared_ptr<RequestStream> stream;
  auto wait = [&](auto ready) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(20), ready);
  };
  GenerationRequest r = request(3, 6, 8);
  r.logprobs = 2;
  r.promptLogprobs = 1;
  service.submit(r, [&](Submitted s) {
    ASSERT_TRUE(s.stream) << s.reason;
    s.stream->setNotify([&] {
      std::lock_guard<std::mutex> lock(mutex);
      ++notified;
      changed.notify_all();
    });
    std::lock_guard<std::mutex> lock(mutex);
    ++doneCalls;
    doneThread = std::this_thread::get_id();
    stream = s.stream;
    changed.notify_all();
  });
  ASSERT_TRUE(wait([&] { return stream != nullptr; }));
  std::vector<int32_t> tokens;
  std::vector<LogprobEntry> logprobs;
  std::optional<std::vector<LogprobEntry>> prompt;
  bool promptFirst = false;
  std::optional<GenerationResult> result;
  for (int seen = 0; !result;) {
    ASSERT_TRUE(wait([&] { return notified > seen; })) << "no notify after " << seen;
    seen = notified;
    RequestStream::Update u = stream->take();
    if (u.promptLogprobs) {
      promptFirst = tokens.empty();
      prompt = std::move(u.promptLogprobs);
    }
    tokens.insert(tokens.end(), u.tokens.begin(), u.tokens.end());
    logprobs.insert(logprobs.end(), u.logprobs.begin(), u.logprobs.end());
    result = std::move(u.result);
  }
  EXPECT_EQ(doneCalls, 1);
  EXPECT_NE(doneThread, std::this_thread::get_id());
  EXPECT_TRUE(stream->take().empty());
  EXPECT_EQ(tokens, result->tokens);
  GenerationRequest plain = r;
  plain.logprobs.reset();
  plain.promptLogprobs.reset();
  EXPECT_EQ(tokens, alone(plain));
  ASSERT_EQ(logprobs.size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    EXPECT_EQ(logprobs[i].chosen.logprob, result->logprobs[i].chosen.logprob) << i;
  ASSERT_TRUE(prompt);
  EXPECT_TRUE(promptFirst);
  EXPECT_EQ(prompt->size(), 5u);
  expectLogprobs(r, *result);

  // A hook set when something is pending already runs at once, here.
  std::promise<std::shared_ptr<RequestStream>> handed;
  service.submit(request(4, 5, 3), [&](Submitted s) { handed.set_value(s.stream); });
  std::shared_ptr<RequestStream> later = handed.get_future().get();
  ASSERT_TRUE(later);
  for (int i = 0; i < 2000 && service.snapshot().load.running + service.snapshot().load.waiting;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::thread::id hookThread;
  later->setNotify([&] { hookThread = std::this_thread::get_id(); });
  EXPECT_EQ(hookThread, std::this_thread::get_id());
  EXPECT_TRUE(later->take().result);

  // Draining: refused at once, on the caller's thread, exactly once.
  service.drain(std::chrono::milliseconds(0));
  int refusals = 0;
  std::thread::id refusedOn;
  service.submit(request(5, 4, 2), [&](Submitted s) {
    ++refusals;
    refusedOn = std::this_thread::get_id();
    EXPECT_EQ(s.rejection, Rejection::Unavailable);
    EXPECT_FALSE(s.stream);
  });
  EXPECT_EQ(refusals, 1);
  EXPECT_EQ(refusedOn, std::this_thread::get_id());
}

} // namespace
