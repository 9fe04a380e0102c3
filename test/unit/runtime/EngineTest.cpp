// The serving engine's decisions, step by step, on the trained example
// (examples/kjv-moe, compiled by the build with --max-batch-tokens 16
// --max-context 64): how prompts are chunked under the token budget, that
// decode tokens go first, when a request waits for KV blocks, which
// sequence is preempted and how (recompute or swap), what is rejected and
// why, and that every block comes back. Counts are worked out by hand from
// the rules in Engine.h; generated tokens are compared with the same
// request run alone (greedy: the engine guarantees they do not change).
// The BlockManager is tested by itself first.
#include "moe/runtime/Engine.h"

#include <gtest/gtest.h>

#include <map>

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

  static LoadedPlan *plan_;
  static Device *device_;
};

LoadedPlan *EngineTest::plan_ = nullptr;
Device *EngineTest::device_ = nullptr;

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
  auto message = [&](GenerationRequest r) {
    auto id = e->submit(std::move(r));
    return id ? std::string() : id.status().message();
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
}

} // namespace
