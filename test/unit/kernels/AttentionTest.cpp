//===- AttentionTest.cpp - softmax, GQA and MLA attention against double references ===//
//
// The references are written from the semantics in Attention.h and
// Vector.h and compute in double.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Attention.h"
#include "moe/abi/Numeric.h"
#include "kernels/cpu/Vector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

using namespace moe::cpu;

namespace {

std::vector<float> uniform(std::mt19937 &rng, size_t count, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float &f : v)
    f = dist(rng);
  return v;
}

// The AVX-512 dotRows and axpyRows give the AVX2 builds' bits (what
// dot() and axpy() row by row compute), for lengths around their steps.
TEST(VectorRows, SameBitsOnAvx2AndAvx512) {
  if (cpuIsa() < Isa::Avx512)
    GTEST_SKIP() << "this CPU has no AVX-512: its builds were compiled, not run";
  std::mt19937 rng(5);
  const Isa saved = isa();
  for (int64_t n : {1, 7, 8, 15, 16, 24, 64, 100, 128, 129, 200})
    for (int64_t count : {1, 3, 4, 9}) {
      SCOPED_TRACE(testing::Message() << "n " << n << ", count " << count);
      const int64_t stride = n + 3;
      const std::vector<float> rows = uniform(rng, size_t(count * stride), -1, 1);
      const std::vector<float> q = uniform(rng, size_t(n), -1, 1);
      const std::vector<float> s = uniform(rng, size_t(count), -1, 1);
      const std::vector<float> y0 = uniform(rng, size_t(n), -1, 1);
      std::vector<float> dots[2], ys[2];
      for (int i = 0; i < 2; ++i) {
        setIsa(i ? Isa::Avx512 : Isa::Avx2);
        dots[i].resize(size_t(count));
        dotRows(q.data(), rows.data(), stride, count, n, dots[i].data());
        ys[i] = y0;
        axpyRows(s.data(), rows.data(), stride, count, n, ys[i].data());
      }
      EXPECT_EQ(0, std::memcmp(dots[0].data(), dots[1].data(), dots[0].size() * 4));
      EXPECT_EQ(0, std::memcmp(ys[0].data(), ys[1].data(), ys[0].size() * 4));
    }
  setIsa(saved);
}

// dotRows and axpyRows give what dot() and axpy() row by row compute, bit
// for bit (four rows' lanes are summed together when n is a multiple of 8),
// and dotRowsHeads and axpyRowsHeads what dotRows and axpyRows give each
// head.
TEST(VectorRows, SameBitsAsRowByRow) {
  std::mt19937 rng(6);
  for (int64_t n : {1, 7, 8, 15, 16, 24, 40, 64, 100, 128, 129, 200})
    for (int64_t count : {1, 3, 4, 9}) {
      SCOPED_TRACE(testing::Message() << "n " << n << ", count " << count);
      const int64_t stride = n + 5;
      const std::vector<float> rows = uniform(rng, size_t(count * stride), -1, 1);
      const std::vector<float> q = uniform(rng, size_t(n), -1, 1);
      const std::vector<float> s = uniform(rng, size_t(count), -1, 1);
      std::vector<float> dots(static_cast<size_t>(count)), alone(dots.size());
      dotRows(q.data(), rows.data(), stride, count, n, dots.data());
      std::vector<float> y = uniform(rng, size_t(n), -1, 1), yAlone = y;
      axpyRows(s.data(), rows.data(), stride, count, n, y.data());
      for (int64_t r = 0; r < count; ++r) {
        alone[size_t(r)] = dot(q.data(), rows.data() + r * stride, n);
        axpy(s[size_t(r)], rows.data() + r * stride, yAlone.data(), n);
      }
      EXPECT_EQ(0, std::memcmp(dots.data(), alone.data(), dots.size() * 4));
      EXPECT_EQ(0, std::memcmp(y.data(), yAlone.data(), y.size() * 4));
      // Heads over the same rows: two, three, and five (a group of four and
      // one more).
      for (int64_t heads : {2, 3, 5}) {
        std::vector<std::vector<float>> queries, scores, scoresAlone, weights, ys, ysAlone;
        std::vector<const float *> qh, w;
        std::vector<float *> sh, yh;
        for (int64_t h = 0; h < heads; ++h) {
          queries.push_back(uniform(rng, size_t(n), -1, 1));
          scores.emplace_back(size_t(count));
          scoresAlone.emplace_back(size_t(count));
          weights.push_back(uniform(rng, size_t(count), -1, 1));
          ys.push_back(uniform(rng, size_t(n), -1, 1));
          ysAlone.push_back(ys.back());
        }
        for (int64_t h = 0; h < heads; ++h) {
          const size_t i = size_t(h);
          qh.push_back(queries[i].data());
          sh.push_back(scores[i].data());
          w.push_back(weights[i].data());
          yh.push_back(ys[i].data());
          dotRows(qh[i], rows.data(), stride, count, n, scoresAlone[i].data());
          axpyRows(w[i], rows.data(), stride, count, n, ysAlone[i].data());
        }
        dotRowsHeads(qh.data(), rows.data(), stride, count, n, sh.data(), heads);
        axpyRowsHeads(w.data(), rows.data(), stride, count, n, yh.data(), heads);
        for (int64_t h = 0; h < heads; ++h) {
          const size_t i = size_t(h);
          EXPECT_EQ(0, std::memcmp(scores[i].data(), scoresAlone[i].data(), size_t(count) * 4))
              << "head " << h << " of " << heads;
          EXPECT_EQ(0, std::memcmp(ys[i].data(), ysAlone[i].data(), size_t(n) * 4))
              << "head " << h << " of " << heads;
        }
      }
    }
}

