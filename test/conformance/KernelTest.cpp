// The kernels of the device under test, through the HAL alone: tensors are
// uploaded into device buffers, each kernel is launched as a KernelCall, and
// the result, copied back, is compared with a naive reference computed in
// double from weights decoded here (ldexp on their fields), for every weight
// dtype the device says it supports, on odd shapes and with experts that get
// no token. Attention over the paged KV cache: AttentionTest.cpp.
#include "Tensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace moe::conformance;
namespace rt = moe::rt;
using rt::DType;
using rt::Kernel;

class Kernels : public testing::TestWithParam<DType> {
protected:
  /// Skips (visibly) what the device does not run.
  bool supported(Kernel kernel) {
    return device().supports(kernel, GetParam());
  }
  std::mt19937 rng{2024};
};

std::string dtypeParamName(const testing::TestParamInfo<DType> &info) {
  return rt::dtypeName(info.param);
}

INSTANTIATE_TEST_SUITE_P(Weights, Kernels,
                         testing::Values(DType::F32, DType::BF16, DType::F16, DType::I8,
                                         DType::I4, DType::F8E4M3),
                         dtypeParamName);

#define SKIP_UNLESS_SUPPORTED(kernel)                                                        \
  if (!supported(kernel))                                                                    \
  GTEST_SKIP() << device().name() << " does not run " << rt::kernelInfo(kernel)->name      \
               << " with " << rt::dtypeName(GetParam()) << " weights"

TEST_P(Kernels, Embedding) {
  SKIP_UNLESS_SUPPORTED(Kernel::Embedding);
  const int64_t vocab = 11, cols = 10;
  const Weight table = randomWeight(GetParam(), {vocab, cols}, rng);
  const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
  DeviceTensor t = table.upload(), x = activation(ids, {5}, DType::I32),
               y = output({5, cols});
  ASSERT_TRUE(launch(Kernel::Embedding, {}, {&x, &t}, {&y}));
  std::vector<double> want, magnitude;
  for (int32_t id : ids)
    for (int64_t c = 0; c < cols; ++c) {
      want.push_back(table.ref[size_t(id * cols + c)]);
      magnitude.push_back(std::abs(want.back()));
    }
  expectNear(download<float>(y), want, magnitude, 1e-7);
}

TEST_P(Kernels, LinearOddShapesWithAndWithoutBias) {
  SKIP_UNLESS_SUPPORTED(Kernel::Linear);
  const int64_t shapes[][3] = {{1, 6, 5}, {7, 34, 9}, {33, 130, 17}}; // tokens, k, n
  for (auto [tokens, k, n] : shapes)
    for (bool withBias : {false, true}) {
      SCOPED_TRACE(testing::Message() << tokens << " tokens, k " << k << ", n " << n
                                      << (withBias ? ", bias" : ""));
      const Weight w = randomWeight(GetParam(), {n, k}, rng);
      const Weight bias = randomWeight(DType::F32, {n}, rng);
      const std::vector<float> xs = randomFloats(rng, size_t(tokens * k));
      DeviceTensor x = activation(xs, {tokens, k}), wt = w.upload(), b = bias.upload(),
                   y = output({tokens, n});
      ASSERT_TRUE(withBias ? launch(Kernel::Linear, {}, {&x, &wt, &b}, {&y})
                           : launch(Kernel::Linear, {}, {&x, &wt}, {&y}));
      std::vector<double> want, magnitude;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t o = 0; o < n; ++o) {
          double sum = withBias ? bias.ref[size_t(o)] : 0.0, mag = std::abs(sum);
          for (int64_t i = 0; i < k; ++i) {
            sum += xs[size_t(t * k + i)] * w.ref[size_t(o * k + i)];
            mag += std::abs(xs[size_t(t * k + i)] * w.ref[size_t(o * k + i)]);
          }
          want.push_back(sum);
          magnitude.push_back(mag);
        }
      expectNear(download<float>(y), want, magnitude);
    }
}

