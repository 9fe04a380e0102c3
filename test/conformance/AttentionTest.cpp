// Attention and MLA over the paged KV cache, through the HAL alone: the
// cache, the block tables and the activations live in device buffers, and
// each call is a KernelCall. Two sequences share every call (continuous
// batching), in calls that prefill, continue a prefill in chunks and decode;
// their blocks of 3 rows are scattered through the pool in another order
// than theirs, so every block edge is crossed. Unwritten cache rows hold NaN
// (or a NaN scale), so reading one shows. The reference keeps every
// sequence's keys and values in double and attends in double; quantized
// caches (BF16, I8, F8E4M3) are allowed the error their element bound
// implies, carried through the softmax (below), not a fixed tolerance.
#include "Tensors.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace moe::conformance;
namespace rt = moe::rt;
using rt::DType;
using rt::Kernel;

constexpr int64_t kBlock = 3, kBlocks = 8, kStride = 4; // 12 positions a sequence
const std::vector<int32_t> kTables[2] = {{5, 1, 6, 3}, {0, 7, 2, 4}};

struct Token {
  int seq;
  int32_t position;
};

std::vector<Token> span(int seq, int32_t first, int32_t last) {
  std::vector<Token> tokens;
  for (int32_t p = first; p <= last; ++p)
    tokens.push_back({seq, p});
  return tokens;
}

std::vector<Token> join(std::vector<Token> a, const std::vector<Token> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Prefill A and the start of B; decode A while B's prefill goes on in a
/// chunk; decode both; B before A with two tokens of B.
const std::vector<std::vector<Token>> kCalls = {
    join(span(0, 0, 4), span(1, 0, 1)), join(span(0, 5, 5), span(1, 2, 7)),
    join(span(0, 6, 6), span(1, 8, 8)), join(span(1, 9, 10), span(0, 7, 7))};

/// The largest error of one cached element relative to the largest
/// magnitude in its head's row: round to nearest in BF16 (8 significant
/// bits) and FP8 E4M3 (4 bits, subnormals far below the row's maximum
/// after scaling it to 448), to an integer step of max/127 in I8.
double elementError(DType kv) {
  switch (kv) {
  case DType::BF16: return std::ldexp(1.0, -8);
  case DType::I8: return 1.0 / 254 * 1.001;
  case DType::F8E4M3: return 1.0 / 16;
  default: return 0;
  }
}

/// One layer of the cache in device memory, every byte 0xFF at first (NaN
/// in F32, BF16 and F8E4M3; -1 with a NaN scale in I8).
struct KvPool {
  std::vector<std::unique_ptr<rt::Buffer>> buffers;
  rt::KvLayerView view;

  KvPool(DType dtype, int64_t kWidth, int64_t vWidth, int64_t heads) {
    view = {nullptr, nullptr, nullptr, nullptr, kWidth, vWidth, heads, kBlock, dtype};
    const size_t rows = size_t(kBlocks * kBlock);
    auto plane = [&](size_t rowBytes) {
      buffers.push_back(toDevice(std::vector<uint8_t>(rows * rowBytes, 0xFF).data(),
                                 rows * rowBytes));
      return buffers.back()->data();
    };
    view.k = plane(size_t(kWidth) * rt::dtypeSize(dtype));
    view.v = plane(size_t(vWidth) * rt::dtypeSize(dtype));
    if (dtype == DType::I8 || dtype == DType::F8E4M3) {
      view.kScales = static_cast<float *>(plane(size_t(heads) * sizeof(float)));
      view.vScales = static_cast<float *>(plane(size_t(heads) * sizeof(float)));
    }
  }
};

/// Every token's row of the block table, as the call reads it.
DeviceTensor blockTables(const std::vector<Token> &tokens) {
  std::vector<int32_t> rows;
  for (const Token &t : tokens)
    rows.insert(rows.end(), kTables[t.seq].begin(), kTables[t.seq].end());
  return activation(rows, {int64_t(tokens.size()), kStride}, DType::I32);
}

std::vector<float> inverseFrequencies(int64_t pairs) {
  std::vector<float> f;
  for (int64_t i = 0; i < pairs; ++i)
    f.push_back(float(std::pow(10000.0, -double(i) / double(pairs))));
  return f;
}

/// Rotates x in place at `position` as rt::Rope says.
void ropeRef(double *x, int32_t position, const rt::Rope &rope) {
  for (int64_t i = 0; i < rope.pairs; ++i) {
    const double angle = position * double(rope.invFreq[i]);
    const double c = std::cos(angle) * rope.attentionFactor,
                 s = std::sin(angle) * rope.attentionFactor;
    double &a = rope.interleaved ? x[2 * i] : x[i];
    double &b = rope.interleaved ? x[2 * i + 1] : x[i + rope.pairs];
    const double x1 = a, x2 = b;
    a = x1 * c - x2 * s;
    b = x2 * c + x1 * s;
  }
}

double maxAbs(const double *x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i)
    m = std::max(m, std::abs(x[i]));
  return m;
}

