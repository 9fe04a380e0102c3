//===- SamplerTest.cpp - the sampler against its definitions --------------===//
//
// Top-k, top-p, min-p, the three penalties and min-tokens on a vocabulary of
// six tokens whose numbers can be worked out by hand (each expectation is
// written from the formula in Sampler.h), then against a naive reference on
// random cases, and seeded draws against the tokens the sampler drew before
// min-p and the penalties came and against a full sort's draws at Qwen's
// vocabulary (they must not change).
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

using moe::rt::MinTokens;
using moe::rt::Sampler;
using moe::rt::SamplingOptions;

namespace {

const std::vector<float> kLogits = {0.5f, 2.0f, 1.9f, -1.0f, 1.8f, 0.0f};
const int64_t kVocab = int64_t(kLogits.size());

std::set<int32_t> picked(SamplingOptions o, int draws) {
  std::set<int32_t> seen;
  for (int seed = 0; seed < draws; ++seed) {
    o.seed = uint64_t(seed);
    Sampler s(o);
    std::vector<float> row = kLogits;
    seen.insert(*s.next(row.data(), kVocab));
  }
  return seen;
}

/// The greedy picks of `s` over `steps` calls on kLogits.
std::vector<int32_t> greedyRun(Sampler &s, int steps) {
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) {
    std::vector<float> row = kLogits;
    out.push_back(*s.next(row.data(), kVocab));
  }
  return out;
}

/// Makes `s` generate `tokens` whatever its options: a row where the token
/// wants is 1000 above the rest leaves the others a probability of exactly
/// 0 in double.
void force(Sampler &s, const std::vector<int32_t> &tokens) {
  for (int32_t t : tokens) {
    std::vector<float> row(size_t(kVocab), 0.0f);
    row[size_t(t)] = 1000.0f;
    ASSERT_EQ(*s.next(row.data(), kVocab), t);
  }
}

/// softmax(logits / temperature) over the tokens in `kept` (0 elsewhere).
std::vector<double> softmax(const std::vector<double> &logits, double temperature,
                            const std::set<int32_t> &kept) {
  std::vector<double> p(logits.size(), 0.0);
  double sum = 0;
  for (int32_t t : kept)
    sum += std::exp(logits[size_t(t)] / temperature);
  for (int32_t t : kept)
    p[size_t(t)] = std::exp(logits[size_t(t)] / temperature) / sum;
  return p;
}

std::vector<double> probabilities(Sampler &s, std::vector<float> row = kLogits) {
  return s.probabilities(row.data(), int64_t(row.size()));
}

/// Equal to the rounding of the logits to float (the hand values are
/// written in decimal).
void expectNear(const std::vector<double> &got, const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6) << "token " << i;
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
  Sampler s(o);
  expectNear(probabilities(s), softmax({0.5, 2.0, 1.9, -1.0, 1.8, 0.0}, 1.0, {1, 2}));
}

// Min-p compares each probability with the top one after the temperature:
// exp((l - 2.0) / T) >= 0.2. At T = 1 tokens 1, 2, 4 (ratios 1, 0.905,
// 0.819) and 0 (0.223) stay, 5 (0.135) and 3 go; at T = 0.5 token 0's ratio
// is exp(-3) = 0.0498: it goes too.
TEST(Sampler, MinPDropsTokensBelowAShareOfTheTopOneAfterTemperature) {
  const std::vector<double> l = {0.5, 2.0, 1.9, -1.0, 1.8, 0.0};
  SamplingOptions o;
  o.minP = 0.2f;
  o.temperature = 1.0f;
  Sampler warm(o);
  expectNear(probabilities(warm), softmax(l, 1.0, {0, 1, 2, 4}));
  o.temperature = 0.5f;
  Sampler cool(o);
  expectNear(probabilities(cool), softmax(l, 0.5, {1, 2, 4}));
  EXPECT_EQ(picked(o, 400), (std::set<int32_t>{1, 2, 4}));
  // Top-p then renormalises over what min-p left (vLLM: min-p masks before
  // top-k/top-p): at T = 1 the kept ratios 1 + 0.905 + 0.819 + 0.223 sum to
  // 2.947 and 0.63 of it (1.857) is reached by tokens 1 and 2; over all six
  // (3.132) it would take token 4 too.
  o.temperature = 1.0f;
  o.topP = 0.63f;
  Sampler both(o);
  expectNear(probabilities(both), softmax(l, 1.0, {1, 2}));
  o.minP = 0;
  Sampler topPOnly(o);
  expectNear(probabilities(topPOnly), softmax(l, 1.0, {1, 2, 4}));
}