TEST_P(Kernels, RmsNormAndAddRmsNorm) {
  SKIP_UNLESS_SUPPORTED(Kernel::RmsNorm);
  const int64_t rows = 7, cols = 24;
  const float eps = 1e-5f;
  const Weight w = randomWeight(GetParam(), {cols}, rng);
  const std::vector<float> as = randomFloats(rng, size_t(rows * cols)),
                           bs = randomFloats(rng, size_t(rows * cols));
  DeviceTensor a = activation(as, {rows, cols}), b = activation(bs, {rows, cols}),
               wt = w.upload(), y = output({rows, cols}), sum = output({rows, cols});
  ASSERT_TRUE(launch(Kernel::RmsNorm, rt::RmsNormParams{eps}, {&a, &wt}, {&y}));
  const std::vector<double> a64(as.begin(), as.end());
  std::vector<double> want = rmsNormRef(a64, cols, w.ref, eps);
  expectNear(download<float>(y), want, magnitudes(want));
  if (!supported(Kernel::AddRmsNorm))
    return;
  ASSERT_TRUE(launch(Kernel::AddRmsNorm, rt::RmsNormParams{eps}, {&a, &b, &wt}, {&sum, &y}));
  std::vector<double> s(as.size());
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = double(as[i] + bs[i]); // the sum is stored in f32 and normalised from it
  want = rmsNormRef(s, cols, w.ref, eps);
  expectNear(download<float>(sum), s, magnitudes(s), 1e-7);
  expectNear(download<float>(y), want, magnitudes(want));
}

TEST_P(Kernels, SigmoidGate) {
  SKIP_UNLESS_SUPPORTED(Kernel::SigmoidGate);
  const int64_t rows = 5, cols = 18;
  const Weight g = randomWeight(GetParam(), {1, cols}, rng);
  const std::vector<float> xs = randomFloats(rng, size_t(rows * cols)),
                           ys = randomFloats(rng, size_t(rows * cols));
  DeviceTensor x = activation(xs, {rows, cols}), gt = g.upload(), yt = activation(ys, {rows, cols}),
               out = output({rows, cols});
  ASSERT_TRUE(launch(Kernel::SigmoidGate, {}, {&x, &gt, &yt}, {&out}));
  std::vector<double> want, magnitude;
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c)
      dot += xs[size_t(r * cols + c)] * g.ref[size_t(c)];
    for (int64_t c = 0; c < cols; ++c) {
      want.push_back(ys[size_t(r * cols + c)] / (1.0 + std::exp(-dot)));
      magnitude.push_back(std::abs(want.back()) + 1e-6);
    }
  }
  expectNear(download<float>(out), want, magnitude, 1e-5);
}

TEST(KernelsWithoutWeights, AddAndSiluMul) {
  std::mt19937 rng(7);
  const int64_t rows = 3, cols = 37;
  const std::vector<float> as = randomFloats(rng, size_t(rows * cols), -6, 6),
                           bs = randomFloats(rng, size_t(rows * cols));
  DeviceTensor a = activation(as, {rows, cols}), b = activation(bs, {rows, cols}),
               y = output({rows, cols});
  ASSERT_TRUE(launch(Kernel::Add, {}, {&a, &b}, {&y}));
  std::vector<double> want, magnitude;
  for (size_t i = 0; i < as.size(); ++i) {
    want.push_back(double(as[i]) + bs[i]);
    magnitude.push_back(std::abs(double(as[i])) + std::abs(double(bs[i])));
  }
  expectNear(download<float>(y), want, magnitude, 1e-7);
  ASSERT_TRUE(launch(Kernel::SiluMul, {}, {&a, &b}, {&y}));
  want.clear();
  magnitude.clear();
  for (size_t i = 0; i < as.size(); ++i) {
    want.push_back(as[i] / (1.0 + std::exp(-double(as[i]))) * bs[i]);
    magnitude.push_back(std::abs(want.back()) + 1e-7);
  }
  expectNear(download<float>(y), want, magnitude, 1e-5);
}