// mulAddRow rounds the product before the sum on every ISA (combine's bits
// were those of a plain loop built without FMA): against that loop, for
// lengths around its steps of 16 and 8, with products whose fused
// multiply-add would round differently.
TEST(VectorRows, MulAddRowIsTheUnfusedLoop) {
  std::mt19937 rng(14);
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 100, 1024, 1031}) {
    SCOPED_TRACE(n);
    const std::vector<float> x = uniform(rng, size_t(n), -3, 3);
    std::vector<float> y = uniform(rng, size_t(n), -3, 3), want = y;
    const float s = 0.3f;
    for (int64_t i = 0; i < n; ++i) {
      volatile float product = s * x[size_t(i)]; // rounded, whatever the compiler may fuse
      want[size_t(i)] += product;
    }
    mulAddRow(s, x.data(), y.data(), n);
    EXPECT_EQ(0, std::memcmp(y.data(), want.data(), size_t(n) * 4));
  }
}

TEST(Softmax, MatchesDoubleReference) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 7, 8, 9, 100, 513}) {
    SCOPED_TRACE(n);
    std::vector<float> x = uniform(rng, size_t(n), -100.0f, 10.0f);
    const float m = *std::max_element(x.begin(), x.end());
    std::vector<double> want(static_cast<size_t>(n));
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) // the same float difference as the kernel
      sum += want[size_t(j)] = std::exp(double(x[size_t(j)] - m));
    softmax(x.data(), n);
    for (int64_t j = 0; j < n; ++j) {
      const double w = want[size_t(j)] / sum;
      EXPECT_NEAR(x[size_t(j)], w, 5e-7 * w + 2e-38) << "element " << j;
    }
  }
}

// The largest score may sit anywhere (the vector max's lanes, its tail); a
// NaN score makes every weight NaN, never a silent number.
TEST(Softmax, MaxAnywhereAndNaN) {
  std::mt19937 rng(9);
  for (int64_t n : {16, 17, 40, 100}) {
    for (int64_t at : {int64_t(0), int64_t(7), int64_t(8), n / 2, n - 1}) {
      SCOPED_TRACE(testing::Message() << "n " << n << ", max at " << at);
      std::vector<float> x = uniform(rng, size_t(n), -50.0f, 0.0f);
      x[size_t(at)] = 20.0f; // the largest, by far: its weight is 1 to 1e-30
      softmax(x.data(), n);
      EXPECT_NEAR(x[size_t(at)], 1.0f, 1e-6f);
      std::vector<float> y = uniform(rng, size_t(n), -5.0f, 5.0f);
      y[size_t(at)] = std::nanf("");
      softmax(y.data(), n);
      for (float v : y)
        EXPECT_TRUE(std::isnan(v));
    }
  }
}

