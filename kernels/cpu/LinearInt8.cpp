//===- LinearInt8.cpp - W8A8 matrix products -------------------------------===//
//
// Activations quantized per row to int8, multiplied by int8 weights with
// integer dot products: AMX (tdpbssd, 8 rows x 16 tokens x 64 per
// instruction, for blocks of 8 consecutive rows and more tokens than a
// decode batch), AVX-512 VNNI (vpdpbusd, 64 multiply-adds per instruction),
// AVX2 (vpmaddubsw + vpmaddwd) or portable C++. For AVX2 the
// unsigned operand is |w| and the signed one x with w's sign (|w| <= 128,
// |x| <= 127: vpmaddubsw's pair sums stay below 32767, where x + 128 would
// saturate), so -128 weights are exact too.
// Built with -ffp-contract=off: the f32 epilogue float(sum) * s_x * s_w + b
// is two multiplies and an add everywhere, as the tests compute it.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/LinearInt8.h"
#include "kernels/cpu/Isa.h"
#include "kernels/cpu/LinearDetail.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <type_traits>

namespace moe::cpu::detail {
namespace {

constexpr int64_t kAlign = 64; // a quantized row's stride, one AVX-512 vector
// AMX tiles: B holds 16 tokens x 64 columns; an item's weight block (A)
// and the sums (C) 8 rows. More tokens than this go to AMX.
constexpr int64_t kAmxTokens = 16, kAmxK = 64, kAmxRows = 8, kAmxMinTokens = 9;

// dots[t * ld + i] = sum_c x_t[c] * w_i[c] over c < k for T tokens (rows of
// x, `stride` apart and zero past k up to the stride, their sums xSums[t])
// and R weight rows.
using TileFn = void (*)(const int8_t *x, int64_t stride, const int32_t *xSums,
                        const int8_t *const *w, int64_t k, int32_t *dots, int64_t ld);

template <int R, int T>
void tilePortable(const int8_t *x, int64_t stride, const int32_t *, const int8_t *const *w,
                  int64_t k, int32_t *dots, int64_t ld) {
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < R; ++i) {
      int32_t sum = 0;
      for (int64_t c = 0; c < k; ++c)
        sum += int32_t(x[t * stride + c]) * int32_t(w[i][c]);
      dots[t * ld + i] = sum;
    }
}

__attribute__((target("avx2"))) int32_t sum8(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i s2 = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 0xb1)));
}

// One 32-byte column step of tileAvx2: acc[t][i] += the pair sums of x_t
// and w_i widened to 32 bits. `load(i)` gives the step's 32 bytes of row i.
template <int R, int T, class Load>
__attribute__((target("avx2"), always_inline)) inline void stepAvx2(__m256i (&acc)[T][R],
                                                                    const int8_t *x,
                                                                    int64_t stride,
                                                                    Load &&load) {
  const __m256i ones = _mm256_set1_epi16(1);
  auto madd = [&](__m256i &a, __m256i xv, __m256i wv, __m256i aw)
                  __attribute__((target("avx2"), always_inline)) {
    const __m256i pairs = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv, wv));
    a = _mm256_add_epi32(a, _mm256_madd_epi16(pairs, ones));
  };
  if constexpr (T == 1) { // a row at a time: fewer registers, no sum spilled
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x));
    for (int i = 0; i < R; ++i) {
      const __m256i wv = load(i);
      madd(acc[0][i], xv, wv, _mm256_abs_epi8(wv));
    }
    return;
  }
  __m256i wv[R], aw[R];
  for (int i = 0; i < R; ++i) {
    wv[i] = load(i);
    aw[i] = _mm256_abs_epi8(wv[i]);
  }
  for (int t = 0; t < T; ++t) {
    const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + t * stride));
    for (int i = 0; i < R; ++i)
      madd(acc[t][i], xv, wv[i], aw[i]);
  }
}

