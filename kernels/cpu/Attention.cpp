//===- Attention.cpp - CPU attention kernels over a KV cache -------------===//
#include "kernels/cpu/Attention.h"
#include "kernels/cpu/PrefetchLines.h"
#include "kernels/cpu/Scratch.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/Vector.h"
#include "kernels/cpu/WeightDetail.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace moe::cpu {

namespace {

// (token, head) pairs, or GQA units (below), a thread claims at a time: up
// to 4, fewer when there are too few for every thread to get some (a
// decode step's 4 KV heads were one chunk, which the caller ran alone).
constexpr int64_t kPairsPerChunk = 4;
int64_t grainOf(int64_t units) {
  return std::clamp<int64_t>(units / kernelThreads(), 1, kPairsPerChunk);
}
// Query heads of a GQA group attended together (a larger group in turns).
constexpr int64_t kMaxGroup = 8;
// Query heads a unit scores and weighs at once: the heads of consecutive
// tokens of a sequence (their shared key and value rows read once).
constexpr int64_t kMaxUnitHeads = 16, kMaxSlot = 4;

/// cos and sin (times attentionFactor) of every rotary pair at each token's
/// position, [tokens][pairs][2]: computed once for all the heads.
std::vector<float> ropeTable(const int32_t *positions, int64_t tokens, const Rope &rope) {
  std::vector<float> cs(size_t(tokens * rope.pairs * 2));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < rope.pairs; ++i) {
      // float math, as transformers computes cos/sin in fp32.
      const float angle = static_cast<float>(positions[t]) * rope.invFreq[i];
      cs[size_t((t * rope.pairs + i) * 2)] = std::cos(angle) * rope.attentionFactor;
      cs[size_t((t * rope.pairs + i) * 2 + 1)] = std::sin(angle) * rope.attentionFactor;
    }
  return cs;
}

/// Rotates the first 2 * rope.pairs elements of x in place by one token's
/// row of a ropeTable.
void applyRope(float *x, const float *cs, const Rope &rope) {
  const int64_t half = rope.pairs;
  for (int64_t i = 0; i < half; ++i) {
    const float c = cs[2 * i], s = cs[2 * i + 1];
    float &a = rope.interleaved ? x[2 * i] : x[i];
    float &b = rope.interleaved ? x[2 * i + 1] : x[i + half];
    const float x1 = a, x2 = b;
    a = x1 * c - x2 * s;
    b = x2 * c + x1 * s;
  }
}

/// A per-head RMSNorm's weight in f32 (dim floats), or none.
std::vector<float> headNormScale(const Weight *w, int64_t dim) {
  std::vector<float> scale(w ? size_t(dim) : 0);
  if (w)
    detail::toF32(*w, 0, size_t(dim), scale.data());
  return scale;
}

/// One head's dim elements from src into dst, RMS-normalised by `scale`
/// when there is one (else copied).
void headRow(const float *src, int64_t dim, const std::vector<float> &scale, float eps,
             float *dst) {
  if (scale.empty())
    std::copy(src, src + dim, dst);
  else
    rmsNormRow(src, dim, scale.data(), eps, dst);
}

/// This thread's buffer for one head of a block's rows widened from a
/// bf16, int8 or fp8 cache (KvCache::rows): kept between calls, unused
/// (never grown) for an f32 cache.
float *widenedRows(const KvCache &cache, int64_t dim) {
  thread_local std::vector<float> rows;
  return detail::scratch(rows, cache.type == KvType::F32 ? 0 : cache.blockSize * dim);
}

/// First cache row a query at `position` may see.
int64_t firstVisible(int32_t position, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
}