// Softmax over the experts, the top k (ties: never drawn here), weights
// renormalised over the chosen ones.
TEST_P(Kernels, RouterSoftmaxTopK) {
  SKIP_UNLESS_SUPPORTED(Kernel::Router);
  const int64_t tokens = 9, hidden = 16, experts = 6, topK = 2;
  const Weight w = randomWeight(GetParam(), {experts, hidden}, rng);
  const std::vector<float> xs = randomFloats(rng, size_t(tokens * hidden));
  DeviceTensor x = activation(xs, {tokens, hidden}), wt = w.upload(),
               weights = output({tokens, topK}), ids = output({tokens, topK}, DType::I32);
  rt::RouterParams p;
  p.numExperts = experts;
  p.topK = topK;
  p.normTopkProb = true;
  ASSERT_TRUE(launch(Kernel::Router, p, {&x, &wt}, {&weights, &ids}));
  const std::vector<float> gotW = download<float>(weights);
  const std::vector<int32_t> gotIds = download<int32_t>(ids);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> logits(static_cast<size_t>(experts));
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t h = 0; h < hidden; ++h)
        logits[size_t(e)] += xs[size_t(t * hidden + h)] * w.ref[size_t(e * hidden + h)];
    std::vector<int32_t> order(static_cast<size_t>(experts));
    for (int32_t e = 0; e < experts; ++e)
      order[size_t(e)] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    // Softmax renormalised over the top k is a softmax over their logits.
    const double top = logits[size_t(order[0])];
    double z = 0;
    for (int64_t j = 0; j < topK; ++j)
      z += std::exp(logits[size_t(order[size_t(j)])] - top);
    for (int64_t j = 0; j < topK; ++j) {
      EXPECT_EQ(gotIds[size_t(t * topK + j)], order[size_t(j)]) << "token " << t;
      EXPECT_NEAR(gotW[size_t(t * topK + j)],
                  std::exp(logits[size_t(order[size_t(j)])] - top) / z, 1e-5)
          << "token " << t;
    }
  }
}

/// Routing as RouterParams defines it: scores (softmax or sigmoid of the
/// logits); choice = score + bias (NoAuxTc only); with groups, only the
/// topkGroup best groups compete (group score: the best choice in it for
/// GroupLimitedGreedy, the sum of the best two for NoAuxTc; the others'
/// choices masked to 0 and -inf respectively); the topK best choices, ties
/// to the lower id, weighed by their score (NoAuxTc) or choice, renormalised
/// to sum 1 if normTopkProb, times routedScalingFactor. `margin` is how
/// close the selection came to a tie, relative to the values compared
/// (rounding may break a near tie either way).
struct Routed {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  double margin = INFINITY;
};
Routed routeRef(const std::vector<double> &logits, const std::vector<double> &bias,
                const rt::RouterParams &p) {
  const size_t e = logits.size();
  std::vector<double> score(e), choice(e);
  const double top = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (size_t i = 0; i < e; ++i)
    z += score[i] = p.scoring == rt::Scoring::Sigmoid ? 1 / (1 + std::exp(-logits[i]))
                                                       : std::exp(logits[i] - top);
  for (size_t i = 0; i < e; ++i) {
    if (p.scoring == rt::Scoring::Softmax)
      score[i] /= z;
    choice[i] = score[i] + (p.method == rt::TopkMethod::NoAuxTc ? bias[i] : 0.0);
  }
  Routed r;
  // The first `n` of the ids ordered by value, and the gap after them.
  auto best = [&](const std::vector<double> &value, int64_t n) {
    std::vector<int32_t> order(value.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = int32_t(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return value[size_t(a)] > value[size_t(b)];
    });
    if (size_t(n) < order.size()) {
      const double a = value[size_t(order[size_t(n - 1)])], b = value[size_t(order[size_t(n)])];
      if (std::isfinite(a - b))
        r.margin = std::min(r.margin, (a - b) / std::max(std::abs(a), std::abs(b)));
    }
    order.resize(size_t(n));
    return order;
  };
  if (p.method != rt::TopkMethod::Greedy) {
    const size_t size = e / size_t(p.nGroup);
    std::vector<double> group(size_t(p.nGroup));
    for (size_t g = 0; g < group.size(); ++g) {
      std::vector<double> members(choice.begin() + long(g * size),
                                  choice.begin() + long((g + 1) * size));
      std::sort(members.rbegin(), members.rend());
      group[g] = p.method == rt::TopkMethod::NoAuxTc ? members[0] + members[1] : members[0];
    }
    const std::vector<int32_t> kept = best(group, p.topkGroup);
    for (size_t i = 0; i < e; ++i)
      if (std::find(kept.begin(), kept.end(), int32_t(i / size)) == kept.end())
        choice[i] = p.method == rt::TopkMethod::NoAuxTc ? -INFINITY : 0.0;
  }
  r.ids = best(choice, p.topK);
  double sum = 0;
  for (int32_t id : r.ids) {
    r.weights.push_back(p.method == rt::TopkMethod::NoAuxTc ? score[size_t(id)]
                                                            : choice[size_t(id)]);
    sum += r.weights.back();
  }
  for (double &w : r.weights)
    w = (p.normTopkProb ? w / sum : w) * p.routedScalingFactor;
  return r;
}