// scaledSoftmaxRows gives, row by row, the bits of multiplying by the scale
// and softmax() (on an AVX-512 CPU: its 16-lane build against the AVX2
// one), for lengths around its steps of 16 and 8, 1 to 5 rows, rows whose
// maximum sits anywhere, and a NaN in one row (that row all NaN, the
// others untouched).
TEST(Softmax, ScaledRowsAsScaleThenSoftmax) {
  std::mt19937 rng(12);
  const float scale = 0.125f;
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 100, 513})
    for (int64_t rows : {1, 3, 4, 5}) {
      SCOPED_TRACE(testing::Message() << "n " << n << ", rows " << rows);
      std::vector<std::vector<float>> x, want;
      std::vector<float *> at;
      for (int64_t r = 0; r < rows; ++r) {
        x.push_back(uniform(rng, size_t(n), -300.0f, 80.0f));
        x.back()[size_t(rng() % uint32_t(n))] = 120.0f;
        if (r == 2)
          x.back()[size_t(n / 2)] = std::nanf("");
        want.push_back(x.back());
        for (float &v : want.back())
          v *= scale;
        softmax(want.back().data(), n);
      }
      for (auto &row : x)
        at.push_back(row.data());
      scaledSoftmaxRows(at.data(), rows, n, scale);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(0, std::memcmp(x[size_t(r)].data(), want[size_t(r)].data(), size_t(n) * 4))
            << "row " << r;
        EXPECT_EQ(r == 2, std::isnan(x[size_t(r)][0])) << "row " << r;
      }
    }
}

// Rotates pairs (i, i + pairs) of x by position * invFreq[i], in double.
void rope(std::vector<double> &x, size_t at, int32_t position, const std::vector<float> &invFreq) {
  const size_t pairs = invFreq.size();
  for (size_t i = 0; i < pairs; ++i) {
    const double angle = double(position) * invFreq[i], c = std::cos(angle), s = std::sin(angle);
    const double a = x[at + i], b = x[at + i + pairs];
    x[at + i] = a * c - b * s;
    x[at + i + pairs] = b * c + a * s;
  }
}

// A GQA layer over one sequence in a paged f32 cache whose blocks are not in
// order: 4 query heads sharing 2 KV heads, head dim 72 (one 64-column
// register block and a tail of 8); 240 tokens, enough that a prefill's
// threads share its key and value stores.
struct Layer {
  static constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 72, kBlock = 16, kTokens = 240,
                           kBlocks = 16;
  std::vector<float> invFreq, q, k, v;
  std::vector<int32_t> table; // block i of the sequence: cache block (5i + 2) mod 16
  std::vector<float> kData, vData;
  GqaParams params;

  explicit Layer(int64_t window) {
    for (int32_t i = 0; i * kBlock < kTokens; ++i)
      table.push_back((5 * i + 2) % int32_t(kBlocks));
    std::mt19937 rng(11);
    for (int64_t i = 0; i < kDim / 2; ++i)
      invFreq.push_back(float(std::pow(10000.0, -2.0 * double(i) / double(kDim))));
    q = uniform(rng, size_t(kTokens * kHeads * kDim), -1.0f, 1.0f);
    k = uniform(rng, size_t(kTokens * kKvHeads * kDim), -1.0f, 1.0f);
    v = uniform(rng, size_t(kTokens * kKvHeads * kDim), -1.0f, 1.0f);
    params.numHeads = kHeads;
    params.numKvHeads = kKvHeads;
    params.headDim = kDim;
    params.scale = float(1.0 / std::sqrt(double(kDim)));
    params.rope = {invFreq.data(), kDim / 2, 1.0f, false};
    params.slidingWindow = window;
  }