/// scores[h][j] = dot(q[h], key at position lo + j) for j < n, h < heads
/// (query heads that share the key head), block by block. `scratch` holds
/// a block's rows of one head (KvCache::rows).
void keyScores(const KvCache &c, const KvPlane &plane, int64_t token, int64_t lo, int64_t n,
               int64_t head, const float *const *q, int64_t heads, int64_t dim, float *scratch,
               float *const *scores) {
  float *to[kMaxUnitHeads];
  for (int64_t j = 0; j < n;) {
    int64_t run = std::min(n - j, c.runLength(lo + j));
    for (int64_t h = 0; h < heads; ++h)
      to[h] = scores[h] + j;
    const KvCache::Rows rows = c.rows(plane, token, lo + j, head, run, scratch);
    dotRowsHeads(q, rows.data, rows.stride, run, dim, to, heads);
    j += run;
  }
}

/// out[h] += sum_j weights[h][j] * (value at position lo + j), j = 0, 1, ...
/// n - 1, for h < heads (query heads that share the value head).
void weightedValues(const KvCache &c, const KvPlane &plane, int64_t token, int64_t lo,
                    int64_t n, int64_t head, const float *const *weights, int64_t heads,
                    int64_t dim, float *scratch, float *const *out) {
  const float *from[kMaxUnitHeads];
  for (int64_t j = 0; j < n;) {
    int64_t run = std::min(n - j, c.runLength(lo + j));
    for (int64_t h = 0; h < heads; ++h)
      from[h] = weights[h] + j;
    const KvCache::Rows rows = c.rows(plane, token, lo + j, head, run, scratch);
    axpyRowsHeads(from, rows.data, rows.stride, run, dim, out, heads);
    j += run;
  }
}

} // namespace