// 16 experts, top 4: DeepSeek-V3's sigmoid with a correction bias of either
// sign and the sum of each group's best two (4 groups, 2 kept), renormalised
// and scaled; DeepSeek-V2's softmax with the best of each group (4 groups,
// 3 kept), scaled, not renormalised; sigmoid without groups, renormalised.
TEST_P(Kernels, RouterGroupsBiasAndScaling) {
  SKIP_UNLESS_SUPPORTED(Kernel::Router);
  const int64_t tokens = 13, hidden = 24, experts = 16, topK = 4;
  struct Case {
    const char *name;
    rt::Scoring scoring;
    rt::TopkMethod method;
    int64_t nGroup, topkGroup;
    bool norm;
    float factor;
  };
  for (const Case &c : {Case{"sigmoid noaux_tc", rt::Scoring::Sigmoid, rt::TopkMethod::NoAuxTc,
                             4, 2, true, 2.5f},
                        Case{"softmax group_limited_greedy", rt::Scoring::Softmax,
                             rt::TopkMethod::GroupLimitedGreedy, 4, 3, false, 1.5f},
                        Case{"sigmoid greedy", rt::Scoring::Sigmoid, rt::TopkMethod::Greedy, 1,
                             1, true, 1.0f}}) {
    SCOPED_TRACE(c.name);
    const Weight w = randomWeight(GetParam(), {experts, hidden}, rng);
    // Mostly below -score: masking the dropped groups with 0 instead of
    // -inf would pick their experts.
    const std::vector<float> biases = randomFloats(rng, size_t(experts), -1.5f, -0.3f);
    const std::vector<double> bias(biases.begin(), biases.end());
    const std::vector<float> xs = randomFloats(rng, size_t(tokens * hidden), -2, 2);
    DeviceTensor x = activation(xs, {tokens, hidden}), wt = w.upload(),
                 b = activation(biases, {experts}),
                 weights = output({tokens, topK}), ids = output({tokens, topK}, DType::I32);
    rt::RouterParams p;
    p.numExperts = experts;
    p.topK = topK;
    p.scoring = c.scoring;
    p.method = c.method;
    p.nGroup = c.nGroup;
    p.topkGroup = c.topkGroup;
    p.normTopkProb = c.norm;
    p.routedScalingFactor = c.factor;
    ASSERT_TRUE(c.method == rt::TopkMethod::NoAuxTc
                    ? launch(Kernel::Router, p, {&x, &wt, &b}, {&weights, &ids})
                    : launch(Kernel::Router, p, {&x, &wt}, {&weights, &ids}));
    const std::vector<float> gotW = download<float>(weights);
    const std::vector<int32_t> gotIds = download<int32_t>(ids);
    int checked = 0, negativeChoices = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<double> logits(static_cast<size_t>(experts));
      for (int64_t e = 0; e < experts; ++e)
        for (int64_t h = 0; h < hidden; ++h)
          logits[size_t(e)] += xs[size_t(t * hidden + h)] * w.ref[size_t(e * hidden + h)];
      const Routed want = routeRef(logits, bias, p);
      if (want.margin < 1e-4) // a near tie: either pick is right
        continue;
      ++checked;
      for (int64_t j = 0; j < topK; ++j) {
        const int32_t id = want.ids[size_t(j)];
        EXPECT_EQ(gotIds[size_t(t * topK + j)], id) << "token " << t << ", pick " << j;
        EXPECT_NEAR(gotW[size_t(t * topK + j)], want.weights[size_t(j)], 1e-5 * c.factor)
            << "token " << t << ", pick " << j;
        if (c.method == rt::TopkMethod::NoAuxTc)
          negativeChoices += 1 / (1 + std::exp(-logits[size_t(id)])) + bias[size_t(id)] < 0;
      }
    }
    EXPECT_GE(checked, tokens - 2) << "too many near ties to test the selection";
    if (c.method == rt::TopkMethod::NoAuxTc)
      EXPECT_GT(negativeChoices, 0) << "no chosen expert had a negative biased score";
  }
}