  // Runs tokens [first, first + count) in one call on the layer's cache.
  void run(int64_t first, int64_t count, float *out) {
    const size_t rows = size_t(kBlocks * kBlock * kKvHeads * kDim);
    if (first == 0) {
      kData.assign(rows, NAN);
      vData.assign(rows, NAN);
    }
    std::vector<int32_t> positions(static_cast<size_t>(count));
    std::iota(positions.begin(), positions.end(), int32_t(first));
    std::vector<int32_t> tables;
    for (int64_t t = 0; t < count; ++t)
      tables.insert(tables.end(), table.begin(), table.end());
    KvCache cache;
    cache.k = {kData.data(), nullptr, kKvHeads * kDim, kKvHeads};
    cache.v = {vData.data(), nullptr, kKvHeads * kDim, kKvHeads};
    cache.blockSize = kBlock;
    cache.tables = tables.data();
    cache.tableStride = int64_t(table.size());
    gqaAttention(q.data() + first * kHeads * kDim, k.data() + first * kKvHeads * kDim,
                 v.data() + first * kKvHeads * kDim, positions.data(), count, nullptr, nullptr,
                 params, cache, out);
  }

  // out[t, h, :] and the sum of the magnitudes of its terms, in double.
  void reference(std::vector<double> &out, std::vector<double> &magnitude) const {
    std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end());
    for (int64_t t = 0; t < kTokens; ++t) {
      for (int64_t h = 0; h < kHeads; ++h)
        rope(qd, size_t((t * kHeads + h) * kDim), int32_t(t), invFreq);
      for (int64_t h = 0; h < kKvHeads; ++h)
        rope(kd, size_t((t * kKvHeads + h) * kDim), int32_t(t), invFreq);
    }
    out.assign(q.size(), 0.0);
    magnitude.assign(q.size(), 0.0);
    const int64_t window = params.slidingWindow;
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t h = 0; h < kHeads; ++h) {
        const int64_t g = h / (kHeads / kKvHeads);
        const int64_t lo = window ? std::max<int64_t>(0, t - window + 1) : 0;
        std::vector<double> p;
        for (int64_t j = lo; j <= t; ++j) {
          double s = 0.0;
          for (int64_t d = 0; d < kDim; ++d)
            s += qd[size_t((t * kHeads + h) * kDim + d)] *
                 kd[size_t((j * kKvHeads + g) * kDim + d)];
          p.push_back(s * params.scale);
        }
        const double m = *std::max_element(p.begin(), p.end());
        double sum = 0.0;
        for (double &e : p)
          sum += e = std::exp(e - m);
        for (int64_t j = lo; j <= t; ++j)
          for (int64_t d = 0; d < kDim; ++d) {
            const double term = p[size_t(j - lo)] / sum * v[size_t((j * kKvHeads + g) * kDim + d)];
            out[size_t((t * kHeads + h) * kDim + d)] += term;
            magnitude[size_t((t * kHeads + h) * kDim + d)] += std::abs(term);
          }
      }
  }
};

TEST(GqaAttention, PrefillMatchesReference) {
  for (int64_t window : {0, 5}) {
    SCOPED_TRACE(window);
    Layer layer(window);
    std::vector<float> out(layer.q.size());
    layer.run(0, Layer::kTokens, out.data());
    std::vector<double> want, magnitude;
    layer.reference(want, magnitude);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], want[i], 2e-5 * magnitude[i] + 1e-6) << "element " << i;
  }
}

// Decode (one token per call) gives the bits of the prefill: a token's
// output does not depend on the tokens it was batched with.
TEST(GqaAttention, TokenByTokenEqualsPrefill) {
  Layer layer(0);
  const int64_t width = Layer::kHeads * Layer::kDim;
  std::vector<float> prefill(layer.q.size()), decode(layer.q.size());
  layer.run(0, Layer::kTokens, prefill.data());
  for (int64_t t = 0; t < Layer::kTokens; ++t)
    layer.run(t, 1, decode.data() + t * width);
  EXPECT_EQ(0, std::memcmp(prefill.data(), decode.data(), prefill.size() * sizeof(float)));
}