void gqaAttention(const float *q, const float *k, const float *v,
                  const int32_t *positions, int64_t tokens, const Weight *qNorm,
                  const Weight *kNorm, const GqaParams &p, KvCache &cache,
                  float *out) {
  const int64_t hd = p.headDim, qWidth = p.numHeads * hd,
                kvWidth = p.numKvHeads * hd, group = p.numHeads / p.numKvHeads;
  // Keys and values of this batch into the cache (k normalised and
  // rotated); tokens write their own rows, so a prefill's share the threads.
  const std::vector<float> cs = ropeTable(positions, tokens, p.rope);
  const std::vector<float> qScale = headNormScale(qNorm, hd), kScale = headNormScale(kNorm, hd);
  forRows(tokens, kvWidth, [&](int64_t t) {
    thread_local std::vector<float> kRow;
    kRow.resize(size_t(kvWidth));
    for (int64_t h = 0; h < p.numKvHeads; ++h) {
      headRow(k + t * kvWidth + h * hd, hd, kScale, p.qkNormEps, kRow.data() + h * hd);
      applyRope(kRow.data() + h * hd, cs.data() + t * p.rope.pairs * 2, p.rope);
    }
    cache.store(cache.k, t, positions[t], kRow.data());
    cache.store(cache.v, t, positions[t], v + t * kvWidth);
  });
  // Whether token t + 1 sees the rows token t sees, in the same cache rows,
  // and one more (its own): the next position of the same sequence.
  auto continues = [&](int64_t t) {
    const int64_t lo = firstVisible(positions[t], p.slidingWindow);
    if (positions[t + 1] != positions[t] + 1 ||
        firstVisible(positions[t + 1], p.slidingWindow) != lo)
      return false;
    const int32_t *a = cache.tables + t * cache.tableStride, *b = a + cache.tableStride;
    return std::equal(a + lo / cache.blockSize, a + positions[t] / cache.blockSize + 1,
                      b + lo / cache.blockSize);
  };
  bool shares = false;
  for (int64_t t = 0; t + 1 < tokens && !shares; ++t)
    shares = continues(t);
  // A unit is a slot of tokens and up to kMaxGroup query heads of one KV
  // head: the heads read each key and value row once (each head's result is
  // what it alone would give). A slot is as many consecutive tokens (up to
  // kMaxSlot) as have their heads fit a call: the tokens of a prefill then
  // read the rows they share once. Units go KV head by KV head, so that a
  // thread's next slot reads the rows of the same head again (from L2: a
  // long prompt's rows of every head do not fit). When no token shares
  // another's rows (a decode step of distinct sequences), a slot is one
  // token and units go token by token: a thread reads each token's rows for
  // one head after another, lines side by side in each row, rather than
  // every sequence's rows once per head (with cheaper prefetch requests:
  // a 32-sequence decode batch's attention 1.04-1.17x as fast, its cache
  // from memory or not, 16 to 80 positions). Work per unit grows with the
  // position: threads claim a few at a time, which balances a prefill's
  // threads.
  const int64_t span = std::min(group, kMaxGroup), perKv = (group + span - 1) / span;
  const int64_t perSlot = shares ? std::clamp<int64_t>(kMaxUnitHeads / span, 1, kMaxSlot) : 1;
  const int64_t slots = (tokens + perSlot - 1) / perSlot;
  const int64_t units = slots * p.numKvHeads * perKv;
  const int64_t grain = grainOf(units);
  parallelChunks(chunksOf(units, grain), [&](Chunks &chunks) {
    std::vector<float> queries(size_t(perSlot * span * hd)), scores;
    float *const scratch = widenedRows(cache, hd);
    // Tokens t .. t + count - 1 (each continuing the one before), query
    // heads h0 .. h0 + heads - 1 of KV head g: the rows token t sees scored
    // and weighed for every token's heads at once, then each later token's
    // rows after those (token t + j sees j more).
    auto attend = [&](int64_t t, int64_t count, int64_t g, int64_t h0, int64_t heads) {
      const int64_t lo = firstVisible(positions[t], p.slidingWindow);
      const int64_t n = positions[t] - lo + 1, all = count * heads;
      scores.resize(size_t(heads * count * (n + count)));
      const float *query[kMaxUnitHeads];
      float *s[kMaxUnitHeads], *o[kMaxUnitHeads], *later[kMaxUnitHeads];
      for (int64_t i = 0; i < all; ++i) {
        const int64_t tc = t + i / heads, h = h0 + i % heads;
        float *qi = queries.data() + i * hd;
        headRow(q + tc * qWidth + h * hd, hd, qScale, p.qkNormEps, qi);
        applyRope(qi, cs.data() + tc * p.rope.pairs * 2, p.rope);
        query[i] = qi;
        s[i] = scores.data() + i * (n + count);
        later[i] = s[i] + n;
        o[i] = out + tc * qWidth + h * hd;
        std::fill(o[i], o[i] + hd, 0.0f);
      }
      keyScores(cache, cache.k, t, lo, n, g, query, all, hd, scratch, s);
      for (int64_t j = 1; j < count; ++j)
        keyScores(cache, cache.k, t + j, lo + n, j, g, query + j * heads, heads, hd, scratch,
                  later + j * heads);
      for (int64_t j = 0; j < count; ++j)
        scaledSoftmaxRows(s + j * heads, heads, n + j, p.scale);
      weightedValues(cache, cache.v, t, lo, n, g, s, all, hd, scratch, o);
      for (int64_t j = 1; j < count; ++j)
        weightedValues(cache, cache.v, t + j, lo + n, j, g, later + j * heads, heads, hd,
                       scratch, o + j * heads);
    };
    forClaimed(chunks, units, grain, [&](int64_t unit) {
      const int64_t g = shares ? unit / (slots * perKv) : unit / perKv % p.numKvHeads;
      const int64_t slot = shares ? unit / perKv % slots : unit / (perKv * p.numKvHeads);
      const int64_t h0 = g * group + unit % perKv * span;
      const int64_t heads = std::min(span, (g + 1) * group - h0);
      const int64_t t0 = slot * perSlot, t1 = std::min(tokens, t0 + perSlot);
      // The next unit's queries (most often the next slot's) are not in
      // cache: a prefill's q is megabytes, read a row every few microseconds.
      for (int64_t t = t1; t < std::min(tokens, t1 + perSlot); ++t)
        prefetchLines(q + t * qWidth + h0 * hd, heads * hd * int64_t(sizeof(float)));
      // Runs of tokens that continue each other, attended together. While
      // one run is attended, the next token's rows are requested: a decode
      // batch's sequences each read their own rows from memory, once.
      for (int64_t t = t0; t < t1;) {
        int64_t count = 1;
        while (t + count < t1 && continues(t + count - 1))
          ++count;
        if (const int64_t next = t + count; next < tokens && !continues(next - 1)) {
          const int64_t lo = firstVisible(positions[next], p.slidingWindow);
          cache.prefetch(cache.k, next, lo, positions[next] + 1, g);
          cache.prefetch(cache.v, next, lo, positions[next] + 1, g);
        }
        attend(t, count, g, h0, heads);
        t += count;
      }
    });
  });
}