/// Each token's topK distinct experts, drawn from `used`.
std::vector<int32_t> randomPicks(std::vector<int32_t> used, int64_t tokens, int64_t topK,
                                 std::mt19937 &rng) {
  std::vector<int32_t> indices;
  for (int64_t t = 0; t < tokens; ++t) {
    std::shuffle(used.begin(), used.end(), rng);
    indices.insert(indices.end(), used.begin(), used.begin() + topK);
  }
  return indices;
}

// Experts 2 and 5 get no token (empty groups); grouped and one expert at a
// time give the same bits; an always-on expert is stacked last.
TEST_P(Kernels, ExpertsWithEmptyGroups) {
  SKIP_UNLESS_SUPPORTED(Kernel::Experts);
  const int64_t hidden = 20, inter = 14, routed = 7, shared = 1, experts = routed + shared;
  const int64_t tokens = 6, topK = 2;
  const Weight gate = randomWeight(GetParam(), {experts, inter, hidden}, rng);
  const Weight up = randomWeight(GetParam(), {experts, inter, hidden}, rng);
  const Weight down = randomWeight(GetParam(), {experts, hidden, inter}, rng);
  const std::vector<int32_t> indices = randomPicks({0, 1, 3, 4, 6}, tokens, topK, rng);
  const std::vector<float> xs = randomFloats(rng, size_t(tokens * hidden)),
                           ws = randomFloats(rng, size_t(tokens * topK), 0, 1);
  DeviceTensor x = activation(xs, {tokens, hidden}), w = activation(ws, {tokens, topK}),
               ids = activation(indices, {tokens, topK}, DType::I32), g = gate.upload(),
               u = up.upload(), d = down.upload(), grouped = output({tokens, hidden}),
               single = output({tokens, hidden});
  rt::ExpertsParams p;
  p.numExperts = routed;
  p.intermediate = inter;
  p.numShared = shared;
  ASSERT_TRUE(launch(Kernel::Experts, p, {&x, &w, &ids, &g, &u, &d}, {&grouped}));
  p.grouped = false;
  ASSERT_TRUE(launch(Kernel::Experts, p, {&x, &w, &ids, &g, &u, &d}, {&single}));
  std::vector<double> want(size_t(tokens * hidden)), magnitude(want.size());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < topK + shared; ++j)
      addSwigluExpertRef(&xs[size_t(t * hidden)], j < topK ? indices[size_t(t * topK + j)] : routed,
                         j < topK ? ws[size_t(t * topK + j)] : 1.0, gate, up, down, hidden, inter,
                         &want[size_t(t * hidden)], &magnitude[size_t(t * hidden)]);
  const std::vector<float> a = download<float>(grouped), b = download<float>(single);
  expectNear(a, want, magnitude, 2e-5);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