/// Attention of one query over the keys and values at positions [lo, hi]:
/// out[d] = sum_j p_j v_j[d], p = softmax(scale * score_j), and the bound on
/// each out[d]'s error. score_j's error is at most slack[j] (from the cached
/// keys' rounding), so each p_j is off by a factor within exp(+-2 max
/// slack); each value element is off by at most valueSlack[j].
struct Attended {
  std::vector<double> out, bound;
};
Attended attend(const std::vector<double> &scores, const std::vector<double> &slack,
                const std::vector<const double *> &values,
                const std::vector<double> &valueSlack, int64_t dim) {
  const size_t n = scores.size();
  const double top = *std::max_element(scores.begin(), scores.end());
  std::vector<double> p(n);
  double z = 0, worst = 0, valueWorst = 0;
  for (size_t j = 0; j < n; ++j) {
    z += p[j] = std::exp(scores[j] - top);
    worst = std::max(worst, slack[j]);
    valueWorst = std::max(valueWorst, valueSlack[j]);
  }
  Attended a{std::vector<double>(size_t(dim)), std::vector<double>(size_t(dim))};
  for (int64_t d = 0; d < dim; ++d) {
    double magnitude = 0;
    for (size_t j = 0; j < n; ++j) {
      a.out[size_t(d)] += p[j] / z * values[j][d];
      magnitude += p[j] / z * std::abs(values[j][d]);
    }
    a.bound[size_t(d)] =
        std::expm1(2 * worst) * magnitude + valueWorst + 1e-5 * magnitude + 1e-6;
  }
  return a;
}

void expectWithin(const std::vector<float> &got, const std::vector<double> &want,
                  const std::vector<double> &bound, const std::string &what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), bound[i])
        << what << " element " << i << ": got " << got[i] << ", want " << want[i];
}

/// (KV-cache dtype, dtype of the kernel's weights: q/k norms, kv_b).
using Types = std::tuple<DType, DType>;

class Attention : public testing::TestWithParam<Types> {
protected:
  DType kvType() const { return std::get<0>(GetParam()); }
  DType weightType() const { return std::get<1>(GetParam()); }
  std::mt19937 rng{99};
};

std::string typesName(const testing::TestParamInfo<Types> &info) {
  return std::string("kv") + rt::dtypeName(std::get<0>(info.param)) + "_weights" +
         rt::dtypeName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    KvAndWeights, Attention,
    testing::Combine(testing::Values(DType::F32, DType::BF16, DType::I8, DType::F8E4M3),
                     testing::Values(DType::F32, DType::BF16, DType::F16, DType::I8, DType::I4,
                                     DType::F8E4M3)),
    typesName);

#define SKIP_UNLESS_SUPPORTED(kernel)                                                        \
  if (!device().supportsKvCache(kvType()))                                                  \
    GTEST_SKIP() << device().name() << " keeps no " << rt::dtypeName(kvType()) << " KV cache"; \
  if (!device().supports(kernel, weightType()))                                             \
  GTEST_SKIP() << device().name() << " does not run " << rt::kernelInfo(kernel)->name      \
               << " with " << rt::dtypeName(weightType()) << " weights"

