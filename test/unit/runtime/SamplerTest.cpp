//===- SamplerTest.cpp - top-k and top-p against their definitions --------===//
#include "moe/runtime/Sampler.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

using moe::rt::Sampler;
using moe::rt::SamplingOptions;

namespace {

const std::vector<float> kLogits = {0.5f, 2.0f, 1.9f, -1.0f, 1.8f, 0.0f};

std::set<int32_t> picked(SamplingOptions o, int draws) {
  std::set<int32_t> seen;
  for (int seed = 0; seed < draws; ++seed) {
    o.seed = uint64_t(seed);
    Sampler s(o);
    seen.insert(*s.next(kLogits.data(), int64_t(kLogits.size())));
  }
  return seen;
}

TEST(Sampler, TopKKeepsTheKLikeliest) {
  SamplingOptions o;
  o.temperature = 5.0f; // nearly uniform: every kept token shows up
  o.topK = 3;
  EXPECT_EQ(picked(o, 400), (std::set<int32_t>{1, 2, 4}));
  o.topK = 1;
  EXPECT_EQ(picked(o, 50), (std::set<int32_t>{1})); // = greedy
  o.topK = 0;
  EXPECT_EQ(picked(o, 400).size(), kLogits.size());
}

TEST(Sampler, TopPAppliesWithinTopK) {
  SamplingOptions o;
  o.temperature = 1.0f;
  o.topK = 3;
  // Softmax over {2.0, 1.9, 1.8}: 0.367, 0.332, 0.301; top-p 0.5 keeps two.
  o.topP = 0.5f;
  EXPECT_EQ(picked(o, 400), (std::set<int32_t>{1, 2}));
}

} // namespace