// Tokens of two sequences in one call, the second's positions continuing
// the first's (5 then 6) but in other cache blocks: each token gets the
// bits it gets alone. Consecutive tokens attend together only when they
// are the same sequence's; had sequence B's first token been taken as the
// continuation of A's last, it would have read A's rows.
TEST(GqaAttention, TokensOfTwoSequencesInOneCall) {
  constexpr int64_t kHeads = 4, kKvHeads = 1, kDim = 64, kBlock = 4, kRows = 8 * kBlock;
  const int64_t width = kHeads * kDim, kvWidth = kKvHeads * kDim;
  std::mt19937 rng(13);
  std::vector<float> invFreq;
  for (int64_t i = 0; i < kDim / 2; ++i)
    invFreq.push_back(float(std::pow(10000.0, -2.0 * double(i) / double(kDim))));
  GqaParams params;
  params.numHeads = kHeads;
  params.numKvHeads = kKvHeads;
  params.headDim = kDim;
  params.scale = 0.125f;
  params.rope = {invFreq.data(), kDim / 2, 1.0f, false};
  const std::vector<int32_t> tableA = {0, 1, 7}, tableB = {2, 3, 4};
  // Sequence A: positions 0-5; B: 0-5 (a first call), then 6-9.
  const std::vector<float> q = uniform(rng, size_t(16 * width), -1, 1),
                           k = uniform(rng, size_t(16 * kvWidth), -1, 1),
                           v = uniform(rng, size_t(16 * kvWidth), -1, 1);
  struct Token {
    int64_t row; // of q, k and v
    int32_t position;
    const std::vector<int32_t> *table;
  };
  std::vector<Token> prefixB, mixed;
  for (int32_t i = 0; i < 6; ++i)
    prefixB.push_back({6 + i, i, &tableB});
  for (int32_t i = 0; i < 6; ++i)
    mixed.push_back({i, i, &tableA});
  for (int32_t i = 6; i < 10; ++i)
    mixed.push_back({6 + i, i, &tableB});
  std::vector<float> kData(size_t(kRows * kvWidth), NAN), vData(kData);
  auto run = [&](const std::vector<Token> &tokens, std::vector<float> &out) {
    std::vector<float> tq, tk, tv;
    std::vector<int32_t> positions, tables;
    for (const Token &t : tokens) {
      tq.insert(tq.end(), q.begin() + t.row * width, q.begin() + (t.row + 1) * width);
      tk.insert(tk.end(), k.begin() + t.row * kvWidth, k.begin() + (t.row + 1) * kvWidth);
      tv.insert(tv.end(), v.begin() + t.row * kvWidth, v.begin() + (t.row + 1) * kvWidth);
      positions.push_back(t.position);
      tables.insert(tables.end(), t.table->begin(), t.table->end());
    }
    KvCache cache;
    cache.k = {kData.data(), nullptr, kvWidth, kKvHeads};
    cache.v = {vData.data(), nullptr, kvWidth, kKvHeads};
    cache.blockSize = kBlock;
    cache.tables = tables.data();
    cache.tableStride = 3;
    out.assign(tokens.size() * size_t(width), 0.0f);
    gqaAttention(tq.data(), tk.data(), tv.data(), positions.data(), int64_t(tokens.size()),
                 nullptr, nullptr, params, cache, out.data());
  };
  std::vector<float> out, together, alone;
  run(prefixB, out);
  run(mixed, together);
  for (const Token &t : mixed) { // again one at a time (the rows are rewritten the same)
    run({t}, out);
    alone.insert(alone.end(), out.begin(), out.end());
  }
  EXPECT_EQ(0, std::memcmp(together.data(), alone.data(), alone.size() * sizeof(float)));
}

