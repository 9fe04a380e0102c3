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
  events.cancels = {7, 1ll << 40};
  events.cancelAll = true;
  auto back = decodeEvents(encodeEvents(events));
  ASSERT_TRUE(back) << back.status().message();
  ASSERT_EQ(back->submissions.size(), events.submissions.size());
  for (size_t i = 0; i < events.submissions.size(); ++i)
    expectSame(back->submissions[i], events.submissions[i]);
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
