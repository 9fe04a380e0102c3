//===- LinearInt4.cpp - W4A8 matrix products -------------------------------===//
//
// Int4 weights times activations quantized per row to int8 (Kernels.h,
// Weight::int8Activations on an I4 weight), in blocks of kInt4Block
// elements: a block's 64 bytes hold its even elements in the low nibbles and
// its odd ones in the high nibbles, and x is stored in that order
// (quantizeRowsInt4), so that the nibbles multiply x where they lie. Each
// nibble n is read as the unsigned n ^ 8 = q + 8 and each lane starts from
// -8 times its x sum (Int8Rows::blockSums): the products are unsigned times
// signed bytes, vpdpbusd's (AVX-512 VNNI) and vpmaddubsw's (AVX2), and no
// instruction sign-extends a nibble. Per block, 16 exact int32 lane sums
// (lane j: elements 8j .. 8j + 7), converted to f32 and multiplied-added by
// the block's weight scale into 16 f32 lanes; after the last block the
// lanes are summed in one fixed order, then times the row's activation
// scale, plus bias. Every build does exactly these operations.
// Built with -ffp-contract=off (the library's flags): the epilogue
// sum * s_x + bias is a multiply and an add.
//
//===----------------------------------------------------------------------===//
#include "kernels/cpu/Isa.h"
#include "kernels/cpu/LaneSums.h"
#include "kernels/cpu/LinearDetail.h"
#include "kernels/cpu/LinearInt8.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moe::cpu::detail {
namespace {

constexpr int64_t kBlockBytes = kInt4Block / 2;
// Besides each line kStreamAhead ahead into L1 (as every direct tile), the
// line 4 KB ahead into L2: more of each stream in flight. A batch-1 W4A8
// GEMV (2 threads, 2-core Zen 4, weights from memory, median of 60 calls)
// read 1536 x 2048 matrices at 33 GB/s against 27 without it, 2048 x 768
// ones at 29 against 28 (2 and 8 KB ahead: about the same; 4 KB into L1
// alone: no gain).
constexpr int64_t kStreamAheadL2 = 4096;
// Rows and tokens of a tile: four rows (a direct item's, a quarter of a
// matrix apart, or half a buffered item's eight), up to four tokens.
constexpr int kTileRows = 4, kMaxTileTokens = 4;

// What a tile reads: T tokens from row t of x, four weight rows with their
// scales, k elements; blocksPerScale blocks share a scale (a whole row's
// for one group a row).
struct Int4Tile {
  const Int8Rows *x;
  int64_t t;
  const uint8_t *w[kTileRows];
  const float *scale[kTileRows];
  int64_t k, blocksPerScale;
};

// sums[u * kTileRows + i]: the fixed-order sum of the 16 f32 lanes of
// token t + u and row i (before the activation scale).
using TileFn = void (*)(const Int4Tile &tile, float *sums);

// ((h0 + h1) + (h2 + h3)) + ((h4 + h5) + (h6 + h7)), h_j = f_j + f_{j + 8}:
// the lane sums of every build.
float laneSum16(const float *f) {
  float h[8];
  for (int j = 0; j < 8; ++j)
    h[j] = f[j] + f[j + 8];
  return ((h[0] + h[1]) + (h[2] + h[3])) + ((h[4] + h[5]) + (h[6] + h[7]));
}

// --- portable ---

template <int T> void tilePortable(const Int4Tile &tile, float *sums) {
  const Int8Rows &x = *tile.x;
  for (int u = 0; u < T; ++u)
    for (int i = 0; i < kTileRows; ++i) {
      float f[16] = {};
      for (int64_t b = 0, g = 0; b < x.blocks; ++b) {
        const int8_t *xb = x.q.data() + (tile.t + u) * x.stride + b * kInt4Block;
        const int32_t *start = x.blockSums.data() + ((tile.t + u) * x.blocks + b) * 16;
        const int64_t bytes = std::min(kBlockBytes, (tile.k + 1) / 2 - b * kBlockBytes);
        int32_t lane[16];
        for (int j = 0; j < 16; ++j) {
          lane[j] = start[j];
          for (int64_t c = 4 * j; c < 4 * j + 4; ++c) { // weight bytes, elements 2c and 2c + 1
            const int byte = c < bytes ? tile.w[i][b * kBlockBytes + c] : 0;
            lane[j] += ((byte & 0xf) ^ 8) * xb[c] + ((byte >> 4) ^ 8) * xb[kBlockBytes + c];
          }
        }
        const float s = tile.scale[i][g];
        for (int j = 0; j < 16; ++j)
          f[j] = std::fma(float(lane[j]), s, f[j]);
        if ((b + 1) % tile.blocksPerScale == 0)
          ++g;
      }
      sums[u * kTileRows + i] = laneSum16(f);
    }
}

// --- AVX2 ---

// The block's 64 bytes of row w at block b (zero past the row's last byte:
// a partial last block reads nothing beyond it), as unsigned nibble + 8:
// lo[h] the low nibbles of bytes 32h .. 32h + 31, hi[h] the high ones.
__attribute__((target("avx2"))) inline void nibblesAvx2(const uint8_t *w, int64_t bytes,
                                                       __m256i (&lo)[2], __m256i (&hi)[2]) {
  alignas(32) uint8_t tail[kBlockBytes];
  if (bytes < kBlockBytes) {
    std::memset(tail, 0, sizeof tail);
    std::memcpy(tail, w, size_t(bytes));
    w = tail;
  }
  const __m256i flip = _mm256_set1_epi8(char(0x88)), low = _mm256_set1_epi8(0x0f);
  for (int h = 0; h < 2; ++h) {
    const __m256i v =
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(w + 32 * h)), flip);
    lo[h] = _mm256_and_si256(v, low);
    hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
  }
}