// DeepSeek MLA over one sequence in a paged f32 cache whose blocks are not
// in order: 20 heads (more than one unit takes: a unit's heads are split),
// latent rank 64, nope 16, interleaved rope 8, v 24; kv_b in bf16 or in
// int4 with two scale groups a row. 100 tokens: a prefill goes through
// several absorb tiles and threads.
struct MlaLayer {
  static constexpr int64_t kHeads = 20, kRank = 64, kNope = 16, kRope = 8, kV = 24,
                           kBlock = 16, kTokens = 100, kBlocks = 8;
  static constexpr int64_t kQk = kNope + kRope, kHeadRows = kNope + kV;
  std::vector<float> invFreq, q, kvA, norm, scales;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> int4;
  std::vector<int32_t> table; // block i of the sequence: cache block (3i + 5) mod 8
  std::vector<float> latents, ropeKeys;
  MlaParams params;
  Weight kvB, kvNorm;

  explicit MlaLayer(WeightType type) {
    for (int32_t i = 0; i * kBlock < kTokens; ++i)
      table.push_back((3 * i + 5) % int32_t(kBlocks));
    std::mt19937 rng(17);
    for (int64_t i = 0; i < kRope / 2; ++i)
      invFreq.push_back(float(std::pow(10000.0, -2.0 * double(i) / double(kRope))));
    q = uniform(rng, size_t(kTokens * kHeads * kQk), -1.0f, 1.0f);
    kvA = uniform(rng, size_t(kTokens * (kRank + kRope)), -1.0f, 1.0f);
    norm = uniform(rng, size_t(kRank), 0.5f, 1.5f);
    const size_t elements = size_t(kHeads * kHeadRows * kRank);
    if (type == WeightType::BF16) {
      for (float f : uniform(rng, elements, -0.3f, 0.3f))
        bf16.push_back(f32ToBf16(f));
      kvB = {bf16.data(), WeightType::BF16};
    } else {
      std::uniform_int_distribution<int> nibble(0, 15);
      for (size_t i = 0; i < elements / 2; ++i)
        int4.push_back(uint8_t(nibble(rng) | nibble(rng) << 4));
      scales = uniform(rng, elements / 32, 0.01f, 0.05f);
      kvB = {int4.data(), WeightType::I4, scales.data(), kRank, 32};
    }
    kvNorm = {norm.data(), WeightType::F32};
    params.numHeads = kHeads;
    params.kvLoraRank = kRank;
    params.nopeDim = kNope;
    params.ropeDim = kRope;
    params.vDim = kV;
    params.scale = 0.2f;
    params.rope = {invFreq.data(), kRope / 2, 1.0f, true};
    params.normEps = 1e-6f;
  }

  // Runs tokens [first, first + count) in one call on the layer's cache.
  void run(int64_t first, int64_t count, float *out) {
    if (first == 0) {
      latents.assign(size_t(kBlocks * kBlock * kRank), NAN);
      ropeKeys.assign(size_t(kBlocks * kBlock * kRope), NAN);
    }
    std::vector<int32_t> positions(static_cast<size_t>(count));
    std::iota(positions.begin(), positions.end(), int32_t(first));
    std::vector<int32_t> tables;
    for (int64_t t = 0; t < count; ++t)
      tables.insert(tables.end(), table.begin(), table.end());
    KvCache cache;
    cache.k = {latents.data(), nullptr, kRank, 1};
    cache.v = {ropeKeys.data(), nullptr, kRope, 1};
    cache.blockSize = kBlock;
    cache.tables = tables.data();
    cache.tableStride = int64_t(table.size());
    mlaAttention(q.data() + first * kHeads * kQk, kvA.data() + first * (kRank + kRope), kvNorm,
                 kvB, positions.data(), count, params, cache, out);
  }