// Repetition 2 over prompt {1, 3}: token 1's 2.0 becomes 1.0 (divided),
// token 3's -1.0 becomes -2.0 (multiplied). Greedy then takes 2 (1.9), which
// as a generated token becomes 0.95: 4 (1.8) comes next, then 0.9, and 1
// (1.0, penalised once however often it comes) twice.
TEST(Sampler, RepetitionPenaltyCoversPromptAndOutputOnce) {
  SamplingOptions o;
  o.repetitionPenalty = 2.0f;
  Sampler greedy(o, {1, 3, 1});
  EXPECT_EQ(greedyRun(greedy, 4), (std::vector<int32_t>{2, 4, 1, 1}));
  o.temperature = 1.0f;
  Sampler sampled(o, {1, 3});
  expectNear(probabilities(sampled),
             softmax({0.5, 2.0 / 2, 1.9, -1.0 * 2, 1.8, 0.0}, 1.0, {0, 1, 2, 3, 4, 5}));
  // Without the penalty, token 1 first.
  Sampler plain(SamplingOptions{}, {1, 3});
  EXPECT_EQ(greedyRun(plain, 2), (std::vector<int32_t>{1, 1}));
}

// Frequency 0.5 and presence 0.3 over generated tokens only (the prompt's
// token 1 is not penalised): 1 (2.0) first, then 2 (1.9 > 2.0 - 0.8), 4
// (1.8 > 1.2, 1.1), 1 (1.2 > 1.1, 1.0), 2 (1.1 > 2.0 - 1.3 = 0.7), 4.
TEST(Sampler, FrequencyAndPresencePenaliseGeneratedTokensByCount) {
  SamplingOptions o;
  o.frequencyPenalty = 0.5f;
  o.presencePenalty = 0.3f;
  Sampler greedy(o, {1});
  EXPECT_EQ(greedyRun(greedy, 6), (std::vector<int32_t>{1, 2, 4, 1, 2, 4}));
  // After 1, 1, 2 at temperature 0.7: 2.0 - 2 * 0.5 - 0.3, 1.9 - 0.5 - 0.3.
  o.temperature = 0.7f;
  Sampler sampled(o, {4});
  force(sampled, {1, 1, 2});
  expectNear(probabilities(sampled),
             softmax({0.5, 2.0 - 1.0 - 0.3, 1.9 - 0.5 - 0.3, -1.0, 1.8, 0.0}, 0.7,
                     {0, 1, 2, 3, 4, 5}));
  // Negative values favour repeats: -2 presence keeps token 1 first.
  SamplingOptions favour;
  favour.presencePenalty = -2.0f;
  Sampler repeat(favour);
  EXPECT_EQ(greedyRun(repeat, 3), (std::vector<int32_t>{1, 1, 1}));
}

// Min tokens 2 with end tokens {1, 4}: they get -inf for the first two
// picks (2, the next likeliest, twice), then 1 wins again.
TEST(Sampler, MinTokensMasksEndTokensUntilEnoughAreGenerated) {
  Sampler greedy(SamplingOptions{}, {}, MinTokens{2, {1, 4}});
  EXPECT_EQ(greedyRun(greedy, 3), (std::vector<int32_t>{2, 2, 1}));
  SamplingOptions o;
  o.temperature = 1.0f;
  Sampler sampled(o, {}, MinTokens{1, {1, 4}});
  expectNear(probabilities(sampled), softmax({0.5, 2.0, 1.9, -1.0, 1.8, 0.0}, 1.0, {0, 2, 3, 5}));
  force(sampled, {3});
  expectNear(probabilities(sampled),
             softmax({0.5, 2.0, 1.9, -1.0, 1.8, 0.0}, 1.0, {0, 1, 2, 3, 4, 5}));
}