void mlaAttention(const float *q, const float *kvA, Weight kvNorm, Weight kvB,
                  const int32_t *positions, int64_t tokens, const MlaParams &p,
                  KvCache &cache, float *out) {
  const int64_t rank = p.kvLoraRank, nope = p.nopeDim, rope = p.ropeDim,
                vDim = p.vDim, qkDim = nope + rope, headRows = nope + vDim;
  // Cache the normalised latent and the rotated shared RoPE key.
  const std::vector<float> cs = ropeTable(positions, tokens, p.rope);
  std::vector<float> latent(static_cast<size_t>(rank)), kpe(static_cast<size_t>(rope));
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = kvA + t * (rank + rope);
    rmsNorm(row, 1, rank, kvNorm, p.normEps, latent.data());
    std::copy(row + rank, row + rank + rope, kpe.begin());
    applyRope(kpe.data(), cs.data() + t * p.rope.pairs * 2, p.rope);
    cache.store(cache.k, t, positions[t], latent.data());
    cache.store(cache.v, t, positions[t], kpe.data());
  }
  const int64_t pairs = tokens * p.numHeads;
  const int64_t grain = grainOf(pairs);
  parallelChunks(chunksOf(pairs, grain), [&](Chunks &chunks) {
    std::vector<float> qLatent(rank), qPe(rope), context(rank), scores, peScores;
    // One buffer for the latent and the RoPE key rows: each call below is
    // done with it before the next.
    float *const scratch = widenedRows(cache, std::max(rank, rope));
    forClaimed(chunks, pairs, grain, [&](int64_t pair) {
      const int64_t t = pair / p.numHeads, h = pair % p.numHeads;
      const float *qh = q + t * p.numHeads * qkDim + h * qkDim;
      // Absorb W_uk into the query: qLatent = W_uk[h]^T q_nope.
      std::fill(qLatent.begin(), qLatent.end(), 0.0f);
      Weight wUk = kvB.offset(h * headRows * rank);
      for (int64_t i = 0; i < nope; ++i)
        for (int64_t r = 0; r < rank; ++r)
          qLatent[r] += qh[i] * wUk.at(i * rank + r);
      std::copy(qh + nope, qh + qkDim, qPe.begin());
      applyRope(qPe.data(), cs.data() + t * p.rope.pairs * 2, p.rope);
      int64_t n = positions[t] + 1;
      scores.resize(n);
      peScores.resize(n);
      const float *ql = qLatent.data(), *qp = qPe.data();
      float *sl = scores.data(), *sp = peScores.data();
      keyScores(cache, cache.k, t, 0, n, 0, &ql, 1, rank, scratch, &sl);
      keyScores(cache, cache.v, t, 0, n, 0, &qp, 1, rope, scratch, &sp);
      for (int64_t j = 0; j < n; ++j)
        scores[j] = (scores[j] + peScores[j]) * p.scale;
      softmax(scores.data(), n);
      std::fill(context.begin(), context.end(), 0.0f);
      float *ctx = context.data();
      weightedValues(cache, cache.k, t, 0, n, 0, &sl, 1, rank, scratch, &ctx);
      // out = W_uv[h] context.
      Weight wUv = kvB.offset((h * headRows + nope) * rank);
      float *o = out + t * p.numHeads * vDim + h * vDim;
      for (int64_t d = 0; d < vDim; ++d) {
        float acc = 0;
        for (int64_t r = 0; r < rank; ++r)
          acc += wUv.at(d * rank + r) * context[r];
        o[d] = acc;
      }
    });
  });
}

} // namespace moe::cpu