// AVX2 has 16 registers: a row at a time, over all its blocks, its two
// halves' f32 lanes for each token in f[u][h] (16 a token, as VNNI's).
template <int T>
__attribute__((target("avx2,fma"))) void tileAvx2(const Int4Tile &tile, float *sums) {
  const Int8Rows &x = *tile.x;
  const int64_t rowBytes = (tile.k + 1) / 2;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 rowSums[T][kTileRows]; // f_j + f_{j + 8}
  #pragma GCC unroll 4
  for (int i = 0; i < kTileRows; ++i) {
    __m256 f[T][2];
    #pragma GCC unroll 4
    for (int u = 0; u < T; ++u)
      f[u][0] = f[u][1] = _mm256_setzero_ps();
    for (int64_t b = 0, g = 0; b < x.blocks; ++b) {
      const int64_t bytes = std::min(kBlockBytes, rowBytes - b * kBlockBytes);
      _mm_prefetch(reinterpret_cast<const char *>(tile.w[i]) + b * kBlockBytes + kStreamAhead,
                   _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char *>(tile.w[i]) + b * kBlockBytes + kStreamAheadL2,
                   _MM_HINT_T1);
      __m256i lo[2], hi[2];
      nibblesAvx2(tile.w[i] + b * kBlockBytes, bytes, lo, hi);
      const __m256 s = _mm256_set1_ps(tile.scale[i][g]);
      #pragma GCC unroll 4
      for (int u = 0; u < T; ++u) {
        const int8_t *xb = x.q.data() + (tile.t + u) * x.stride + b * kInt4Block;
        const int32_t *start = x.blockSums.data() + ((tile.t + u) * x.blocks + b) * 16;
        #pragma GCC unroll 4
        for (int h = 0; h < 2; ++h) {
          const __m256i even = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb + 32 * h));
          const __m256i odd =
              _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xb + kBlockBytes + 32 * h));
          // Pair sums of at most 2 x 15 x 127: two of them fit int16.
          const __m256i pairs =
              _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], even), _mm256_maddubs_epi16(hi[h], odd));
          const __m256i lanes = _mm256_add_epi32(
              _mm256_madd_epi16(pairs, ones),
              _mm256_loadu_si256(reinterpret_cast<const __m256i *>(start + 8 * h)));
          f[u][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), s, f[u][h]);
        }
      }
      if ((b + 1) % tile.blocksPerScale == 0)
        ++g;
    }
    #pragma GCC unroll 4
    for (int u = 0; u < T; ++u)
      rowSums[u][i] = _mm256_add_ps(f[u][0], f[u][1]);
  }
  #pragma GCC unroll 4
  for (int u = 0; u < T; ++u)
    _mm_storeu_ps(sums + u * kTileRows,
                  laneSums4(rowSums[u][0], rowSums[u][1], rowSums[u][2], rowSums[u][3]));
}

// --- AVX-512 VNNI ---

#define MOE_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))