TEST(Sampler, TheRawLogitsComeBack) {
  SamplingOptions o;
  o.temperature = 0.9f;
  o.repetitionPenalty = 1.3f;
  o.frequencyPenalty = 0.4f;
  o.presencePenalty = -0.2f;
  Sampler s(o, {1, 2, 2}, MinTokens{3, {4}});
  for (int i = 0; i < 5; ++i) {
    std::vector<float> row = kLogits;
    ASSERT_TRUE(s.next(row.data(), kVocab));
    EXPECT_EQ(row, kLogits) << "after pick " << i;
    (void)s.probabilities(row.data(), kVocab);
    EXPECT_EQ(row, kLogits);
  }
  EXPECT_EQ(s.generated(), 5);
}

TEST(Sampler, NaNIsRefused) {
  Sampler s(SamplingOptions{});
  std::vector<float> row = kLogits;
  row[3] = NAN;
  auto r = s.next(row.data(), kVocab);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "the logits hold NaN (token 3): the plan's weights or "
                                  "activations are not finite; no token can be picked");
  // Found past the first blocks of the scan too.
  std::vector<float> wide(200, 0.5f);
  wide[150] = NAN;
  r = s.next(wide.data(), int64_t(wide.size()));
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("(token 150)"), std::string::npos);
}

TEST(Sampler, TokensOutsideTheRowAreRefused) {
  SamplingOptions o;
  o.repetitionPenalty = 1.5f;
  std::vector<float> row = kLogits;
  auto r = Sampler(o, {2, 6}).next(row.data(), kVocab);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(), "token id 6 of the prompt or the end tokens is out of the "
                                  "vocabulary [0, 6)");
  r = Sampler(SamplingOptions{}, {}, MinTokens{1, {-1}}).next(row.data(), kVocab);
  ASSERT_FALSE(r);
  EXPECT_EQ(row, kLogits);
}

TEST(Sampler, OptionsOutOfRangeAreRefusedByName) {
  auto message = [](void (*change)(SamplingOptions &)) {
    SamplingOptions o;
    change(o);
    moe::rt::Status st = moe::rt::validate(o);
    return st ? std::string() : st.message();
  };
  EXPECT_EQ(message([](SamplingOptions &) {}), "");
  EXPECT_EQ(message([](SamplingOptions &o) { o.temperature = -1; }),
            "temperature must be a finite number >= 0, got -1");
  EXPECT_EQ(message([](SamplingOptions &o) { o.topP = 0; }), "top-p must lie in (0, 1], got 0");
  EXPECT_EQ(message([](SamplingOptions &o) { o.topK = -1; }),
            "top-k must be >= 0 (0: off), got -1");
  EXPECT_EQ(message([](SamplingOptions &o) { o.minP = 1.5f; }),
            "min-p must lie in [0, 1], got 1.5");
  EXPECT_EQ(message([](SamplingOptions &o) { o.repetitionPenalty = 0; }),
            "repetition penalty must be a finite number > 0 (1: off), got 0");
  EXPECT_EQ(message([](SamplingOptions &o) { o.presencePenalty = 2.5f; }),
            "presence penalty must lie in [-2, 2], got 2.5");
  EXPECT_EQ(message([](SamplingOptions &o) { o.frequencyPenalty = NAN; }),
            "frequency penalty must lie in [-2, 2], got nan");
}

// --- against a naive reference on random cases ---

