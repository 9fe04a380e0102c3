//===- LinearAvx512.cpp - linear()'s work items on AVX-512 ----------------===//
//
// A tile register holds elements p .. p + 7 of two rows (the low and high
// halves) and each token's 8 x values are broadcast to both halves, so that
// every lane sees bufferedTileAvx2's multiply-adds in the same order, and
// the lane sums are its laneSums4's: the two builds give the same bits.
//
// - Buffered items convert a chunk of their 8 rows once into pairs of rows
//   interleaved by 8, so that one load fetches a register, and sweep it 6
//   tokens at a time.
// - Direct items read 4 rows in place, a quarter of a matrix apart, and
//   convert (and scale) them in registers, for all their tokens in one pass
//   (up to 12; padded up to the next tile width with copies of the last
//   token, whose results are dropped: a wasted multiply-add costs less than
//   converting the rows again in a second pass).
//
// Every token's sums stay in registers over a chunk: they start from zero
// (first chunk), and after the last chunk their lanes are summed in
// registers and stored with the bias. Only items of several chunks keep
// partial sums in acc between chunks.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/LaneSums.h"
#include "kernels/cpu/LinearDetail.h"

namespace moe::cpu::detail {
namespace {

// Elements [0, len) of rows a and b of type W (before any scale),
// interleaved by 8 into dst; the last group of 8 padded with 0.0.
template <WeightType W>
MOE_TARGET_AVX512 void stagePair(const char *a, const char *b, int64_t len, float *dst) {
  int64_t p = 0;
  for (; p + kLanes <= len; p += kLanes, dst += 2 * kLanes) {
    const size_t at = bytesOf(W, size_t(p));
    _mm512_storeu_ps(dst, load8x2<W>(a + at, b + at));
  }
  if (p < len) {
    const size_t at = bytesOf(W, size_t(p));
    _mm512_storeu_ps(dst, _mm512_insertf32x8(_mm512_castps256_ps512(load8<W>(a + at, len - p)),
                                             load8<W>(b + at, len - p), 1));
  }
}

// Where a tile's P weight registers come from, for elements [p, p + n) (n
// <= 8, the rest 0.0): a chunk staged by stagePair ...
struct StagedPairs {
  const float *const *pair;
  MOE_TARGET_AVX512 __m512 load(int j, int64_t p, int64_t) const {
    return _mm512_loadu_ps(pair[j] + 2 * p); // padded with 0.0 by stagePair
  }
  void prefetch(int64_t) const {}
};

// ... or rows of type W read in place (pair j: rows 2j and 2j + 1), each
// line requested 1 KB ahead (as the AVX2 direct tile's).
template <int P, WeightType W> struct PairsInPlace {
  const char *row[2 * P];
  MOE_TARGET_AVX512 __m512 load(int j, int64_t p, int64_t n) const {
    const size_t at = bytesOf(W, size_t(p));
    if (n == kLanes)
      return load8x2<W>(row[2 * j] + at, row[2 * j + 1] + at);
    return _mm512_insertf32x8(_mm512_castps256_ps512(load8<W>(row[2 * j] + at, n)),
                              load8<W>(row[2 * j + 1] + at, n), 1);
  }
  void prefetch(int64_t p) const {
    const size_t at = bytesOf(W, size_t(p));
    if (at % 64 == 0)
      for (int i = 0; i < 2 * P; ++i)
        _mm_prefetch(row[i] + at + kStreamAhead, _MM_HINT_T0);
  }
};

// Tokens [t, t + count) of the item over elements [k0, k0 + len) of its 2P
// rows, as a tile of T >= count tokens (the missing ones copies of the last,
// never stored). P = 4: the buffered item's rows row[0] .. row[0] + rows -
// 1; P = 2: the direct item's rows row[0 .. rows).
template <int P, int T, class Pairs>
MOE_TARGET_AVX512 void pairTile(const Item &it, const Pairs &w, const float *scale, int64_t t,
                                int64_t count, int64_t k0, int64_t len) {
  static_assert(P == 2 || P == kRows / 2, "a direct (4-row) or buffered (8-row) tile");
  const bool first = k0 == 0, last = k0 + len == it.k;
  const float *x[T];
  for (int u = 0; u < T; ++u)
    x[u] = it.x + (t + std::min<int64_t>(u, count - 1)) * it.k + k0;
  auto slot = [&](int u, int j) { return it.acc + ((t + u) * kRows + 2 * j) * kLanes; };
  __m512 a[T][P];
  for (int u = 0; u < T; ++u)
    for (int j = 0; j < P; ++j)
      a[u][j] = scale || first ? _mm512_setzero_ps() : _mm512_loadu_ps(slot(u, j));
  int64_t p = 0;
  for (; p + kLanes <= len; p += kLanes) {
    w.prefetch(p);
    __m512 r[P];
    for (int j = 0; j < P; ++j)
      r[j] = w.load(j, p, kLanes);
    for (int u = 0; u < T; ++u) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x[u] + p));
      for (int j = 0; j < P; ++j)
        a[u][j] = _mm512_fmadd_ps(xv, r[j], a[u][j]);
    }
  }
  if (p < len) { // missing lanes are 0.0 in both operands, as on AVX2
    __m512 r[P];
    for (int j = 0; j < P; ++j)
      r[j] = w.load(j, p, len - p);
    for (int u = 0; u < T; ++u) {
      const __m512 xv = _mm512_broadcast_f32x8(_mm256_maskload_ps(x[u] + p, tailMask(len - p)));
      for (int j = 0; j < P; ++j)
        a[u][j] = _mm512_fmadd_ps(xv, r[j], a[u][j]);
    }
  }
  const int stored = int(std::min<int64_t>(T, count));
  if (scale) // the chunk's sums times the row's scale, added to the earlier chunks'
    for (int j = 0; j < P; ++j) {
      const __m512 s = _mm512_insertf32x8(_mm512_set1_ps(scale[2 * j]),
                                          _mm256_set1_ps(scale[2 * j + 1]), 1);
      for (int u = 0; u < stored; ++u)
        a[u][j] = _mm512_fmadd_ps(a[u][j], s,
                                  first ? _mm512_setzero_ps() : _mm512_loadu_ps(slot(u, j)));
    }
  if (!last) {
    for (int u = 0; u < stored; ++u)
      for (int j = 0; j < P; ++j)
        _mm512_storeu_ps(slot(u, j), a[u][j]);
    return;
  }
  if constexpr (P == 2) { // four rows anywhere in the output row
    alignas(16) float bias[4], sums[4];
    for (int i = 0; i < 4; ++i)
      bias[i] = it.bias[it.row[i]];
    for (int u = 0; u < stored; ++u) {
      const __m128 sum =
          laneSums4(_mm512_castps512_ps256(a[u][0]), _mm512_extractf32x8_ps(a[u][0], 1),
                    _mm512_castps512_ps256(a[u][1]), _mm512_extractf32x8_ps(a[u][1], 1));
      _mm_store_ps(sums, _mm_add_ps(sum, _mm_load_ps(bias)));
      float *out = it.out + (t + u) * it.n;
      for (int64_t i = 0; i < it.rows; ++i)
        out[it.row[i]] = sums[i];
    }
  } else { // rows row[0] ...: one masked store a token
    const int64_t row0 = it.row[0];
    const __mmask8 rows = __mmask8((1u << it.rows) - 1);
    const __m256 bias = _mm256_maskz_loadu_ps(rows, it.bias + row0);
    for (int u = 0; u < stored; ++u)
      _mm256_mask_storeu_ps(it.out + (t + u) * it.n + row0, rows,
                            _mm256_add_ps(laneSums8(a[u]), bias));
  }
}

