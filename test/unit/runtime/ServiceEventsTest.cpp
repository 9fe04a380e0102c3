//===- ServiceEventsTest.cpp - rank 0's service events as words ------------===//
//
// What a multi-rank server's rank 0 sends its other ranks before each step
// must come back field for field: a field lost would make another rank's
// engine schedule, stop or sample differently.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/ServiceEvents.h"

#include <gtest/gtest.h>

using namespace moe::rt;

namespace {

GenerationRequest everyField(int i) {
  GenerationRequest r;
  r.prompt = {1, 2, 3 + i, 70000};
  r.maxNewTokens = 41 + i;
  r.sampling.temperature = 0.7f;
  r.sampling.topP = 0.9f;
  r.sampling.topK = 13;
  r.sampling.seed = 0x123456789abcdefull + uint64_t(i);
  r.sampling.minP = 0.05f;
  r.sampling.repetitionPenalty = 1.1f;
  r.sampling.presencePenalty = -0.5f;
  r.sampling.frequencyPenalty = 0.25f;
  r.stop.ignoreEos = true;
  r.stop.strings = {"\n\n", "", "a stop string of an odd length", "\xe2\x82\xac"};
  r.stop.stopTokenIds = {5, 9};
  r.stop.minTokens = 3;
  r.stop.includeStopString = true;
  r.logprobs = 4;
  if (i % 2)
    r.promptLogprobs = 0;
  return r;
}

void expectSame(const GenerationRequest &a, const GenerationRequest &b) {
  EXPECT_EQ(a.prompt, b.prompt);
  EXPECT_EQ(a.maxNewTokens, b.maxNewTokens);
  EXPECT_EQ(a.sampling.temperature, b.sampling.temperature);
  EXPECT_EQ(a.sampling.topP, b.sampling.topP);
  EXPECT_EQ(a.sampling.topK, b.sampling.topK);
  EXPECT_EQ(a.sampling.seed, b.sampling.seed);
  EXPECT_EQ(a.sampling.minP, b.sampling.minP);
  EXPECT_EQ(a.sampling.repetitionPenalty, b.sampling.repetitionPenalty);
  EXPECT_EQ(a.sampling.presencePenalty, b.sampling.presencePenalty);
  EXPECT_EQ(a.sampling.frequencyPenalty, b.sampling.frequencyPenalty);
  EXPECT_EQ(a.stop.ignoreEos, b.stop.ignoreEos);
  EXPECT_EQ(a.stop.strings, b.stop.strings);
  EXPECT_EQ(a.stop.stopTokenIds, b.stop.stopTokenIds);
  EXPECT_EQ(a.stop.minTokens, b.stop.minTokens);
  EXPECT_EQ(a.stop.includeStopString, b.stop.includeStopString);
  EXPECT_EQ(a.logprobs, b.logprobs);
  EXPECT_EQ(a.promptLogprobs, b.promptLogprobs);
}

TEST(ServiceEvents, EveryFieldComesBack) {
  ServiceEvents events;
  for (int i = 0; i < 3; ++i)
    events.submissions.push_back(everyField(i));
  events.submissions.push_back(GenerationRequest()); // the defaults
  events.owners = {0, 3, 1, 2};
  events.cancels = {7, 1ll << 40};
  events.cancelAll = true;
  auto back = decodeEvents(encodeEvents(events));
  ASSERT_TRUE(back) << back.status().message();
  ASSERT_EQ(back->submissions.size(), events.submissions.size());
  for (size_t i = 0; i < events.submissions.size(); ++i)
    expectSame(back->submissions[i], events.submissions[i]);
  EXPECT_EQ(back->owners, events.owners);
  EXPECT_EQ(back->cancels, events.cancels);
  EXPECT_TRUE(back->cancelAll);
  EXPECT_FALSE(back->stop);

  ServiceEvents stop;
  stop.stop = true;
  auto stopped = decodeEvents(encodeEvents(stop));
  ASSERT_TRUE(stopped);
  EXPECT_TRUE(stopped->stop);
  EXPECT_TRUE(stopped->submissions.empty());
}

TEST(ServiceEvents, MalformedListsAreRefused) {
  ServiceEvents events;
  events.submissions.push_back(everyField(1));
  events.cancels = {3};
  const std::vector<int32_t> words = encodeEvents(events);
  // Every truncation, a word too many, and another tag.
  for (size_t n = 0; n < words.size(); ++n) {
    auto cut = decodeEvents(std::vector<int32_t>(words.begin(), words.begin() + long(n)));
    EXPECT_FALSE(cut) << n << " of " << words.size() << " words decoded";
  }
  std::vector<int32_t> longer = words;
  longer.push_back(0);
  EXPECT_FALSE(decodeEvents(longer));
  std::vector<int32_t> other = words;
  other[0] ^= 1;
  auto refused = decodeEvents(other);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("tag"), std::string::npos);
  // A count far beyond the list does not allocate it.
  std::vector<int32_t> huge = words;
  huge[1] = 0x7fffffff;
  EXPECT_FALSE(decodeEvents(huge));
  // Owners for some submissions only.
  events.owners = {1, 0};
  auto uneven = decodeEvents(encodeEvents(events));
  ASSERT_FALSE(uneven);
  EXPECT_EQ(uneven.status().message(), "service events: 2 owners for 1 submissions");
}

