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

/// Whether token t + 1 sees the rows token t sees, in the same cache rows,
/// and one more (its own): the next position of the same sequence.
bool continuesRows(const KvCache &cache, const int32_t *positions, int64_t window, int64_t t) {
  const int64_t lo = firstVisible(positions[t], window);
  if (positions[t + 1] != positions[t] + 1 || firstVisible(positions[t + 1], window) != lo)
    return false;
  const int32_t *a = cache.tables + t * cache.tableStride, *b = a + cache.tableStride;
  return std::equal(a + lo / cache.blockSize, a + positions[t] / cache.blockSize + 1,
                    b + lo / cache.blockSize);
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
  auto continues = [&](int64_t t) {
    return continuesRows(cache, positions, p.slidingWindow, t);
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

namespace {

// Tokens times heads whose absorbed queries and attended latents one pass
// of mlaAttention holds (a prefill goes in passes): 4,096 pairs are 9 MB of
// queries and 8 MB of latents at DeepSeek's rank 512, 256 tokens of
// V2-Lite's 16 heads, 32 of V3's 128.
constexpr int64_t kMlaPairsPerPass = 4096;
// Tokens whose queries one unit absorbs together: each converted kv_b row
// serves all of them (their sums, 8 x rank floats, stay in L1 and L2).
constexpr int64_t kAbsorbTokens = 8;

/// The MLA step of one pass, tokens [t0, t0 + count) of a call; buffers are
/// head-major: row (h * count + i) is token t0 + i's head h.
struct MlaPass {
  const MlaParams &p;
  const float *q;
  Weight kvB;
  const int32_t *positions;
  const float *cs; ///< ropeTable of the call
  KvCache &cache;
  int64_t t0, count;
  float *absorbed; ///< [heads * count][rank + rope]: W_uk^T q_nope, then rotated q_pe
  float *context;  ///< [heads * count][rank]: the attended latent
  float *values;   ///< [heads * count][vDim]: W_uv context

  int64_t rank() const { return p.kvLoraRank; }
  int64_t width() const { return p.kvLoraRank + p.ropeDim; }
  int64_t headRows() const { return p.nopeDim + p.vDim; }

  /// absorbed = [W_uk[h]^T q_nope, rope(q_pe)] for every (token, head): a
  /// unit is one head's W_uk rows added into up to kAbsorbTokens tokens'
  /// sums (detail::mulAddRows: the same sum per token, in the same order,
  /// whatever the batch: i = 0, 1, ... nope - 1, unfused).
  void absorbQueries() const {
    const int64_t heads = p.numHeads, qkDim = p.nopeDim + p.ropeDim;
    const int64_t tiles = (count + kAbsorbTokens - 1) / kAbsorbTokens, units = heads * tiles;
    parallelChunks(units, [&](Chunks &chunks) {
      forClaimed(chunks, units, 1, [&](int64_t unit) {
        const int64_t h = unit / tiles, i0 = unit % tiles * kAbsorbTokens,
                      i1 = std::min(count, i0 + kAbsorbTokens);
        const float *queries[kAbsorbTokens];
        float *sums[kAbsorbTokens];
        for (int64_t i = i0; i < i1; ++i) {
          const float *query = q + (t0 + i) * heads * qkDim + h * qkDim;
          float *to = absorbed + (h * count + i) * width();
          std::fill(to, to + rank(), 0.0f);
          std::copy(query + p.nopeDim, query + qkDim, to + rank());
          applyRope(to + rank(), cs + (t0 + i) * p.rope.pairs * 2, p.rope);
          queries[i - i0] = query;
          sums[i - i0] = to;
        }
        detail::mulAddRows(kvB, rank(), h * headRows(), p.nopeDim, rank(), queries, i1 - i0,
                           sums);
      });
    });
  }

  /// context = softmax(scale * (q_latent . latents + q_pe . rope keys))
  /// weighing the latents, for every (token, head): a unit is a token and
  /// up to kMaxUnitHeads of its heads, which read each cached row once.
  void attend() const {
    const int64_t heads = p.numHeads;
    // All heads a unit, but split when there are too few tokens for every
    // thread (a decode step of one sequence).
    const int64_t perToken = (kernelThreads() + count - 1) / count;
    const int64_t span = std::clamp<int64_t>((heads + perToken - 1) / perToken, 1, kMaxUnitHeads);
    const int64_t groups = (heads + span - 1) / span, units = count * groups;
    const int64_t grain = grainOf(units);
    parallelChunks(chunksOf(units, grain), [&](Chunks &chunks) {
      std::vector<float> scores, ropeScores;
      // One buffer for the latent and the RoPE key rows: each call below
      // is done with it before the next.
      float *const scratch = widenedRows(cache, std::max(rank(), p.ropeDim));
      forClaimed(chunks, units, grain, [&](int64_t unit) {
        const int64_t i = unit / groups, h0 = unit % groups * span;
        const int64_t hs = std::min(span, heads - h0), t = t0 + i, n = positions[t] + 1;
        // A decode batch's next sequence reads its own rows from memory:
        // requested while this one is attended.
        if (unit % groups == groups - 1 && i + 1 < count && !continuesRows(cache, positions, 0, t)) {
          cache.prefetch(cache.k, t + 1, 0, positions[t + 1] + 1, 0);
          cache.prefetch(cache.v, t + 1, 0, positions[t + 1] + 1, 0);
        }
        scores.resize(size_t(hs * n));
        ropeScores.resize(size_t(hs * n));
        const float *latentQuery[kMaxUnitHeads], *ropeQuery[kMaxUnitHeads];
        float *s[kMaxUnitHeads], *sr[kMaxUnitHeads], *ctx[kMaxUnitHeads];
        for (int64_t h = 0; h < hs; ++h) {
          const int64_t row = (h0 + h) * count + i;
          latentQuery[h] = absorbed + row * width();
          ropeQuery[h] = latentQuery[h] + rank();
          s[h] = scores.data() + h * n;
          sr[h] = ropeScores.data() + h * n;
          ctx[h] = context + row * rank();
          std::fill(ctx[h], ctx[h] + rank(), 0.0f);
        }
        keyScores(cache, cache.k, t, 0, n, 0, latentQuery, hs, rank(), scratch, s);
        keyScores(cache, cache.v, t, 0, n, 0, ropeQuery, hs, p.ropeDim, scratch, sr);
        for (int64_t h = 0; h < hs; ++h)
          for (int64_t j = 0; j < n; ++j)
            s[h][j] += sr[h][j];
        scaledSoftmaxRows(s, hs, n, p.scale);
        weightedValues(cache, cache.k, t, 0, n, 0, s, hs, rank(), scratch, ctx);
      });
    });
  }

  /// values = W_uv[h] context for every (token, head): one linear() per
  /// head, all in one linearGroup (each token's sums in linear()'s fixed
  /// order, whatever the batch).
  void projectValues() const {
    const int64_t heads = p.numHeads;
    Weight w = kvB;
    w.int8Activations = false; // the attended latent stays f32 (AssignPrecision never sets it)
    std::vector<LinearProblem> problems;
    for (int64_t h = 0; h < heads; ++h)
      problems.push_back({context + h * count * rank(), count, rank(),
                          w.offset(size_t((h * headRows() + p.nopeDim) * rank())), p.vDim,
                          nullptr, values + h * count * p.vDim});
    linearGroup(problems.data(), problems.size());
  }
};

} // namespace

void mlaAttention(const float *q, const float *kvA, Weight kvNorm, Weight kvB,
                  const int32_t *positions, int64_t tokens, const MlaParams &p,
                  KvCache &cache, float *out) {
  const int64_t rank = p.kvLoraRank, rope = p.ropeDim, heads = p.numHeads, vDim = p.vDim;
  // Every token's normalised latent and rotated shared RoPE key into the
  // cache first: a prefill's later tokens attend to its earlier ones.
  const std::vector<float> cs = ropeTable(positions, tokens, p.rope);
  const std::vector<float> normScale = headNormScale(&kvNorm, rank);
  forRows(tokens, rank + rope, [&](int64_t t) {
    thread_local std::vector<float> row;
    row.resize(size_t(rank + rope));
    const float *a = kvA + t * (rank + rope);
    rmsNormRow(a, rank, normScale.data(), p.normEps, row.data());
    std::copy(a + rank, a + rank + rope, row.data() + rank);
    applyRope(row.data() + rank, cs.data() + t * p.rope.pairs * 2, p.rope);
    cache.store(cache.k, t, positions[t], row.data());
    cache.store(cache.v, t, positions[t], row.data() + rank);
  });
  const int64_t perPass = std::clamp<int64_t>(kMlaPairsPerPass / heads, 1, tokens);
  std::vector<float> absorbed(size_t(perPass * heads * (rank + rope))),
      context(size_t(perPass * heads * rank)), values(size_t(perPass * heads * vDim));
  for (int64_t t0 = 0; t0 < tokens; t0 += perPass) {
    const int64_t count = std::min(perPass, tokens - t0);
    const MlaPass pass{p,      q,  kvB,   positions,       cs.data(),     cache,
                       t0,     count, absorbed.data(), context.data(), values.data()};
    pass.absorbQueries();
    pass.attend();
    pass.projectValues();
    forRows(count, heads * vDim, [&](int64_t i) {
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(values.data() + (h * count + i) * vDim, vDim,
                    out + (t0 + i) * heads * vDim + h * vDim);
    });
  }
}

} // namespace moe::cpu