// The lines of nextLines of a buffered item's rows, requested into L2 in
// slices spread over the item's tiles: requested at once, they queue for
// the L1's few fill buffers and stall the tile (expert GEMMs of 64 tokens
// over weights from memory: 1.2x as fast spread out, one thread on a Xeon).
class Prefetch {
public:
  void add(const Weight &w, int64_t first, int64_t k, int64_t k0) {
    ranges_[count_] = nextLines(w, first, k, k0);
    lines_ += (ranges_[count_++].bytes + 63) / 64;
  }
  // Requests the lines up to the fraction part / parts of the whole.
  void issue(int64_t part, int64_t parts) {
    for (const int64_t until = lines_ * part / parts; done_ < until; ++done_) {
      while (offset_ >= ranges_[range_].bytes) {
        ++range_;
        offset_ = 0;
      }
      _mm_prefetch(ranges_[range_].p + offset_, _MM_HINT_T1);
      offset_ += 64;
    }
  }

private:
  Lines ranges_[kRows];
  int64_t count_ = 0, lines_ = 0, done_ = 0, range_ = 0, offset_ = 0;
};

// A direct item (rows row[0 .. 4), read in place): its tokens (at most
// kDirectTokens512) in one tile of the next width up from {1, 2, 4, 6, 8,
// 12}, or two of 8.
template <WeightType W> MOE_TARGET_AVX512 void directAvx512Typed(const Item &it) {
  forChunks(it, [&](int64_t k0, int64_t len, const float *scale) MOE_TARGET_AVX512 {
    // Addressed through the weight's run-time type, one row at a time: with
    // W the compiler loaded the four row indices as one vector right after
    // the caller's four stores (a failed store forward), which cost batch-1
    // decodes 3%.
    PairsInPlace<2, W> rows;
    for (int i = 0; i < 4; ++i)
      rows.row[i] = static_cast<const char *>(it.w.data) +
                    bytesOf(it.w.type, size_t(it.row[i] * it.k + k0));
    for (int64_t t = 0; t < it.tokens;) {
      const int64_t count = it.tokens - t > 12 ? 8 : it.tokens - t;
      auto run = [&](auto width) MOE_TARGET_AVX512 {
        pairTile<2, width.value>(it, rows, scale, t, count, k0, len);
      };
      if (count <= 2)
        count == 1 ? run(std::integral_constant<int, 1>()) : run(std::integral_constant<int, 2>());
      else if (count <= 6)
        count <= 4 ? run(std::integral_constant<int, 4>()) : run(std::integral_constant<int, 6>());
      else
        count <= 8 ? run(std::integral_constant<int, 8>()) : run(std::integral_constant<int, 12>());
      t += count;
    }
  });
}