/// Sampler.h's steps written out with dense counts over the vocabulary.
std::vector<double> naiveProbabilities(const std::vector<float> &raw, const SamplingOptions &o,
                                       const std::vector<int32_t> &prompt,
                                       const std::vector<int32_t> &generated,
                                       const MinTokens &min) {
  const size_t n = raw.size();
  std::vector<float> l = raw;
  std::vector<int> count(n, 0);
  std::vector<bool> seen(n, false);
  for (int32_t t : generated)
    ++count[size_t(t)], seen[size_t(t)] = true;
  for (int32_t t : prompt)
    seen[size_t(t)] = true;
  if (int64_t(generated.size()) < min.count)
    for (int32_t t : min.endTokens)
      l[size_t(t)] = -INFINITY;
  for (size_t v = 0; v < n; ++v) {
    if (seen[v])
      l[v] = l[v] > 0 ? l[v] / o.repetitionPenalty : l[v] * o.repetitionPenalty;
    l[v] = l[v] - o.frequencyPenalty * float(count[v]);
    if (count[v] > 0)
      l[v] = l[v] - o.presencePenalty;
  }
  std::vector<double> p(n, 0.0);
  if (o.temperature == 0) {
    p[size_t(std::max_element(l.begin(), l.end()) - l.begin())] = 1;
    return p;
  }
  double top = *std::max_element(l.begin(), l.end());
  std::vector<double> w(n);
  for (size_t v = 0; v < n; ++v)
    w[v] = std::exp((double(l[v]) - top) / o.temperature);
  std::vector<size_t> rank(n);
  std::iota(rank.begin(), rank.end(), 0);
  std::stable_sort(rank.begin(), rank.end(), [&](size_t a, size_t b) { return l[a] > l[b]; });
  std::vector<size_t> kept;
  for (size_t i = 0; i < n; ++i) {
    const size_t v = rank[i];
    if ((o.topK > 0 && int32_t(i) >= o.topK) || w[v] < o.minP)
      break;
    kept.push_back(v);
  }
  double total = 0, mass = 0;
  for (size_t v : kept)
    total += w[v];
  size_t keep = 0;
  while (keep < kept.size() && (keep == 0 || mass < o.topP * total))
    mass += w[kept[keep++]];
  for (size_t i = 0; i < keep; ++i)
    p[kept[i]] = w[kept[i]] / mass;
  return p;
}

TEST(Sampler, MatchesANaiveReferenceOnRandomCases) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> logit(-4, 4), unit(0, 1);
  std::uniform_int_distribution<int32_t> token(0, 39);
  for (int c = 0; c < 300; ++c) {
    std::vector<float> raw(40);
    for (float &x : raw)
      x = c % 3 == 0 ? float(int(logit(rng))) : logit(rng); // whole numbers: ties
    SamplingOptions o;
    o.temperature = c % 5 == 0 ? 0.0f : 0.2f + 1.5f * unit(rng);
    o.topK = c % 4 == 0 ? 0 : token(rng) + 1;
    o.topP = c % 2 ? 1.0f : 0.1f + 0.9f * unit(rng);
    o.minP = c % 3 ? 0.0f : 0.5f * unit(rng);
    o.repetitionPenalty = c % 2 ? 1.0f : 0.5f + 1.5f * unit(rng);
    o.frequencyPenalty = c % 7 < 3 ? 0.0f : 4 * unit(rng) - 2;
    o.presencePenalty = c % 6 < 2 ? 0.0f : 4 * unit(rng) - 2;
    std::vector<int32_t> prompt(size_t(token(rng) % 8));
    for (int32_t &t : prompt)
      t = token(rng);
    MinTokens min{token(rng) % 5, {token(rng), token(rng)}};
    Sampler s(o, prompt, min);
    std::vector<int32_t> generated;
    for (int step = 0; step < 6; ++step) {
      std::vector<float> row = raw;
      std::vector<double> want = naiveProbabilities(raw, o, prompt, generated, min);
      std::vector<double> got = s.probabilities(row.data(), int64_t(row.size()));
      for (size_t v = 0; v < want.size(); ++v)
        ASSERT_NEAR(got[v], want[v], 1e-9) << "case " << c << ", step " << step << ", token " << v;
      const int32_t t = *s.next(row.data(), int64_t(row.size()));
      ASSERT_GT(want[size_t(t)], 0) << "case " << c << ": drew a token the reference drops";
      generated.push_back(t);
    }
  }
}