// Four rows' blocks in registers (8 of 32), each token's 16 lanes a row in
// one register: per block and row two vpdpbusd, a conversion and a
// multiply-add a token.
template <int T> MOE_VNNI void tileVnni(const Int4Tile &tile, float *sums) {
  const Int8Rows &x = *tile.x;
  const int64_t rowBytes = (tile.k + 1) / 2;
  const __m512i low = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(0x08);
  __m512 f[T][kTileRows];
  #pragma GCC unroll 4
  for (int u = 0; u < T; ++u)
    #pragma GCC unroll 4
    for (int i = 0; i < kTileRows; ++i)
      f[u][i] = _mm512_setzero_ps();
  for (int64_t b = 0, g = 0; b < x.blocks; ++b) {
    const int64_t bytes = std::min(kBlockBytes, rowBytes - b * kBlockBytes);
    const __mmask64 live = bytes == kBlockBytes ? ~__mmask64(0) : (__mmask64(1) << bytes) - 1;
    __m512i lo[kTileRows], hi[kTileRows];
    __m512 s[kTileRows];
    #pragma GCC unroll 4
    for (int i = 0; i < kTileRows; ++i) {
      const uint8_t *at = tile.w[i] + b * kBlockBytes;
      _mm_prefetch(reinterpret_cast<const char *>(at) + kStreamAhead, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char *>(at) + kStreamAheadL2, _MM_HINT_T1);
      const __m512i v = _mm512_maskz_loadu_epi8(live, at);
      // (v & 0x0f) ^ 0x08 in one ternary-logic operation (A & B) ^ C
      lo[i] = _mm512_ternarylogic_epi32(v, low, eight, 0x6a);
      hi[i] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), low, eight, 0x6a);
      s[i] = _mm512_set1_ps(tile.scale[i][g]);
    }
    #pragma GCC unroll 4
    for (int u = 0; u < T; ++u) {
      const int8_t *xb = x.q.data() + (tile.t + u) * x.stride + b * kInt4Block;
      const __m512i even = _mm512_loadu_si512(xb), odd = _mm512_loadu_si512(xb + kBlockBytes);
      const __m512i start =
          _mm512_loadu_si512(x.blockSums.data() + ((tile.t + u) * x.blocks + b) * 16);
      #pragma GCC unroll 4
      for (int i = 0; i < kTileRows; ++i) {
        const __m512i lanes =
            _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(start, lo[i], even), hi[i], odd);
        f[u][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), s[i], f[u][i]);
      }
    }
    if ((b + 1) % tile.blocksPerScale == 0)
      ++g;
  }
  #pragma GCC unroll 4
  for (int u = 0; u < T; ++u) {
    __m256 h[kTileRows];
    #pragma GCC unroll 4
    for (int i = 0; i < kTileRows; ++i)
      h[i] = _mm256_add_ps(_mm512_castps512_ps256(f[u][i]), _mm512_extractf32x8_ps(f[u][i], 1));
    _mm_storeu_ps(sums + u * kTileRows, laneSums4(h[0], h[1], h[2], h[3]));
  }
}

// The tiles of a build for T = 1 .. kMaxTileTokens.
struct Build {
  TileFn tile[kMaxTileTokens];
};

const Build &buildFor(Isa level) {
  static const Build portable{{tilePortable<1>, tilePortable<2>, tilePortable<3>, tilePortable<4>}},
      avx2{{tileAvx2<1>, tileAvx2<2>, tileAvx2<3>, tileAvx2<4>}},
      vnni{{tileVnni<1>, tileVnni<2>, tileVnni<3>, tileVnni<4>}};
  static const bool hasVnni = __builtin_cpu_supports("avx512vnni");
  if (level >= Isa::Avx512 && hasVnni)
    return vnni;
  return level >= Isa::Avx2 ? avx2 : portable;
}

} // namespace

void linearInt4(const Int8Rows &x, int64_t t0, int64_t tokens, Weight w, int64_t k,
                const int64_t *row, int64_t rows, const float *bias, float *out, int64_t n) {
  const Build &build = buildFor(isa());
  // Row r's scales start at scales + (rowOffset + r) * groups (rowGroup 1),
  // without scaleIndex's two divisions a row: this function's own time had
  // been a sixth of its tiles' in a batch-1 GEMV (perf), which went from
  // 25.1 to 28.0 GB/s without them (2-core Zen 4, separate runs).
  const int64_t groups = (w.cols + w.group - 1) / w.group; // scales a row
  const float *scales = w.scales + w.rowOffset * groups;
  Int4Tile tile{&x, 0, {}, {}, k, w.group >= w.cols ? x.blocks : w.group / kInt4Block};
  for (int64_t i = 0; i < rows; ++i) // the scales of the thread's next items (chunkScales)
    for (int64_t g = 0; g < groups; g += 16)
      __builtin_prefetch(scales + (row[i] + kScaleLookahead) * groups + g);
  for (int64_t i0 = 0; i0 < rows; i0 += kTileRows) {
    // Rows past the item's last repeat it (row[] does up to kRows).
    for (int i = 0; i < kTileRows; ++i) {
      const int64_t r = row[std::min<int64_t>(i0 + i, kRows - 1)];
      tile.w[i] = static_cast<const uint8_t *>(w.data) + r * k / 2;
      tile.scale[i] = scales + r * groups;
    }
    const int64_t live = std::min<int64_t>(kTileRows, rows - i0);
    for (int64_t t = 0, tw; t < tokens; t += tw) {
      tw = std::min<int64_t>(kMaxTileTokens, tokens - t);
      tile.t = t0 + t;
      float sums[kMaxTileTokens * kTileRows];
      build.tile[tw - 1](tile, sums);
      for (int64_t u = 0; u < tw; ++u)
        for (int64_t i = 0; i < live; ++i) {
          const int64_t r = row[i0 + i];
          out[(t0 + t + u) * n + r] = sums[u * kTileRows + i] * x.scale[size_t(t0 + t + u)] + bias[r];
        }
    }
  }
}

} // namespace moe::cpu::detail