// A line (two whole 32-byte steps) at a time after that line's prefetches,
// then the last, partial line, then the tail (zero past k: rows are not
// padded). With the tail's copy and a prefetch test in every step, GCC kept
// the sums on the stack, a store and a reload each a step: the one-token
// tile ran at 13-17 GMAC/s with its rows in L2 on a Zen 3 core, about the
// speed of the f32 path that converts every weight. Now the one-token
// tile's sums stay in registers (wider tiles spill a few once a line; they
// are bound by the two multiply ports).
template <int R, int T>
__attribute__((target("avx2"))) void tileAvx2(const int8_t *x, int64_t stride, const int32_t *,
                                              const int8_t *const *w, int64_t k, int32_t *dots,
                                              int64_t ld) {
  __m256i acc[T][R];
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < R; ++i)
      acc[t][i] = _mm256_setzero_si256();
  auto at = [&](int64_t c) __attribute__((target("avx2"), always_inline)) {
    return [w, c](int i) __attribute__((target("avx2"), always_inline)) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(w[i] + c));
    };
  };
  constexpr int64_t kLine = 64, kStep = 32;
  int64_t c = 0;
  for (; c + kLine <= k; c += kLine) {
    for (int i = 0; i < R; ++i)
      _mm_prefetch(reinterpret_cast<const char *>(w[i]) + c + kStreamAhead, _MM_HINT_T0);
    stepAvx2<R, T>(acc, x + c, stride, at(c));
    stepAvx2<R, T>(acc, x + c + kStep, stride, at(c + kStep));
  }
  if (c < k) { // the last, partial line: a whole step, then the tail
    for (int i = 0; i < R; ++i)
      _mm_prefetch(reinterpret_cast<const char *>(w[i]) + c + kStreamAhead, _MM_HINT_T0);
    if (c + kStep <= k) {
      stepAvx2<R, T>(acc, x + c, stride, at(c));
      c += kStep;
    }
  }
  if (c < k) {
    alignas(32) int8_t tail[R][kStep] = {};
    for (int i = 0; i < R; ++i)
      std::memcpy(tail[i], w[i] + c, size_t(k - c));
    stepAvx2<R, T>(acc, x + c, stride, [&](int i) __attribute__((target("avx2"))) {
      return _mm256_load_si256(reinterpret_cast<const __m256i *>(tail[i]));
    });
  }
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < R; ++i)
      dots[t * ld + i] = sum8(acc[t][i]);
}

#define MOE_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

// vpdpbusd multiplies unsigned by signed bytes: w + 128 (its sign bit
// flipped, once a row and step for all the tile's tokens) times x, less 128
// times x's sum (Int8Rows::sums, once a token). Until 2026-12-05 x was the
// unsigned operand, which took a vpdpbusd a row and step more for the
// rows' sums, recomputed for every 4 tokens (a fifth of the products).
// Every loop unrolled: with the last one rolled, GCC 12 kept the sums in
// memory and copied each through another register and to the stack at
// every step (objdump of tileVnni<4, 4>: 95 copies around 16 products).
template <int R, int T>
MOE_VNNI void tileVnni(const int8_t *x, int64_t stride, const int32_t *xSums,
                       const int8_t *const *w, int64_t k, int32_t *dots, int64_t ld) {
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  __m512i acc[T][R];
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
    #pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
      acc[t][i] = _mm512_setzero_si512();
  for (int64_t c = 0; c < k; c += 64) {
    // Past k the weights read as 0 + 128 and x is zero: nothing added.
    const __mmask64 live = k - c >= 64 ? ~__mmask64(0) : (__mmask64(1) << (k - c)) - 1;
    __m512i wu[R];
    #pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      _mm_prefetch(reinterpret_cast<const char *>(w[i]) + c + kStreamAhead, _MM_HINT_T0);
      wu[i] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(live, w[i] + c), flip);
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m512i xv = _mm512_loadu_si512(x + t * stride + c);
      #pragma GCC unroll 4
      for (int i = 0; i < R; ++i)
        acc[t][i] = _mm512_dpbusd_epi32(acc[t][i], wu[i], xv);
    }
  }
  #pragma GCC unroll 4
  for (int t = 0; t < T; ++t)
    #pragma GCC unroll 4
    for (int i = 0; i < R; ++i)
      dots[t * ld + i] = _mm512_reduce_add_epi32(acc[t][i]) - 128 * xSums[t];
}

