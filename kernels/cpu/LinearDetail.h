//===- LinearDetail.h - what Linear.cpp and its AVX-512 items share -*- C++ -*-===//
//
// Not part of the kernel contract (Kernels.h): the work item of linear()'s
// blocked loop, its sizes, the weight loads every build converts with, and
// the AVX-512 items (LinearAvx512.cpp). Linear.cpp's header comment says how
// the pieces fit. KvCache.cpp widens quantised KV rows with the same loads.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_LINEARDETAIL_H
#define MOE_KERNELS_CPU_LINEARDETAIL_H

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/WeightDetail.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace moe::cpu::detail {

// Output rows of a buffered work item: each x vector loaded feeds kRows
// multiply-adds in the AVX-512 tile (8 rows x 6 tokens ran its
// micro-kernel 1.3-1.5x as fast as 4 x 12 on a Sapphire Rapids core: half
// the x traffic from L2). The AVX2 tile sweeps the item's rows 4 at a time.
constexpr int64_t kRows = 8;
// Tokens per block and elements of a row converted at a time (a multiple
// of kLanes): more tokens per block re-convert the weight less often, longer
// chunks make fewer accumulator round trips per multiply-add; the block's x
// chunks (kTokens * kChunk floats, 512 KiB) mostly stay in L2. 128 x 1024
// ran the linear layers of a 512-token prefill 1.15-1.18x as fast as 64 x
// 512 on a 2-core Zen 3 VM (64 x 1024: 1.04-1.06x, 128 x 512: 1.05-1.07x,
// 256 x 1024: no better).
constexpr int64_t kTokens = 128, kChunk = 1024;
// Partial sums kept per (token, row) between chunks: one AVX2 vector.
constexpr int64_t kLanes = 8;

// f(std::integral_constant<WeightType, W>()) for the run-time type: one
// place that turns a weight type into a template argument.
template <typename F> decltype(auto) withType(WeightType type, F &&f) {
  switch (type) {
  case WeightType::F32: return f(std::integral_constant<WeightType, WeightType::F32>());
  case WeightType::BF16: return f(std::integral_constant<WeightType, WeightType::BF16>());
  case WeightType::F16: return f(std::integral_constant<WeightType, WeightType::F16>());
  case WeightType::I8: return f(std::integral_constant<WeightType, WeightType::I8>());
  case WeightType::I4: return f(std::integral_constant<WeightType, WeightType::I4>());
  case WeightType::F8: break;
  }
  return f(std::integral_constant<WeightType, WeightType::F8>());
}

// Lanes [0, n) set: the mask of a tail of n < 8 elements.
inline __attribute__((target("avx2"))) __m256i tailMask(int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), lane);
}

// Eight weight elements of type W at p as f32, before any scale; the masked
// form reads only the first n (the rest are 0.0).
template <WeightType W> __attribute__((target("avx2,f16c"))) __m256 load8(const void *p) {
  if constexpr (W == WeightType::F32) {
    return _mm256_loadu_ps(static_cast<const float *>(p));
  } else if constexpr (W == WeightType::I8) {
    const __m128i b = _mm_loadl_epi64(static_cast<const __m128i *>(p));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  } else if constexpr (W == WeightType::F8) {
    // e4m3 -> f32 exactly: the 7 magnitude bits placed under the f32
    // exponent field read as 2^-120 times the value (subnormals included),
    // so one multiply by 2^120 rebiases; the sign bit moves to bit 31.
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(static_cast<const __m128i *>(p)));
    const __m256i magnitude = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7f)), 20);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
    return _mm256_mul_ps(_mm256_castsi256_ps(_mm256_or_si256(magnitude, sign)),
                         _mm256_set1_ps(0x1p120f));
  } else if constexpr (W == WeightType::I4) { // nibble j of the 32-bit word is element j
    uint32_t word;
    std::memcpy(&word, p, 4);
    // Nibble j shifted to the top of lane j, then arithmetically down:
    // sign-extended in two operations (a shift, a mask, an xor and a
    // subtract until 2026-12-05).
    const __m256i shifts = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
    return _mm256_cvtepi32_ps(
        _mm256_srai_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(int(word)), shifts), 28));
  } else {
    const __m128i h = _mm_loadu_si128(static_cast<const __m128i *>(p));
    if constexpr (W == WeightType::BF16) {
      // bf16 is the high half of an f32: each element's two bytes shuffled
      // under a zero half, the 16 bytes broadcast to both 128-bit lanes (a
      // load) so that one in-lane shuffle places all eight. One vector
      // operation instead of a widening and a shift: the AVX2 tiles issue
      // these on the ports their multiply-adds use (Zen 3: one of two).
      const __m256i bytes = _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7,
                                             -1, -1, 8, 9, -1, -1, 10, 11, -1, -1, 12, 13, -1,
                                             -1, 14, 15);
      return _mm256_castsi256_ps(_mm256_shuffle_epi8(_mm256_broadcastsi128_si256(h), bytes));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}