  // The naive form in double: every latent expanded by kv_b (read through
  // Weight::at, the kernels' definition of an element) into per-head keys
  // and values. out[t, h, :] and the sum of the magnitudes of its terms.
  void reference(std::vector<double> &out, std::vector<double> &magnitude) const {
    auto w = [&](int64_t h, int64_t r, int64_t c) {
      return double(kvB.at(size_t((h * kHeadRows + r) * kRank + c)));
    };
    auto rotate = [&](std::vector<double> &x, int32_t position) { // interleaved pairs
      for (size_t i = 0; i < invFreq.size(); ++i) {
        const double angle = double(position) * invFreq[i], c = std::cos(angle),
                     s = std::sin(angle), a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * c - b * s;
        x[2 * i + 1] = b * c + a * s;
      }
    };
    std::vector<std::vector<double>> keys, values, ropeKey; // [t][h * dim + d]
    for (int64_t t = 0; t < kTokens; ++t) {
      const float *a = kvA.data() + t * (kRank + kRope);
      double ms = 0;
      for (int64_t r = 0; r < kRank; ++r)
        ms += double(a[r]) * a[r];
      const double inv = 1.0 / std::sqrt(ms / kRank + params.normEps);
      std::vector<double> latent(kRank), key(size_t(kHeads * kNope)), value(size_t(kHeads * kV));
      for (int64_t r = 0; r < kRank; ++r)
        latent[size_t(r)] = a[r] * inv * norm[size_t(r)];
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t r = 0; r < kHeadRows; ++r) {
          double sum = 0;
          for (int64_t c = 0; c < kRank; ++c)
            sum += w(h, r, c) * latent[size_t(c)];
          (r < kNope ? key[size_t(h * kNope + r)] : value[size_t(h * kV + r - kNope)]) = sum;
        }
      keys.push_back(key);
      values.push_back(value);
      ropeKey.emplace_back(a + kRank, a + kRank + kRope);
      rotate(ropeKey.back(), int32_t(t));
    }
    out.assign(size_t(kTokens * kHeads * kV), 0.0);
    magnitude.assign(out.size(), 0.0);
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t h = 0; h < kHeads; ++h) {
        const float *qh = q.data() + (t * kHeads + h) * kQk;
        std::vector<double> qRope(qh + kNope, qh + kQk), p;
        rotate(qRope, int32_t(t));
        for (int64_t j = 0; j <= t; ++j) {
          double s = 0;
          for (int64_t d = 0; d < kNope; ++d)
            s += qh[d] * keys[size_t(j)][size_t(h * kNope + d)];
          for (int64_t d = 0; d < kRope; ++d)
            s += qRope[size_t(d)] * ropeKey[size_t(j)][size_t(d)];
          p.push_back(s * params.scale);
        }
        const double m = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (double &e : p)
          sum += e = std::exp(e - m);
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t d = 0; d < kV; ++d) {
            const double term = p[size_t(j)] / sum * values[size_t(j)][size_t(h * kV + d)];
            out[size_t((t * kHeads + h) * kV + d)] += term;
            magnitude[size_t((t * kHeads + h) * kV + d)] += std::abs(term);
          }
      }
  }
};

TEST(MlaAttention, PrefillMatchesReference) {
  for (WeightType type : {WeightType::BF16, WeightType::I4}) {
    SCOPED_TRACE(int(type));
    MlaLayer layer(type);
    std::vector<float> out(size_t(MlaLayer::kTokens * MlaLayer::kHeads * MlaLayer::kV));
    layer.run(0, MlaLayer::kTokens, out.data());
    std::vector<double> want, magnitude;
    layer.reference(want, magnitude);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], want[i], 1e-4 * magnitude[i] + 1e-6) << "element " << i;
  }
}

// Decode gives the bits of the prefill (a token's output does not depend on
// its batch), though a decode step splits a token's heads between units and
// a prefill does not.
TEST(MlaAttention, TokenByTokenEqualsPrefill) {
  for (WeightType type : {WeightType::BF16, WeightType::I4}) {
    SCOPED_TRACE(int(type));
    MlaLayer layer(type);
    const int64_t width = MlaLayer::kHeads * MlaLayer::kV;
    std::vector<float> prefill(size_t(MlaLayer::kTokens * width)), decode(prefill.size());
    layer.run(0, MlaLayer::kTokens, prefill.data());
    for (int64_t t = 0; t < MlaLayer::kTokens; ++t)
      layer.run(t, 1, decode.data() + t * width);
    EXPECT_EQ(0, std::memcmp(prefill.data(), decode.data(), prefill.size() * sizeof(float)));
  }
}

} // namespace