// The tile of R rows x T tokens of one build, for R, T in {4, 2, 1}.
template <int R, int T> struct PortableTile {
  static constexpr TileFn fn = tilePortable<R, T>;
};
template <int R, int T> struct Avx2Tile {
  static constexpr TileFn fn = tileAvx2<R, T>;
};
template <int R, int T> struct VnniTile {
  static constexpr TileFn fn = tileVnni<R, T>;
};

// The widest tile of a build, R x T, and its narrower ones for the rest. A
// single token (decode) takes up to kRowsAlone rows at a time, the tile
// table's widest, on every build.
struct Build {
  int64_t rows, tokens;
  TileFn tile[3][3]; // [log2 rows][log2 tokens]
};
constexpr int64_t kRowsAlone = 4;

template <template <int, int> class Tile> constexpr Build buildOf(int64_t rows, int64_t tokens) {
  return {rows,
          tokens,
          {{Tile<1, 1>::fn, Tile<1, 2>::fn, Tile<1, 4>::fn},
           {Tile<2, 1>::fn, Tile<2, 2>::fn, Tile<2, 4>::fn},
           {Tile<4, 1>::fn, Tile<4, 2>::fn, Tile<4, 4>::fn}}};
}

const Build &buildFor(Isa level) {
  // AVX2: 2 rows x 4 tokens (8 accumulators and 4 weight vectors of 16
  // registers), and 4 rows of one token (kRowsAlone): a decode item's 4
  // rows (a quarter of the matrix apart) read as 4 streams together rather
  // than 2 and 2. VNNI: 4 x 4 of 32.
  static const Build portable = buildOf<PortableTile>(4, 4), avx2 = buildOf<Avx2Tile>(2, 4),
                     vnni = buildOf<VnniTile>(4, 4);
  static const bool hasVnni = __builtin_cpu_supports("avx512vnni");
  if (level >= Isa::Avx512 && hasVnni)
    return vnni;
  return level >= Isa::Avx2 ? avx2 : portable;
}

// The largest power of two <= min(n, limit) (limit a power of two <= 4).
int64_t step(int64_t n, int64_t limit) {
  int64_t s = limit;
  while (s > n)
    s /= 2;
  return s;
}
int log2of(int64_t s) { return s == 4 ? 2 : s == 2 ? 1 : 0; }

// Rows of x: amax, then q = rint(x * (127 / amax)) (AVX2 rounds to nearest
// even as rint does in the default mode; |x * inv| <= 127 up to rounding).
void quantizeRowPortable(const float *x, int64_t k, int8_t *q, float &scale) {
  float amax = 0.0f;
  for (int64_t c = 0; c < k; ++c)
    amax = std::max(amax, std::fabs(x[c]));
  scale = amax / 127.0f;
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int64_t c = 0; c < k; ++c)
    q[c] = int8_t(std::clamp(std::rint(x[c] * inv), -127.0f, 127.0f));
}

__attribute__((target("avx2"))) void quantizeRowAvx2(const float *x, int64_t k, int8_t *q,
                                                    float &scale) {
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= k; c += 8)
    m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + c), absMask));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float amax = *std::max_element(lanes, lanes + 8);
  for (int64_t i = c; i < k; ++i)
    amax = std::max(amax, std::fabs(x[i]));
  scale = amax / 127.0f;
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  for (c = 0; c + 32 <= k; c += 32) {
    __m256i v[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + c + 8 * j), vinv);
      v[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(y, lo), hi));
    }
    // packs interleave the 128-bit lanes; the permute puts them back in order
    const __m256i w16 = _mm256_packs_epi32(v[0], v[1]), x16 = _mm256_packs_epi32(v[2], v[3]);
    const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16, x16),
                                                  _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(q + c), b);
  }
  for (; c < k; ++c)
    q[c] = int8_t(std::clamp(std::rint(x[c] * inv), -127.0f, 127.0f));
}

// x's rows as AMX B tiles (Int8Rows::tiles): B[kk][4 n + j] = x[n][4 kk + j].
void packTiles(Int8Rows &r, int64_t rows, int64_t k) {
  const int64_t groups = (rows + kAmxTokens - 1) / kAmxTokens, blocks = k / kAmxK;
  r.tiles.assign(size_t(groups * blocks * kAmxTokens * kAmxK), 0);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t b = 0; b < blocks; ++b) {
      int8_t *tile = r.tiles.data() + ((t / kAmxTokens) * blocks + b) * kAmxTokens * kAmxK;
      for (int64_t kk = 0; kk < kAmxK / 4; ++kk)
        std::memcpy(tile + kk * kAmxK + (t % kAmxTokens) * 4,
                    r.q.data() + t * r.stride + b * kAmxK + kk * 4, 4);
    }
}