// GQA (4 query heads on 2 KV heads): full half rotation, no norms, no
// window; then a partial interleaved rotation scaled by 1.25, per-head
// q/k RMSNorm (Qwen3) and a window of 4 that slides past block edges.
TEST_P(Attention, GroupedQueryOverPagedCache) {
  SKIP_UNLESS_SUPPORTED(Kernel::Attention);
  const int64_t heads = 4, kvHeads = 2, hd = 8, group = heads / kvHeads;
  for (bool variant : {false, true}) {
    SCOPED_TRACE(variant ? "partial interleaved rope, q/k norm, window 4"
                         : "half rope, no norm, no window");
    const std::vector<float> invFreq = inverseFrequencies(variant ? 3 : hd / 2);
    rt::AttentionParams p;
    p.numHeads = heads;
    p.numKvHeads = kvHeads;
    p.headDim = hd;
    p.scale = float(1 / std::sqrt(double(hd)));
    p.rope = {invFreq.data(), int64_t(invFreq.size()), variant ? 1.25f : 1.0f, variant};
    p.slidingWindow = variant ? 4 : 0;
    p.qkNormEps = 1e-5f;
    const Weight qNorm = randomWeight(weightType(), {hd}, rng),
                 kNorm = randomWeight(weightType(), {hd}, rng);
    const DeviceTensor qn = qNorm.upload(), kn = kNorm.upload();
    KvPool pool(kvType(), kvHeads * hd, kvHeads * hd, kvHeads);
    // Per sequence and position: the cached key (normalised, rotated) and value.
    std::map<int32_t, std::pair<std::vector<double>, std::vector<double>>> cached[2];
    for (size_t c = 0; c < kCalls.size(); ++c) {
      SCOPED_TRACE("call " + std::to_string(c));
      const std::vector<Token> &tokens = kCalls[c];
      const int64_t n = int64_t(tokens.size());
      const std::vector<float> qs = randomFloats(rng, size_t(n * heads * hd)),
                               ks = randomFloats(rng, size_t(n * kvHeads * hd)),
                               vs = randomFloats(rng, size_t(n * kvHeads * hd));
      std::vector<int32_t> positions;
      for (const Token &t : tokens)
        positions.push_back(t.position);
      DeviceTensor q = activation(qs, {n, heads * hd}), k = activation(ks, {n, kvHeads * hd}),
                   v = activation(vs, {n, kvHeads * hd}),
                   pos = activation(positions, {n}, DType::I32), tables = blockTables(tokens),
                   out = output({n, heads * hd});
      rt::KernelCall call;
      call.kernel = Kernel::Attention;
      call.params = p;
      call.inputs = {q.view, k.view, v.view, pos.view};
      if (variant)
        call.inputs.insert(call.inputs.end(), {qn.view, kn.view});
      call.outputs = {out.view};
      call.kv = &pool.view;
      call.blockTables = tables.view;
      ASSERT_TRUE(run(call));

      auto prepare = [&](const float *x, const Weight &norm) { // one head
        std::vector<double> h(x, x + hd);
        if (variant)
          h = rmsNormRef(h, hd, norm.ref, p.qkNormEps);
        return h;
      };
      for (int64_t t = 0; t < n; ++t) {
        std::vector<double> key, value(vs.begin() + t * kvHeads * hd,
                                       vs.begin() + (t + 1) * kvHeads * hd);
        for (int64_t g = 0; g < kvHeads; ++g) {
          std::vector<double> h = prepare(ks.data() + (t * kvHeads + g) * hd, kNorm);
          ropeRef(h.data(), tokens[size_t(t)].position, p.rope);
          key.insert(key.end(), h.begin(), h.end());
        }
        cached[tokens[size_t(t)].seq][tokens[size_t(t)].position] = {key, value};
      }
      std::vector<double> want, bound;
      const double err = elementError(kvType());
      for (int64_t t = 0; t < n; ++t)
        for (int64_t h = 0; h < heads; ++h) {
          std::vector<double> query = prepare(qs.data() + (t * heads + h) * hd, qNorm);
          ropeRef(query.data(), tokens[size_t(t)].position, p.rope);
          const int64_t g = h / group, hi = tokens[size_t(t)].position;
          const int64_t lo = variant ? std::max<int64_t>(0, hi - p.slidingWindow + 1) : 0;
          std::vector<double> scores, slack, valueSlack;
          std::vector<const double *> values;
          for (int64_t j = lo; j <= hi; ++j) {
            const auto &[key, value] = cached[tokens[size_t(t)].seq].at(int32_t(j));
            double s = 0, qMagnitude = 0;
            for (int64_t d = 0; d < hd; ++d) {
              s += query[size_t(d)] * key[size_t(g * hd + d)];
              qMagnitude += std::abs(query[size_t(d)]);
            }
            scores.push_back(s * p.scale);
            slack.push_back(p.scale * qMagnitude * err * maxAbs(&key[size_t(g * hd)], hd));
            values.push_back(&value[size_t(g * hd)]);
            valueSlack.push_back(err * maxAbs(&value[size_t(g * hd)], hd));
          }
          const Attended a = attend(scores, slack, values, valueSlack, hd);
          want.insert(want.end(), a.out.begin(), a.out.end());
          bound.insert(bound.end(), a.bound.begin(), a.bound.end());
        }
      expectWithin(download<float>(out), want, bound, "output");
    }
  }
}