// The tokens seeded draws gave before min-p and the penalties were added
// (recorded from the sampler at c18e529): with none of them set, a seed
// draws what it drew.
TEST(Sampler, SeededDrawsAreWhatTheyWere) {
  std::vector<float> row(64);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 0.7f);
  for (float &x : row)
    x = normal(rng);
  std::vector<int32_t> drawn;
  for (uint64_t seed = 0; seed < 8; ++seed)
    for (auto [temperature, topP, topK] : {std::tuple{0.8f, 0.9f, 0}, std::tuple{1.3f, 1.0f, 5}}) {
      SamplingOptions o;
      o.temperature = temperature;
      o.topP = topP;
      o.topK = topK;
      o.seed = seed;
      Sampler s(o);
      for (int i = 0; i < 3; ++i)
        drawn.push_back(*s.next(row.data(), int64_t(row.size())));
    }
  const std::vector<int32_t> before = {35, 26, 47, 47, 8,  47, 47, 47, 41, 47, 47, 35,
                                       9,  25, 16, 8,  20, 20, 11, 35, 32, 35, 47, 38,
                                       16, 41, 32, 20, 35, 38, 42, 47, 35, 38, 47, 47,
                                       15, 11, 14, 20, 35, 20, 43, 1,  47, 20, 8,  47};
  EXPECT_EQ(drawn, before);
}

// At Qwen3's vocabulary (151,936) the selections draw what a full sort
// walked likeliest first draws (the sampler's method until 2026-12-05), for
// each truncation alone and together, 16 seeds each: the draw follows the
// likelihood order, not the token ids. The sums run in another order, so a
// point within rounding of a boundary could go either way: on these rows,
// none does.
TEST(Sampler, DrawsWhatAFullSortDrewAtALargeVocabulary) {
  const int64_t vocab = 151936;
  std::vector<float> row(static_cast<size_t>(vocab));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 2.5f);
  for (float &x : row)
    x = normal(rng);
  for (size_t t = 0; t < 2000; ++t) // ties, broken by the lower id
    row[t * 61] = row[t * 61 + 1];
  std::vector<int32_t> likeliest(static_cast<size_t>(vocab));
  std::iota(likeliest.begin(), likeliest.end(), 0);
  std::stable_sort(likeliest.begin(), likeliest.end(),
                   [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
  auto sortedDraw = [&](const SamplingOptions &o) {
    std::vector<int32_t> order = likeliest;
    if (o.topK > 0)
      order.resize(size_t(o.topK));
    std::vector<double> w;
    for (int32_t t : order) {
      w.push_back(std::exp((row[size_t(t)] - row[size_t(order[0])]) / o.temperature));
      if (w.back() < o.minP) {
        w.pop_back();
        break;
      }
    }
    double sum = std::accumulate(w.begin(), w.end(), 0.0), mass = 0;
    size_t keep = 0;
    while (keep < w.size() && (keep == 0 || mass < o.topP * sum))
      mass += w[keep++];
    std::mt19937_64 draws(o.seed);
    double r = std::uniform_real_distribution<double>(0.0, mass)(draws);
    for (size_t i = 0; i < keep; ++i)
      if ((r -= w[i]) <= 0)
        return order[i];
    return order[keep - 1];
  };
  for (auto [topK, topP, minP] : {std::tuple{0, 1.0f, 0.0f}, std::tuple{50, 1.0f, 0.0f},
                                  std::tuple{0, 0.9f, 0.0f}, std::tuple{0, 1.0f, 0.05f},
                                  std::tuple{400, 0.8f, 0.01f}})
    for (uint64_t seed = 0; seed < 16; ++seed) {
      SamplingOptions o;
      o.temperature = 0.7f;
      o.topK = topK;
      o.topP = topP;
      o.minP = minP;
      o.seed = seed;
      Sampler s(o);
      EXPECT_EQ(*s.next(row.data(), vocab), sortedDraw(o))
          << "top-k " << topK << ", top-p " << topP << ", min-p " << minP << ", seed " << seed;
    }
}

} // namespace