#define MOE_AMX __attribute__((target("amx-tile,amx-int8")))

// Tile register layout (palette 1): 0 = A, 8 weight rows x 64 bytes; 1, 2 =
// B, two groups of 16 tokens; 3, 4 = C, 8 rows x 16 int32 sums.
struct alignas(64) TileConfig {
  uint8_t palette = 1, startRow = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// dots[g][m][n] for rows row0 + m (m < 8) and tokens t0 + 16 (group + g) + n
// (g < groups <= 2) of the packed x.
MOE_AMX void tilesAmx(const Int8Rows &x, int64_t group, int groups, const int8_t *w, int64_t k,
                      int32_t dots[2][kAmxRows][kAmxTokens]) {
  TileConfig config;
  config.rows[0] = config.rows[3] = config.rows[4] = kAmxRows;
  config.rows[1] = config.rows[2] = kAmxTokens;
  for (int i = 0; i < 5; ++i)
    config.colsb[i] = kAmxK;
  _tile_loadconfig(&config);
  const int64_t blocks = k / kAmxK, tileBytes = kAmxTokens * kAmxK;
  const int8_t *b0 = x.tiles.data() + group * blocks * tileBytes, *b1 = b0 + blocks * tileBytes;
  _tile_zero(3);
  _tile_zero(4);
  for (int64_t b = 0; b < blocks; ++b) {
    _tile_loadd(0, w + b * kAmxK, k);
    _tile_loadd(1, b0 + b * tileBytes, kAmxK);
    _tile_dpbssd(3, 0, 1);
    if (groups == 2) {
      _tile_loadd(2, b1 + b * tileBytes, kAmxK);
      _tile_dpbssd(4, 0, 2);
    }
  }
  _tile_stored(3, dots[0], kAmxTokens * sizeof(int32_t));
  _tile_stored(4, dots[1], kAmxTokens * sizeof(int32_t));
  _tile_release();
}

} // namespace

Int8Rows quantizeRows(const float *x, int64_t rows, int64_t k) {
  Int8Rows r;
  r.stride = (k + kAlign - 1) / kAlign * kAlign;
  r.q.assign(size_t(rows * r.stride), 0);
  r.scale.resize(size_t(rows));
  const bool avx2 = useAvx2();
  r.sums.resize(size_t(rows));
  for (int64_t t = 0; t < rows; ++t) {
    int8_t *q = r.q.data() + t * r.stride;
    (avx2 ? quantizeRowAvx2 : quantizeRowPortable)(x + t * k, k, q, r.scale[size_t(t)]);
    r.sums[size_t(t)] = std::accumulate(q, q + k, int32_t(0));
  }
  if (isa() >= Isa::Amx && k % kAmxK == 0 && rows >= kAmxMinTokens)
    packTiles(r, rows, k);
  return r;
}

// A block of kInt4Block natural-order values as W4A8 stores it: even
// elements, then odd ones (Int8Rows).
void splitBlockPortable(const int8_t *block, int8_t *dst) {
  for (int64_t e = 0; e < kInt4Block; ++e)
    dst[(e % 2) * (kInt4Block / 2) + e / 2] = block[e];
}

__attribute__((target("avx2"))) void splitBlockAvx2(const int8_t *block, int8_t *dst) {
  // Each 16 bytes' even bytes, then its odd ones; two such halves' evens
  // (and odds) side by side.
  const __m128i evensFirst = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (int64_t i = 0; i < kInt4Block / 32; ++i) {
    const __m128i a = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(block + 32 * i)), evensFirst);
    const __m128i b =
        _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(block + 32 * i + 16)), evensFirst);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 16 * i), _mm_unpacklo_epi64(a, b));
    _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + kInt4Block / 2 + 16 * i),
                     _mm_unpackhi_epi64(a, b));
  }
}