// --- int4 rows read in place ---
//
// The direct item above converts eight elements of two rows at a time from
// one 32-bit word each (load8x2) and leaves its tile at every chunk: with
// int4's chunks of a scale group (128 elements, 16 steps) the per-chunk
// set-up and the conversion kept a batch-1 GEMV at a sixth of the read
// bandwidth on a 2-core Zen 4. This item runs the same operations (each
// chunk's sums from zero, added times the row's scale; the same multiply-adds
// in the same order: the same bits) with every chunk of the rows inside one
// loop, its sums in registers, and converts 64 elements of a pair of rows
// from one register: the rows' 32 bytes side by side, each step's two words
// moved to their lanes (vpermd), each lane's nibble shifted down (vpsrlvd)
// and looked up as a float in a table of the 16 values (vpermps: it reads
// the index's low 4 bits only). Three operations a register against
// load8x2's fifteen.

// The 16 two's complement nibble values as floats, by nibble.
MOE_TARGET_AVX512 inline __m512 nibbleValues() {
  return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
}

// Tokens [t, t + T) of an int4 direct item (rows row[0 .. 4), pairs j: rows
// 2j and 2j + 1): their sums over every chunk, then lane sums and bias.
template <int T> MOE_TARGET_AVX512 void directI4Tokens(const Item &it, int64_t t) {
  const Weight &w = it.w;
  const char *row[4];
  const float *scale[4];
  const int64_t groups = (w.cols + w.group - 1) / w.group; // scales a row (rowGroup 1)
  for (int i = 0; i < 4; ++i) {
    row[i] = static_cast<const char *>(w.data) + bytesOf(WeightType::I4, size_t(it.row[i] * it.k));
    scale[i] = w.scales + w.scaleIndex(it.row[i], 0);
  }
  const float *x[T];
  for (int u = 0; u < T; ++u)
    x[u] = it.x + (t + u) * it.k;
  const __m512i shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  const __m512i firstWords = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512 values = nibbleValues();
  __m512 total[T][2];
  for (int u = 0; u < T; ++u)
    total[u][0] = total[u][1] = _mm512_setzero_ps();
  // forChunks' chunks without divisions (three a chunk had cost this item
  // about 8% over 128-element groups: 7.6 -> 8.2 GB/s, one ab-kernels
  // run): each scale group g in pieces of at most kChunk.
  for (int64_t g = 0, k0 = 0, len; k0 < it.k; k0 += len) {
    const int64_t groupEnd = std::min(it.k, (g + 1) * w.group);
    len = std::min(kChunk, groupEnd - k0);
    for (int i = 0; i < 4; ++i) // the scales of the thread's next items (chunkScales)
      __builtin_prefetch(scale[i] + g + kScaleLookahead * groups);
    __m512 a[T][2];
    for (int u = 0; u < T; ++u)
      a[u][0] = a[u][1] = _mm512_setzero_ps();
    auto fma = [&](int u, const __m512 (&q)[2], __m512 xv) MOE_TARGET_AVX512 {
      a[u][0] = _mm512_fmadd_ps(xv, q[0], a[u][0]);
      a[u][1] = _mm512_fmadd_ps(xv, q[1], a[u][1]);
    };
    int64_t p = 0;
    for (; p + 64 <= len; p += 64) {
      const size_t at = bytesOf(WeightType::I4, size_t(k0 + p));
      if (at % 64 == 0) // a line a row, kStreamAhead ahead
        for (int i = 0; i < 4; ++i)
          _mm_prefetch(row[i] + at + kStreamAhead, _MM_HINT_T0);
      __m512i pair[2];
      for (int j = 0; j < 2; ++j)
        pair[j] = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(row[2 * j] + at))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(row[2 * j + 1] + at)), 1);
      __m512i words = firstWords;
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        __m512 q[2];
        for (int j = 0; j < 2; ++j)
          q[j] = _mm512_permutexvar_ps(
              _mm512_srlv_epi32(_mm512_permutexvar_epi32(words, pair[j]), shifts), values);
        words = _mm512_add_epi32(words, one);
        for (int u = 0; u < T; ++u)
          fma(u, q, _mm512_broadcast_f32x8(_mm256_loadu_ps(x[u] + k0 + p + 8 * s)));
      }
    }
    for (; p < len; p += kLanes) { // steps left, the last maybe partial (0.0 past len)
      const int64_t n = std::min<int64_t>(kLanes, len - p);
      const size_t at = bytesOf(WeightType::I4, size_t(k0 + p));
      if (at % 64 == 0)
        for (int i = 0; i < 4; ++i)
          _mm_prefetch(row[i] + at + kStreamAhead, _MM_HINT_T0);
      __m512 q[2];
      for (int j = 0; j < 2; ++j)
        q[j] = n == kLanes ? load8x2<WeightType::I4>(row[2 * j] + at, row[2 * j + 1] + at)
                           : _mm512_insertf32x8(
                                 _mm512_castps256_ps512(load8<WeightType::I4>(row[2 * j] + at, n)),
                                 load8<WeightType::I4>(row[2 * j + 1] + at, n), 1);
      for (int u = 0; u < T; ++u)
        fma(u, q,
            _mm512_broadcast_f32x8(n == kLanes ? _mm256_loadu_ps(x[u] + k0 + p)
                                               : _mm256_maskload_ps(x[u] + k0 + p, tailMask(n))));
    }
    // The chunk's sums times the rows' scales, added to the earlier chunks'.
    for (int j = 0; j < 2; ++j) {
      const __m512 s = _mm512_insertf32x8(_mm512_set1_ps(scale[2 * j][g]),
                                          _mm256_set1_ps(scale[2 * j + 1][g]), 1);
      for (int u = 0; u < T; ++u)
        total[u][j] = _mm512_fmadd_ps(a[u][j], s, total[u][j]);
    }
    if (k0 + len == groupEnd)
      ++g;
  }
  alignas(16) float bias[4], sums[4];
  for (int i = 0; i < 4; ++i)
    bias[i] = it.bias[it.row[i]];
  for (int u = 0; u < T; ++u) {
    const __m128 sum = laneSums4(_mm512_castps512_ps256(total[u][0]), _mm512_extractf32x8_ps(total[u][0], 1),
                                 _mm512_castps512_ps256(total[u][1]), _mm512_extractf32x8_ps(total[u][1], 1));
    _mm_store_ps(sums, _mm_add_ps(sum, _mm_load_ps(bias)));
    float *out = it.out + (t + u) * it.n;
    for (int64_t i = 0; i < it.rows; ++i)
      out[it.row[i]] = sums[i];
  }
}