template <WeightType W>
__attribute__((target("avx2,f16c"))) __m256 load8(const void *p, int64_t n) {
  alignas(32) uint8_t tmp[32] = {};
  std::memcpy(tmp, p, bytesOf(W, size_t(n)));
  return load8<W>(tmp);
}

// Elements [0, 8) of rows a and b (type W, before any scale): a's in the low
// half, b's in the high half.
template <WeightType W> MOE_TARGET_AVX512 __m512 load8x2(const void *a, const void *b) {
  if constexpr (W == WeightType::BF16 || W == WeightType::F16) {
    const __m256i h = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(static_cast<const __m128i *>(a))),
        _mm_loadu_si128(static_cast<const __m128i *>(b)), 1);
    if constexpr (W == WeightType::BF16)
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else
      return _mm512_cvtph_ps(h);
  } else if constexpr (W == WeightType::I8) {
    const __m128i q = _mm_unpacklo_epi64(_mm_loadl_epi64(static_cast<const __m128i *>(a)),
                                         _mm_loadl_epi64(static_cast<const __m128i *>(b)));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
  } else if constexpr (W == WeightType::I4) { // load8's shifts, both words at once
    uint32_t wa, wb;
    std::memcpy(&wa, a, 4);
    std::memcpy(&wb, b, 4);
    const __m512i words = _mm512_mask_set1_epi32(_mm512_set1_epi32(int(wa)), 0xff00, int(wb));
    const __m512i shifts =
        _mm512_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0);
    return _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_sllv_epi32(words, shifts), 28));
  } else { // f32, and the rarer fp8, as two AVX2 halves
    return _mm512_insertf32x8(_mm512_castps256_ps512(load8<W>(a)), load8<W>(b), 1);
  }
}

// One work item: output rows row[0 .. kRows) (the first `rows` distinct,
// the rest repeating the last; for a panel weight, rows row[0] .. row[0] +
// rows, up to kPanelItemRows, and row[1 ..] unset) of w for `tokens` tokens of x (row stride
// k); out is the block's first output row (stride n), bias the problem's
// bias as f32. buf and acc are the thread's staging buffer (kBufFloats)
// and accumulators (kTokens * kRows * kLanes). A panel item's token t may
// instead be row xRows[t] of x (LinearProblem::xRows).
struct Item {
  const float *x;
  int64_t tokens, k, n;
  Weight w;
  const int64_t *row;
  int64_t rows;
  const float *bias;
  float *out, *buf, *acc;
  const int32_t *xRows = nullptr;
  /// Token t's row of x.
  const float *xRow(int64_t t) const { return x + (xRows ? int64_t(xRows[t]) : t) * k; }
};
using ItemFn = void (*)(const Item &item);

// The staged chunk of one pair of rows (LinearAvx512.cpp) takes 2 * kChunk
// floats; the padding puts the pairs' streams in different L1 sets (a
// stride of a multiple of 4 KiB would put them all in the set of the x
// rows, which are themselves 4 KiB apart when k is a multiple of 1024).
constexpr int64_t kPairStride = 2 * kChunk + 16;
constexpr int64_t kBufFloats = kRows / 2 * kPairStride;
static_assert(kBufFloats >= kRows * kChunk, "the buffer holds kRows converted rows too");

// The elements of a row a chunk at k0 takes: at most kChunk, within one
// scale group.
inline int64_t chunkLength(const Weight &w, int64_t k, int64_t k0) {
  const int64_t len = std::min(kChunk, k - k0);
  return w.quantized() ? std::min(len, w.group - k0 % w.group) : len;
}

// Rows ahead whose scales chunkScales requests: a cache line of f32.
constexpr int64_t kScaleLookahead = 16;

// A direct tile streams its rows from memory (a decode item's rows are a
// quarter of a matrix apart, each a few hundred bytes to a few KB, too short
// for the hardware prefetchers to ramp up): every tile (AVX2, AVX-512, W8A8)
// asks for each line this many bytes ahead of the one it reads. Without it
// a W8A8 decode read its weights at half the rate of the int8 f32 path on a
// Zen 5.
constexpr int64_t kStreamAhead = 1024;