Int8Rows quantizeRowsInt4(const float *x, int64_t rows, int64_t k) {
  Int8Rows r;
  r.stride = (k + kInt4Block - 1) / kInt4Block * kInt4Block;
  r.blocks = r.stride / kInt4Block;
  r.q.assign(size_t(rows * r.stride), 0);
  r.scale.resize(size_t(rows));
  r.blockSums.resize(size_t(rows * r.blocks * 16));
  const bool avx2 = useAvx2();
  std::vector<int8_t> natural(size_t(r.stride), 0); // a row, zero past k
  for (int64_t t = 0; t < rows; ++t) {
    (avx2 ? quantizeRowAvx2 : quantizeRowPortable)(x + t * k, k, natural.data(),
                                                   r.scale[size_t(t)]);
    for (int64_t b = 0; b < r.blocks; ++b) {
      const int8_t *block = natural.data() + b * kInt4Block;
      (avx2 ? splitBlockAvx2 : splitBlockPortable)(block, r.q.data() + t * r.stride + b * kInt4Block);
      int32_t *sums = r.blockSums.data() + (t * r.blocks + b) * 16;
      for (int64_t j = 0; j < 16; ++j) {
        int32_t sum = 0;
        for (int64_t e = 8 * j; e < 8 * j + 8; ++e)
          sum += block[e];
        sums[j] = -8 * sum;
      }
    }
  }
  return r;
}

void linearInt8(const Int8Rows &x, int64_t t0, int64_t tokens, Weight w, int64_t k,
                const int64_t *row, int64_t rows, const float *bias, float *out, int64_t n) {
  const Build &build = buildFor(isa());
  const int8_t *wrow[4];
  int32_t dots[4 * 4];
  // One scale a row, read as the f32 items read theirs: no division a row,
  // and the next items' scales requested ahead (waiting for them had taken
  // a third of this function's own time in a W8A8 decode).
  float rowScale[kRows];
  chunkScales(w, row, rows, 0, rowScale);
  auto store = [&](int64_t t, int64_t i, int32_t dot) { // token t0 + t, row row[i]
    out[(t0 + t) * n + row[i]] =
        float(dot) * x.scale[size_t(t0 + t)] * rowScale[i] + bias[row[i]];
  };
  // AMX: a block of 8 consecutive rows, x packed (t0 is a multiple of 16).
  bool consecutive = rows == kAmxRows && !x.tiles.empty() && isa() >= Isa::Amx;
  for (int64_t i = 1; consecutive && i < rows; ++i)
    consecutive = row[i] == row[0] + i;
  if (consecutive) {
    const int8_t *wrows = static_cast<const int8_t *>(w.data) + row[0] * k;
    alignas(64) int32_t sums[2][kAmxRows][kAmxTokens];
    for (int64_t t = 0; t < tokens; t += 2 * kAmxTokens) {
      const int groups = tokens - t > kAmxTokens ? 2 : 1;
      tilesAmx(x, (t0 + t) / kAmxTokens, groups, wrows, k, sums);
      for (int64_t u = 0; u < std::min(2 * kAmxTokens, tokens - t); ++u)
        for (int64_t i = 0; i < kAmxRows; ++i)
          store(t + u, i, sums[u / kAmxTokens][i][u % kAmxTokens]);
    }
    return;
  }
  // Token groups outer: a group's x rows stay in L1 while the item's weight
  // rows (a few KB) pass under them.
  for (int64_t t = 0, tw; t < tokens; t += tw) {
    tw = step(tokens - t, build.tokens);
    for (int64_t i = 0, rw; i < rows; i += rw) {
      rw = step(rows - i, tw == 1 ? kRowsAlone : build.rows);
      for (int64_t j = 0; j < rw; ++j)
        wrow[j] = static_cast<const int8_t *>(w.data) + row[i + j] * k;
      build.tile[log2of(rw)][log2of(tw)](x.q.data() + (t0 + t) * x.stride, x.stride,
                                         x.sums.data() + t0 + t, wrow, k, dots, 4);
      for (int64_t a = 0; a < tw; ++a)
        for (int64_t j = 0; j < rw; ++j)
          store(t + a, i + j, dots[a * 4 + j]);
    }
  }
}

} // namespace moe::cpu::detail