// An int4 direct item: its tokens four at a time (each group converts the
// rows again: a quarter of the conversions a token at a time).
MOE_TARGET_AVX512 void directI4Avx512(const Item &it) {
  for (int64_t t = 0; t < it.tokens;) {
    const int64_t count = std::min<int64_t>(4, it.tokens - t);
    switch (count) {
    case 1: directI4Tokens<1>(it, t); break;
    case 2: directI4Tokens<2>(it, t); break;
    case 3: directI4Tokens<3>(it, t); break;
    default: directI4Tokens<4>(it, t); break;
    }
    t += count;
  }
}

} // namespace

// A buffered item (rows row[0] .. row[0] + rows - 1), chunk by chunk: the
// chunk staged as pairs, then the tokens 6 at a time, the rest 4, 2, 1.
MOE_TARGET_AVX512 void bufferedAvx512(const Item &it) {
  const Weight &w = it.w;
  forChunks(it, [&](int64_t k0, int64_t len, const float *scale) MOE_TARGET_AVX512 {
    // Pairs past the last distinct row are never stored: they reuse the
    // last staged pair.
    const float *pair[kRows / 2];
    for (int64_t j = 0; j < kRows / 2; ++j) {
      if (2 * j >= it.rows) {
        pair[j] = pair[j - 1];
        continue;
      }
      float *dst = it.buf + j * kPairStride;
      const int64_t a = it.row[2 * j] * it.k + k0, b = it.row[2 * j + 1] * it.k + k0;
      const char *data = static_cast<const char *>(w.data);
      withType(w.type, [&](auto type) {
        stagePair<type.value>(data + bytesOf(type.value, size_t(a)),
                              data + bytesOf(type.value, size_t(b)), len, dst);
      });
      pair[j] = dst;
    }
    // What the rows read next, a slice before each group of tokens (about
    // as many slices as groups; the last call requests what is left).
    Prefetch next;
    for (int64_t i = 0; i < it.rows; ++i)
      next.add(w, it.row[i] * it.k + k0, it.k, k0);
    const int64_t groups = (it.tokens + 5) / 6 + 1;
    const StagedPairs staged{pair};
    int64_t t = 0, group = 0;
    auto run = [&](auto width) MOE_TARGET_AVX512 {
      next.issue(++group, groups);
      pairTile<kRows / 2, width.value>(it, staged, scale, t, width.value, k0, len);
      t += width.value;
    };
    while (t + 6 <= it.tokens)
      run(std::integral_constant<int, 6>());
    if (it.tokens - t >= 4)
      run(std::integral_constant<int, 4>());
    if (it.tokens - t >= 2)
      run(std::integral_constant<int, 2>());
    if (it.tokens - t >= 1)
      run(std::integral_constant<int, 1>());
    next.issue(groups, groups);
  });
}

MOE_TARGET_AVX512 void directAvx512(const Item &it) {
  if (it.w.type == WeightType::I4 && it.w.rowGroup == 1)
    return directI4Avx512(it);
  withType(it.w.type, [&](auto type) { directAvx512Typed<type.value>(it); });
}

} // namespace moe::cpu::detail