// The scales of rows row[0 .. kRows) over the chunk at k0, in scale (the
// first `rows` distinct, the rest repeating the last); null for an
// unscaled weight. Two divisions a chunk, not scaleIndex's two a row: with
// one scale group of rows per row (int8, int4) the index is linear in the
// row, and a GEMV item's chunk is a whole row of 256 to a few thousand
// elements, so per-row divisions cost as much as its multiply-adds.
inline const float *chunkScales(const Weight &w, const int64_t *row, int64_t rows, int64_t k0,
                                float *scale) {
  if (!w.quantized())
    return nullptr;
  if (w.rowGroup == 1) {
    const int64_t groups = (w.cols + w.group - 1) / w.group; // scales a row
    const float *at = w.scales + w.scaleIndex(0, k0);
    for (int64_t i = 0; i < rows; ++i) {
      scale[i] = at[row[i] * groups];
      // A thread's next items take the next rows: ask for their scales a
      // line ahead. Nothing else brings them in, and waiting for that line
      // from memory took about 4% of an int8 decode on a 2-core Zen 3 VM.
      __builtin_prefetch(at + (row[i] + kScaleLookahead) * groups);
    }
  } else {
    for (int64_t i = 0; i < rows; ++i)
      scale[i] = w.scales[w.scaleIndex(row[i], k0)];
  }
  std::fill(scale + rows, scale + kRows, scale[rows - 1]);
  return scale;
}

// The bytes the row element `first` (element k0 of its row) starts reads
// next: the row's next chunk, or after its last one the first chunk of the
// same row of the next block (usually this thread's next item; expert rows
// are too short for the hardware prefetcher).
struct Lines {
  const char *p;
  int64_t bytes;
};
inline Lines nextLines(const Weight &w, int64_t first, int64_t k, int64_t k0) {
  const bool more = k0 + kChunk < k;
  const int64_t from = more ? first + kChunk : first - k0 + kRows * k;
  const int64_t count = std::min(kChunk, more ? k - k0 - kChunk : k);
  return {static_cast<const char *>(w.data) + bytesOf(w.type, size_t(from)),
          int64_t(bytesOf(w.type, size_t(count)))};
}

// The weight's chunks of the item: f(k0, len, scales or null).
template <typename F> void forChunks(const Item &it, F &&f) {
  const Weight &w = it.w;
  if (!w.quantized() || w.rowGroup != 1) {
    for (int64_t k0 = 0, len; k0 < it.k; k0 += len) {
      len = chunkLength(w, it.k, k0);
      float scale[kRows];
      f(k0, len, chunkScales(w, it.row, it.rows, k0, scale));
    }
    return;
  }
  // One scale group of rows a row (int8, int4): the chunks of chunkLength,
  // group g in pieces of at most kChunk, and chunkScales' scales (and
  // prefetches), without their three divisions a chunk: int4's
  // 128-element groups make a chunk 16 steps, and the AVX-512 int4 item
  // ran about 8% faster without them on a Zen 4.
  const int64_t groups = (w.cols + w.group - 1) / w.group; // scales a row
  const float *rowScales[kRows];
  for (int64_t i = 0; i < it.rows; ++i)
    rowScales[i] = w.scales + (w.rowOffset + it.row[i]) * groups;
  float scale[kRows];
  for (int64_t g = 0, k0 = 0, len; k0 < it.k; k0 += len) {
    const int64_t groupEnd = std::min(it.k, (g + 1) * w.group);
    len = std::min(kChunk, groupEnd - k0);
    for (int64_t i = 0; i < it.rows; ++i) {
      scale[i] = rowScales[i][g];
      __builtin_prefetch(rowScales[i] + g + kScaleLookahead * groups);
    }
    std::fill(scale + it.rows, scale + kRows, scale[it.rows - 1]);
    f(k0, len, static_cast<const float *>(scale));
    if (k0 + len == groupEnd)
      ++g;
  }
}

// The AVX-512 items (LinearAvx512.cpp): a buffered item converts a chunk of
// its kRows rows once and sweeps it for every token; a direct item (at most
// kDirectTokens512 tokens, 4 rows a quarter of a matrix apart) converts its
// rows in registers.
constexpr int64_t kDirectTokens512 = 16;
void bufferedAvx512(const Item &it);
void directAvx512(const Item &it);

// A panel weight's item (LinearPanels.cpp): rows row[0] .. row[0] + rows,
// consecutive, up to kPanelItemRows, whole panels, for its block's tokens;
// row[1 ..] are not read.
constexpr int64_t kPanelItemRows = 8 * kPanelRows;
void panelItem(const Item &it);

} // namespace moe::cpu::detail

#endif
