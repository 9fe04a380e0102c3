//===- LinearPanelsTest.cpp - linear() over weights stored in panels ------===//
//
// Kernels.h defines a panel weight's product exactly: per output, acc = 0,
// acc = fma(x[c], w[c], acc) for c = 0 .. k - 1, then acc + bias (zero
// without one). The reference here runs that loop over the row-major values,
// decoded from their bits with ldexp, and packs the panels itself; every
// path (one token, tiles, chunks of k, a short last item) must give its bits.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/ThreadPool.h"
#include "test/unit/kernels/NamedRows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace moe::cpu;

namespace {

/// A [n, k] weight of type `type` in panels: `bits` in the panel layout,
/// `value` the row-major values.
struct PanelWeight {
  WeightType type;
  int64_t n, k;
  std::vector<float> f32;
  std::vector<uint16_t> half;
  std::vector<float> value;

  Weight weight() const {
    Weight w;
    w.type = type;
    w.data = type == WeightType::F32 ? static_cast<const void *>(f32.data()) : half.data();
    w.panelCols = k;
    return w;
  }
};

float decodeHalf(WeightType type, uint16_t b) {
  const float sign = b & 0x8000 ? -1.0f : 1.0f;
  if (type == WeightType::BF16) {
    const int e = (b >> 7) & 255, m = b & 127;
    return sign * (e == 0 ? std::ldexp(float(m), -133) : std::ldexp(float(128 + m), e - 134));
  }
  const int e = (b >> 10) & 31, m = b & 1023;
  return sign * (e == 0 ? std::ldexp(float(m), -24) : std::ldexp(float(1024 + m), e - 25));
}

PanelWeight randomPanels(WeightType type, int64_t n, int64_t k, std::mt19937 &rng) {
  PanelWeight w{type, n, k, {}, {}, std::vector<float>(size_t(n * k))};
  std::vector<uint16_t> rowHalf(size_t(n * k));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < n * k; ++i) {
    if (type == WeightType::F32) {
      w.value[size_t(i)] = uniform(rng);
      continue;
    }
    // Finite values in about [2^-10, 2^5]: exponent fields of both formats.
    const uint16_t sign = rng() % 2 ? 0x8000 : 0;
    const uint16_t bits = type == WeightType::BF16
                              ? uint16_t(sign | (117 + rng() % 15) << 7 | rng() % 128)
                              : uint16_t(sign | (5 + rng() % 15) << 10 | rng() % 1024);
    rowHalf[size_t(i)] = bits;
    w.value[size_t(i)] = decodeHalf(type, bits);
  }
  // Element (r, c) at ((r / 8) * k + c) * 8 + r % 8.
  (type == WeightType::F32 ? w.f32.resize(size_t(n * k)) : w.half.resize(size_t(n * k)));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const size_t at = size_t((r / 8 * k + c) * 8 + r % 8), from = size_t(r * k + c);
      if (type == WeightType::F32)
        w.f32[at] = w.value[from];
      else
        w.half[at] = rowHalf[from];
    }
  return w;
}

/// The definition, token by token.
std::vector<float> sequentialFma(const std::vector<float> &x, int64_t tokens,
                                 const PanelWeight &w, const std::vector<float> *bias) {
  std::vector<float> out(size_t(tokens * w.n));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t r = 0; r < w.n; ++r) {
      float acc = 0.0f;
      for (int64_t c = 0; c < w.k; ++c)
        acc = std::fma(x[size_t(t * w.k + c)], w.value[size_t(r * w.k + c)], acc);
      out[size_t(t * w.n + r)] = acc + (bias ? (*bias)[size_t(r)] : 0.0f);
    }
  return out;
}