// DeepSeek MLA, 3 heads over a latent of rank 12 (nope 4, rope 4
// interleaved, v 5): the reference runs the naive form (every cached latent
// expanded by kv_b into per-head keys and values), the kernel may absorb
// kv_b into the query and the output.
TEST_P(Attention, LatentOverPagedCache) {
  SKIP_UNLESS_SUPPORTED(Kernel::MlaAttention);
  const int64_t heads = 3, rank = 12, nope = 4, ropeDim = 4, vDim = 5;
  const int64_t qk = nope + ropeDim, headRows = nope + vDim;
  const std::vector<float> invFreq = inverseFrequencies(ropeDim / 2);
  rt::MlaParams p;
  p.numHeads = heads;
  p.kvLoraRank = rank;
  p.nopeDim = nope;
  p.ropeDim = ropeDim;
  p.vDim = vDim;
  p.scale = 0.3f;
  p.rope = {invFreq.data(), ropeDim / 2, 1.0f, true};
  p.normEps = 1e-6f;
  const bool floatWeights = weightType() == DType::F32 || weightType() == DType::BF16 ||
                            weightType() == DType::F16;
  const Weight kvNorm = randomWeight(floatWeights ? weightType() : DType::F32, {rank}, rng),
               kvB = randomWeight(weightType(), {heads * headRows, rank}, rng);
  const DeviceTensor norm = kvNorm.upload(), wkvB = kvB.upload();
  KvPool pool(kvType(), rank, ropeDim, 1);
  // Per sequence and position: the normalised latent and the rotated key.
  std::map<int32_t, std::pair<std::vector<double>, std::vector<double>>> cached[2];
  const double err = elementError(kvType());
  for (size_t c = 0; c < kCalls.size(); ++c) {
    SCOPED_TRACE("call " + std::to_string(c));
    const std::vector<Token> &tokens = kCalls[c];
    const int64_t n = int64_t(tokens.size());
    const std::vector<float> qs = randomFloats(rng, size_t(n * heads * qk)),
                             kvA = randomFloats(rng, size_t(n * (rank + ropeDim)));
    std::vector<int32_t> positions;
    for (const Token &t : tokens)
      positions.push_back(t.position);
    DeviceTensor q = activation(qs, {n, heads * qk}), a = activation(kvA, {n, rank + ropeDim}),
                 pos = activation(positions, {n}, DType::I32), tables = blockTables(tokens),
                 out = output({n, heads * vDim});
    rt::KernelCall call;
    call.kernel = Kernel::MlaAttention;
    call.params = p;
    call.inputs = {q.view, a.view, norm.view, wkvB.view, pos.view};
    call.outputs = {out.view};
    call.kv = &pool.view;
    call.blockTables = tables.view;
    ASSERT_TRUE(run(call));

    for (int64_t t = 0; t < n; ++t) {
      const float *row = kvA.data() + t * (rank + ropeDim);
      std::vector<double> latent = rmsNormRef(std::vector<double>(row, row + rank), rank,
                                              kvNorm.ref, p.normEps),
                          kpe(row + rank, row + rank + ropeDim);
      ropeRef(kpe.data(), tokens[size_t(t)].position, p.rope);
      cached[tokens[size_t(t)].seq][tokens[size_t(t)].position] = {latent, kpe};
    }
    auto w = [&](int64_t h, int64_t r, int64_t col) { // kv_b row r of head h
      return kvB.ref[size_t((h * headRows + r) * rank + col)];
    };
    std::vector<double> want, bound;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        const float *qh = qs.data() + (t * heads + h) * qk;
        std::vector<double> qPe(qh + nope, qh + qk);
        ropeRef(qPe.data(), tokens[size_t(t)].position, p.rope);
        // The query's weight on each latent element: how far a latent's
        // rounding moves the score.
        std::vector<double> qLatent(static_cast<size_t>(rank));
        for (int64_t r = 0; r < rank; ++r)
          for (int64_t i = 0; i < nope; ++i)
            qLatent[size_t(r)] += qh[i] * w(h, i, r);
        std::vector<double> scores, slack, valueSlack, expanded;
        expanded.reserve(size_t((tokens[size_t(t)].position + 1) * vDim));
        std::vector<const double *> values;
        for (int32_t j = 0; j <= tokens[size_t(t)].position; ++j) {
          const auto &[latent, kpe] = cached[tokens[size_t(t)].seq].at(j);
          double s = 0, latentMagnitude = 0, peMagnitude = 0;
          for (int64_t i = 0; i < nope; ++i) { // q_nope . (W_uk latent)
            double key = 0;
            for (int64_t r = 0; r < rank; ++r)
              key += w(h, i, r) * latent[size_t(r)];
            s += qh[i] * key;
          }
          for (int64_t i = 0; i < ropeDim; ++i) {
            s += qPe[size_t(i)] * kpe[size_t(i)];
            peMagnitude += std::abs(qPe[size_t(i)]);
          }
          for (double x : qLatent)
            latentMagnitude += std::abs(x);
          scores.push_back(s * p.scale);
          slack.push_back(p.scale * err *
                          (latentMagnitude * maxAbs(latent.data(), rank) +
                           peMagnitude * maxAbs(kpe.data(), ropeDim)));
          for (int64_t d = 0; d < vDim; ++d) { // W_uv latent
            double value = 0;
            for (int64_t r = 0; r < rank; ++r)
              value += w(h, nope + d, r) * latent[size_t(r)];
            expanded.push_back(value);
          }
          values.push_back(&expanded[size_t(j) * size_t(vDim)]);
          double rowMagnitude = 0; // |W_uv| times the latent's rounding
          for (int64_t d = 0; d < vDim; ++d) {
            double m = 0;
            for (int64_t r = 0; r < rank; ++r)
              m += std::abs(w(h, nope + d, r));
            rowMagnitude = std::max(rowMagnitude, m);
          }
          valueSlack.push_back(err * maxAbs(latent.data(), rank) * rowMagnitude);
        }
        const Attended at = attend(scores, slack, values, valueSlack, vDim);
        want.insert(want.end(), at.out.begin(), at.out.end());
        bound.insert(bound.end(), at.bound.begin(), at.bound.end());
      }
    expectWithin(download<float>(out), want, bound, "output");
  }
}

} // namespace
