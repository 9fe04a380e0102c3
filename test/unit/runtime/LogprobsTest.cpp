//===- LogprobsTest.cpp - log-softmax entries against their definition ----===//
#include "moe/runtime/Logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

using moe::rt::logprobEntry;
using moe::rt::LogprobEntry;

namespace {

/// log_softmax in double, written out.
std::vector<double> naiveLogSoftmax(const std::vector<float> &logits) {
  double sum = 0;
  for (float l : logits)
    sum += std::exp(double(l));
  std::vector<double> out;
  for (float l : logits)
    out.push_back(double(l) - std::log(sum));
  return out;
}

TEST(Logprobs, HandCase) {
  // Four equal logits: each -ln 4; the top two are the two lowest ids.
  std::vector<float> logits = {3, 3, 3, 3};
  LogprobEntry e = *logprobEntry(logits.data(), 4, 2, 2);
  EXPECT_EQ(e.chosen.token, 2);
  EXPECT_EQ(e.chosen.logprob, float(-std::log(4.0)));
  ASSERT_EQ(e.top.size(), 2u);
  EXPECT_EQ(e.top[0].token, 0);
  EXPECT_EQ(e.top[1].token, 1);
  // {ln 1, ln 3}: probabilities 1/4 and 3/4.
  std::vector<float> two = {0.0f, float(std::log(3.0))};
  e = *logprobEntry(two.data(), 2, 0, 0);
  EXPECT_FLOAT_EQ(e.chosen.logprob, float(std::log(0.25)));
  EXPECT_TRUE(e.top.empty());
}

TEST(Logprobs, MatchNaiveLogSoftmaxOnRandomRows) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 4);
  for (int c = 0; c < 50; ++c) {
    const size_t vocab = 1 + size_t(c) * 97;
    std::vector<float> logits(vocab);
    for (float &x : logits)
      x = c % 2 ? normal(rng) : float(std::lround(normal(rng))); // whole numbers tie
    const std::vector<double> want = naiveLogSoftmax(logits);
    const int32_t token = int32_t(rng() % vocab), k = int32_t(c % 21);
    LogprobEntry e = *logprobEntry(logits.data(), int64_t(vocab), token, k);
    EXPECT_EQ(e.chosen.token, token);
    // Exact to float rounding: the double result rounded once.
    EXPECT_FLOAT_EQ(e.chosen.logprob, float(want[size_t(token)])) << "case " << c;
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    ASSERT_EQ(e.top.size(), std::min<size_t>(size_t(k), vocab)) << "case " << c;
    for (size_t i = 0; i < e.top.size(); ++i) {
      EXPECT_EQ(e.top[i].token, order[i]) << "case " << c << ", rank " << i;
      EXPECT_FLOAT_EQ(e.top[i].logprob, float(want[size_t(order[i])]));
    }
  }
}

TEST(Logprobs, NaNIsRefused) {
  std::vector<float> logits = {1, NAN, 2};
  auto e = logprobEntry(logits.data(), 3, 0, 1);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.status().message(),
            "the logits hold NaN or no finite value: the plan's weights or activations are not "
            "finite; no log-probability can be given");
}

} // namespace