/// An output buffer of `count` floats holding NaN (a kernel must write every
/// element, not add to it), and kGuard NaN floats past its end that it must
/// leave alone.
constexpr size_t kGuard = 16;
std::vector<float> nanBuffer(int64_t count) {
  return std::vector<float>(static_cast<size_t>(count) + kGuard, std::nanf(""));
}
void expectGuardKept(const std::vector<float> &out) {
  for (size_t i = out.size() - kGuard; i < out.size(); ++i)
    ASSERT_TRUE(std::isnan(out[i])) << "wrote past the end at " << i;
}
bool sameBits(const std::vector<float> &a, const std::vector<float> &b, size_t count) {
  return std::memcmp(a.data(), b.data(), count * sizeof(float)) == 0;
}

std::vector<float> randomX(int64_t count, std::mt19937 &rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float &v : x)
    v = uniform(rng);
  return x;
}

class LinearPanels : public testing::TestWithParam<WeightType> {
protected:
  std::mt19937 rng{7};
};

std::string typeName(const testing::TestParamInfo<WeightType> &info) {
  const char *names[] = {"F32", "BF16", "F16"};
  return names[int(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Weights, LinearPanels,
                         testing::Values(WeightType::F32, WeightType::BF16, WeightType::F16),
                         typeName);

// Every path: one token (8 panels at once, or a short last item), tiles of
// 1-6 tokens, one token block (128) and more, k within one chunk
// (kPanelChunk, 1024), exactly two, two and three with a tail; a last item
// of 1 to 7 panels.
TEST_P(LinearPanels, MatchesTheSequentialFmaDefinitionBitForBit) {
  const std::pair<int64_t, int64_t> shapes[] = {
      {1, 8},    {5, 16},    {37, 24},  {256, 64}, {257, 72}, {600, 136}, {1030, 8},
      {2600, 8}, {64, 520},  {2048, 32}, {40, 96},  {40, 104}, {40, 112}, {40, 120}};
  for (auto [k, n] : shapes)
    for (int64_t tokens : {1, 2, 5, 6, 7, 13, 128, 131})
      for (bool withBias : {false, true}) {
        SCOPED_TRACE(testing::Message() << tokens << " tokens, k " << k << ", n " << n
                                        << ", bias " << withBias << ", " << isaName(isa()));
        const PanelWeight w = randomPanels(GetParam(), n, k, rng);
        const std::vector<float> x = randomX(tokens * k, rng), b = randomX(n, rng);
        Weight bias;
        bias.data = b.data();
        std::vector<float> out = nanBuffer(tokens * n);
        linear(x.data(), tokens, k, w.weight(), n, withBias ? &bias : nullptr, out.data());
        const std::vector<float> want = sequentialFma(x, tokens, w, withBias ? &b : nullptr);
        ASSERT_TRUE(sameBits(out, want, want.size()));
        expectGuardKept(out);
      }
}

// A token's result does not depend on what it is batched with or on the
// thread count.
TEST_P(LinearPanels, BatchInvariant) {
  const int64_t k = 600, n = 136;
  const PanelWeight w = randomPanels(GetParam(), n, k, rng);
  const std::vector<float> x = randomX(140 * k, rng);
  std::vector<float> alone(size_t(140 * n));
  for (int64_t t = 0; t < 140; ++t)
    linear(x.data() + t * k, 1, k, w.weight(), n, nullptr, alone.data() + t * n);
  const int threads = kernelThreads();
  for (int nthreads : {1, 2, 3})
    for (int64_t tokens : {2, 3, 7, 8, 16, 17, 129, 140}) {
      SCOPED_TRACE(testing::Message() << tokens << " tokens, " << nthreads << " threads");
      setKernelThreads(nthreads);
      std::vector<float> out = nanBuffer(tokens * n);
      linear(x.data(), tokens, k, w.weight(), n, nullptr, out.data());
      EXPECT_TRUE(sameBits(out, alone, size_t(tokens * n)));
      expectGuardKept(out);
    }
  setKernelThreads(threads);
}

// Experts of a stacked [E, n, k] panel weight (offset(e * n * k)), some
// with no tokens, in one group: each equals its own linear().
TEST_P(LinearPanels, GroupOfStackedExpertsEqualsEachAlone) {
  const int64_t experts = 4, n = 80, k = 300;
  const PanelWeight stack = randomPanels(GetParam(), experts * n, k, rng);
  const int64_t tokens[experts] = {3, 0, 1, 12};
  std::vector<std::vector<float>> x, grouped, alone;
  std::vector<LinearProblem> problems;
  for (int64_t e = 0; e < experts; ++e) {
    x.push_back(randomX(tokens[e] * k, rng));
    grouped.push_back(nanBuffer(tokens[e] * n));
    alone.push_back(nanBuffer(tokens[e] * n));
  }
  for (int64_t e = 0; e < experts; ++e) {
    const Weight w = stack.weight().offset(size_t(e * n * k));
    if (tokens[e] > 0)
      problems.push_back({x[e].data(), tokens[e], k, w, n, nullptr, grouped[e].data()});
    linear(x[e].data(), tokens[e], k, w, n, nullptr, alone[e].data());
  }
  linearGroup(problems.data(), problems.size());
  for (int64_t e = 0; e < experts; ++e) {
    EXPECT_TRUE(sameBits(grouped[e], alone[e], size_t(tokens[e] * n))) << "expert " << e;
    expectGuardKept(grouped[e]);
  }
}

// Tokens named by xRows (rows of x, in any order, repeated) are read where
// they are, and give the bits of those rows copied out: one token, the
// tiles, more than one token block of 128.
TEST_P(LinearPanels, ReadsTheRowsXRowsNamesInPlace) {
  const int64_t k = 300, n = 72;
  const PanelWeight w = randomPanels(GetParam(), n, k, rng);
  const std::vector<float> x = randomX(40 * k, rng);
  for (int64_t tokens : {1, 4, 131}) {
    SCOPED_TRACE(testing::Message() << tokens << " tokens");
    const NamedRows rows = nameRows(x, k, tokens, rng);
    std::vector<float> want = nanBuffer(tokens * n), got = nanBuffer(tokens * n);
    linear(rows.copied.data(), tokens, k, w.weight(), n, nullptr, want.data());
    const LinearProblem p{x.data(), tokens, k, w.weight(), n, nullptr, got.data(),
                          rows.index.data()};
    linearGroup(&p, 1);
    EXPECT_TRUE(sameBits(got, want, size_t(tokens * n)));
    expectGuardKept(got);
  }
}

// The portable build gives the AVX2 build's bits (the tests above hold at
// every level; this one runs both in one process).
TEST_P(LinearPanels, SameBitsOnEveryInstructionSet) {
  if (cpuIsa() < Isa::Avx2)
    GTEST_SKIP() << "this CPU has no AVX2+FMA: only the portable build runs";
  const Isa saved = isa();
  const int64_t k = 257, n = 136; // items of 8, 8 and 1 panels
  const PanelWeight w = randomPanels(GetParam(), n, k, rng);
  const std::vector<float> x = randomX(9 * k, rng);
  for (int64_t tokens : {1, 9}) {
    SCOPED_TRACE(testing::Message() << tokens << " tokens");
    auto run = [&](Isa level) {
      setIsa(level);
      std::vector<float> out = nanBuffer(tokens * n);
      linear(x.data(), tokens, k, w.weight(), n, nullptr, out.data());
      return out;
    };
    EXPECT_TRUE(sameBits(run(Isa::Portable), run(cpuIsa()), size_t(tokens * n)));
  }
  setIsa(saved);
}

TEST_P(LinearPanels, ElementAccessReadsRowAndColumn) {
  const PanelWeight w = randomPanels(GetParam(), 16, 5, rng);
  const Weight weight = w.weight();
  for (size_t i = 0; i < w.value.size(); ++i)
    ASSERT_EQ(weight.at(i), w.value[i]) << "element " << i;
}

} // namespace