LogprobEntry entry(int32_t token) {
  return {{token, -0.25f * float(token)}, {{token, -0.5f}, {token + 1, -1.5f}}};
}

/// Outputs with every field set, ids from `base`.
ServiceOutputs everyOutput(int64_t base) {
  ServiceOutputs o;
  o.scored.push_back({base, {entry(3), entry(4)}});
  o.sampled.push_back({base + 1, 17, entry(17)});
  o.sampled.push_back({base + 2, 18, std::nullopt});
  GenerationResult r;
  r.id = base + 3;
  r.tokens = {5, 6, 7};
  r.submitted = 1.25;
  r.firstToken = 2.5;
  r.finished = 3.75;
  r.tokenTimes = {2.5, 3.0, 3.75};
  r.preemptions = 2;
  r.finishReason = FinishReason::Stop;
  r.logprobs = {entry(5), entry(6), entry(7)};
  r.promptLogprobs = {entry(1)};
  o.finished.push_back(r);
  o.finished.push_back(GenerationResult()); // the defaults
  return o;
}

void expectSame(const LogprobEntry &a, const LogprobEntry &b) {
  EXPECT_EQ(a.chosen.token, b.chosen.token);
  EXPECT_EQ(a.chosen.logprob, b.chosen.logprob);
  ASSERT_EQ(a.top.size(), b.top.size());
  for (size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].token, b.top[i].token);
    EXPECT_EQ(a.top[i].logprob, b.top[i].logprob);
  }
}

void expectSame(const std::vector<LogprobEntry> &a, const std::vector<LogprobEntry> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    expectSame(a[i], b[i]);
}

void expectSame(const ServiceOutputs &a, const ServiceOutputs &b) {
  ASSERT_EQ(a.scored.size(), b.scored.size());
  for (size_t i = 0; i < a.scored.size(); ++i) {
    EXPECT_EQ(a.scored[i].id, b.scored[i].id);
    expectSame(a.scored[i].logprobs, b.scored[i].logprobs);
  }
  ASSERT_EQ(a.sampled.size(), b.sampled.size());
  for (size_t i = 0; i < a.sampled.size(); ++i) {
    EXPECT_EQ(a.sampled[i].id, b.sampled[i].id);
    EXPECT_EQ(a.sampled[i].token, b.sampled[i].token);
    ASSERT_EQ(a.sampled[i].logprob.has_value(), b.sampled[i].logprob.has_value());
    if (a.sampled[i].logprob)
      expectSame(*a.sampled[i].logprob, *b.sampled[i].logprob);
  }
  ASSERT_EQ(a.finished.size(), b.finished.size());
  for (size_t i = 0; i < a.finished.size(); ++i) {
    const GenerationResult &x = a.finished[i], &y = b.finished[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_EQ(x.submitted, y.submitted);
    EXPECT_EQ(x.firstToken, y.firstToken);
    EXPECT_EQ(x.finished, y.finished);
    EXPECT_EQ(x.tokenTimes, y.tokenTimes);
    EXPECT_EQ(x.preemptions, y.preemptions);
    EXPECT_EQ(x.finishReason, y.finishReason);
    expectSame(x.logprobs, y.logprobs);
    expectSame(x.promptLogprobs, y.promptLogprobs);
  }
}

TEST(ServiceOutputs, EveryFieldComesBack) {
  const ServiceOutputs outputs = everyOutput(1ll << 35);
  auto back = decodeOutputs(encodeOutputs(outputs));
  ASSERT_TRUE(back) << back.status().message();
  expectSame(*back, outputs);
  auto none = decodeOutputs(encodeOutputs(ServiceOutputs()));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(ServiceOutputs, MalformedListsAreRefused) {
  const std::vector<int32_t> words = encodeOutputs(everyOutput(9));
  for (size_t n = 0; n < words.size(); ++n)
    EXPECT_FALSE(decodeOutputs(std::vector<int32_t>(words.begin(), words.begin() + long(n))))
        << n << " of " << words.size() << " words decoded";
  std::vector<int32_t> longer = words;
  longer.push_back(0);
  EXPECT_FALSE(decodeOutputs(longer));
  auto events = decodeOutputs(encodeEvents(ServiceEvents()));
  ASSERT_FALSE(events);
  EXPECT_NE(events.status().message().find("tag"), std::string::npos);
}

TEST(ServiceOutputs, OneRankGathersItsOwn) {
  auto device = createCpuDevice();
  auto ranks = createLocalCollective();
  auto all = gatherOutputs(*ranks, *device, everyOutput(5));
  ASSERT_TRUE(all) << all.status().message();
  ASSERT_EQ(all->size(), 1u);
  expectSame((*all)[0], everyOutput(5));
}

TEST(ServiceEvents, OneRankSharesItsOwn) {
  auto device = createCpuDevice();
  auto ranks = createLocalCollective();
  ServiceEvents events;
  events.submissions.push_back(everyField(2));
  events.cancels = {4};
  ASSERT_TRUE(shareEvents(*ranks, *device, events));
  ASSERT_EQ(events.submissions.size(), 1u);
  expectSame(events.submissions[0], everyField(2));
  EXPECT_EQ(events.cancels, std::vector<int64_t>{4});
}

} // namespace