// The experts kernel as three launches (what expert parallelism exchanges
// rows between): dispatch's rows, slots and map are exactly what the
// routing says; each row expert_rows computes is its expert's SwiGLU (the
// naive reference); the rows in reverse order (as rows from other ranks
// arrive) give each row the same bits; combine gives the fused kernel's
// bits. Slots or a map out of range are refused, not followed.
TEST_P(Kernels, ExpertPartsGiveTheFusedKernelsBits) {
  SKIP_UNLESS_SUPPORTED(Kernel::ExpertRows);
  const int64_t hidden = 20, inter = 14, routed = 7, shared = 1, experts = routed + shared;
  const int64_t tokens = 6, topK = 2, picks = topK + shared, rows = tokens * picks;
  const Weight gate = randomWeight(GetParam(), {experts, inter, hidden}, rng);
  const Weight up = randomWeight(GetParam(), {experts, inter, hidden}, rng);
  const Weight down = randomWeight(GetParam(), {experts, hidden, inter}, rng);
  // 1 and 4 get no token.
  const std::vector<int32_t> indices = randomPicks({0, 2, 3, 5, 6}, tokens, topK, rng);
  const std::vector<float> xs = randomFloats(rng, size_t(tokens * hidden)),
                           ws = randomFloats(rng, size_t(tokens * topK), 0, 1);
  DeviceTensor x = activation(xs, {tokens, hidden}), w = activation(ws, {tokens, topK}),
               ids = activation(indices, {tokens, topK}, DType::I32), g = gate.upload(),
               u = up.upload(), d = down.upload(), rowsOut = output({tokens, picks, hidden}),
               slotsOut = output({tokens, picks}, DType::I32),
               mapOut = output({tokens, picks}, DType::I32);
  ASSERT_TRUE(launch(Kernel::Dispatch, rt::DispatchParams{routed, shared}, {&x, &ids},
                     {&rowsOut, &slotsOut, &mapOut}));
  const std::vector<float> rowData = download<float>(rowsOut);
  const std::vector<int32_t> slots = download<int32_t>(slotsOut), map = download<int32_t>(mapOut);
  EXPECT_TRUE(std::is_sorted(slots.begin(), slots.end()));
  std::vector<int> uses(size_t(rows), 0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < picks; ++j) {
      const int32_t row = map[size_t(t * picks + j)];
      ASSERT_TRUE(row >= 0 && row < rows) << "token " << t << ", pick " << j;
      ++uses[size_t(row)];
      EXPECT_EQ(slots[size_t(row)], j < topK ? indices[size_t(t * topK + j)] : routed);
      EXPECT_EQ(0, std::memcmp(&rowData[size_t(row * hidden)], &xs[size_t(t * hidden)],
                               size_t(hidden) * sizeof(float)));
    }
  EXPECT_EQ(std::count(uses.begin(), uses.end(), 1), rows) << "map is not a permutation";

  rt::ExpertsParams p;
  p.numExperts = experts;
  p.intermediate = inter;
  DeviceTensor y = output({tokens, picks, hidden});
  ASSERT_TRUE(launch(Kernel::ExpertRows, p, {&rowsOut, &slotsOut, &g, &u, &d}, {&y}));
  const std::vector<float> ys = download<float>(y);
  std::vector<double> want(ys.size()), magnitude(ys.size());
  for (int64_t r = 0; r < rows; ++r)
    addSwigluExpertRef(&rowData[size_t(r * hidden)], slots[size_t(r)], 1.0, gate, up, down,
                       hidden, inter, &want[size_t(r * hidden)], &magnitude[size_t(r * hidden)]);
  expectNear(ys, want, magnitude, 2e-5);

  std::vector<float> reversedRows(rowData.size());
  std::vector<int32_t> reversedSlots(slots.size()), reversedMap(map.size());
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(&rowData[size_t(r * hidden)], hidden, &reversedRows[size_t((rows - 1 - r) * hidden)]);
    reversedSlots[size_t(rows - 1 - r)] = slots[size_t(r)];
  }
  for (size_t i = 0; i < map.size(); ++i)
    reversedMap[i] = int32_t(rows - 1 - map[i]);
  DeviceTensor rRows = activation(reversedRows, {tokens, picks, hidden}),
               rSlots = activation(reversedSlots, {tokens, picks}, DType::I32),
               rMap = activation(reversedMap, {tokens, picks}, DType::I32),
               rY = output({tokens, picks, hidden}), parts = output({tokens, hidden}),
               fused = output({tokens, hidden});
  ASSERT_TRUE(launch(Kernel::ExpertRows, p, {&rRows, &rSlots, &g, &u, &d}, {&rY}));
  const std::vector<float> rys = download<float>(rY);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(0, std::memcmp(&ys[size_t(r * hidden)], &rys[size_t((rows - 1 - r) * hidden)],
                             size_t(hidden) * sizeof(float)))
        << "row " << r;
  ASSERT_TRUE(launch(Kernel::Combine, {}, {&rY, &rMap, &w, &ids}, {&parts}));
  rt::ExpertsParams fusedParams = p;
  fusedParams.numExperts = routed;
  fusedParams.numShared = shared;
  ASSERT_TRUE(launch(Kernel::Experts, fusedParams, {&x, &w, &ids, &g, &u, &d}, {&fused}));
  const std::vector<float> a = download<float>(parts), b = download<float>(fused);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));

  reversedSlots[3] = int32_t(experts);
  reversedMap[5] = int32_t(rows);
  DeviceTensor badSlots = activation(reversedSlots, {tokens, picks}, DType::I32),
               badMap = activation(reversedMap, {tokens, picks}, DType::I32);
  rt::Status st = launch(Kernel::ExpertRows, p, {&rRows, &badSlots, &g, &u, &d}, {&rY});
  EXPECT_FALSE(st);
  EXPECT_NE(st.message().find("slot 8 is outside [0, 8)"), std::string::npos) << st.message();
  st = launch(Kernel::Combine, {}, {&rY, &badMap, &w, &ids}, {&parts});
  EXPECT_FALSE(st);
  EXPECT_NE(st.message().find("row 18 is outside [0, 18)"), std::string::npos) << st.message();

  // Rows received from other ranks are packed from the front, a slot of -1
  // ending them: the rows before it get their bits, the rest of the buffer
  // is neither read (a slot out of range after it is no error) nor written.
  const int64_t valid = rows - 5;
  std::vector<int32_t> packedSlots(reversedSlots);
  packedSlots[3] = slots[size_t(rows - 1 - 3)]; // mended: the case above broke it
  packedSlots[size_t(valid)] = -1;
  packedSlots[size_t(valid + 2)] = int32_t(experts); // after the end: not a row
  const std::vector<float> sentinel(ys.size(), 12345.0f);
  DeviceTensor pSlots = activation(packedSlots, {tokens, picks}, DType::I32),
               pY = activation(sentinel, {tokens, picks, hidden});
  ASSERT_TRUE(launch(Kernel::ExpertRows, p, {&rRows, &pSlots, &g, &u, &d}, {&pY}));
  const std::vector<float> pys = download<float>(pY);
  EXPECT_EQ(0, std::memcmp(pys.data(), rys.data(), size_t(valid * hidden) * sizeof(float)));
  EXPECT_TRUE(std::all_of(pys.begin() + valid * hidden, pys.end(),
                          [](float v) { return v == 12345.0f; }));
}

} // namespace
