//===- Linear.cpp - out = x w^T (+ bias), blocked and multi-threaded ------===//
//
// Work items are (problem, block of kTokens tokens, block of kRows output
// rows), shared by the threads of one parallel region (linearGroup runs many
// problems, e.g. every routed expert, in one region). An item walks k in
// chunks of kChunk (cut at scale-group ends for int8/int4). Up to a few
// tokens (LinearKernels::directTokens), a direct tile (two rows half a
// matrix apart; on AVX-512 four, a quarter apart) reads 16-bit or quantized weights
// straight from memory and converts (and scales) them in registers: the
// decode GEMV reads each weight byte once, in sequential streams per
// thread, and dequantization costs no memory traffic. For more tokens, each
// chunk of the kRows rows is converted to f32 once into a per-thread L1
// buffer and swept by every token of the block (whose x chunks stay in L2);
// on AVX-512 the buffer holds pairs of rows interleaved and each token's
// sums stay in registers over the chunk.
// For int8/int4 both paths sum x * q over a chunk (q converted exactly) and
// add that sum times the row's scale to the accumulator: one multiply-add
// per chunk instead of a multiply per element, the same operations either
// way, so they agree bit for bit.
//
// The tile comes in three builds chosen at run time (Isa.h): AVX-512 and
// AVX2+FMA (8-lane accumulators, explicit intrinsics; the AVX-512 tile holds
// two rows' 8 lanes per register and gives the same bits) and a portable one
// for any x86-64. Either way every output element is the same fixed
// sequence of operations whatever the number of tokens, the thread count,
// the ISA (AVX2 or AVX-512; the portable build rounds differently) or its position in a
// block: a token's result does not depend on what it is batched with (the
// serving engine relies on this), and equal weight rows give equal outputs.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/LaneSums.h"
#include "kernels/cpu/LinearInt8.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/WeightDetail.h"
#include "kernels/cpu/Vector.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace moe::cpu {
namespace {

// Output rows of a buffered work item: each x vector loaded feeds kRows
// multiply-adds in the AVX-512 tile (8 rows x 6 tokens ran its
// micro-kernel 1.3-1.5x as fast as 4 x 12 on a Sapphire Rapids core: half
// the x traffic from L2). The AVX2 tile sweeps the item's rows 4 at a time.
constexpr int64_t kRows = 8;
// Rows and tokens of an AVX2 tile: 4 x kTileTokens accumulators and 4 weight
// vectors in the 16 registers. f32 rows fold into the multiply-adds as
// memory operands, so three tokens fit; rows converted from 16 bits take
// registers, so two.
constexpr int64_t kAvx2Rows = 4, kTileTokens = 3, kTileTokens16 = 2;
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
// Multiply-adds below which threads cost more than they save.
constexpr int64_t kParallelWork = 1 << 16;
constexpr int64_t kRunsPerThread = 4;

// Adds x_t . r_i over len elements for tokens x rows into the accumulators
// acc[(t * kRows + i) * kLanes ...]; the rows r are of type `type`. With a
// scale (quantized rows: len never crosses a scale group) the sum is
// multiplied by scale[i] before it is added. Tiles come for kRows rows (the
// buffered path) and for the few rows a direct tile reads from memory.
using TileFn = void (*)(const float *x, int64_t ldx, int64_t tokens, const void *const *r,
                        WeightType type, const float *scale, int64_t len, float *acc);
using ConvertFn = void (*)(Weight w, int64_t first, int64_t count, float *dst);

// --- portable build ---

// acc[t * kRows * kLanes] += dot(x_t, row) over len elements (times the
// scale); the row is f32 (converted first).
void rowPortable(const float *x, int64_t ldx, int64_t tokens, const void *const *row,
                 WeightType, const float *scale, int64_t len, float *acc) {
  const auto *r = static_cast<const float *>(row[0]);
  for (int64_t t = 0; t < tokens; ++t) {
    const float *xt = x + t * ldx;
    float a = 0.0f;
#pragma omp simd reduction(+ : a)
    for (int64_t i = 0; i < len; ++i)
      a += xt[i] * r[i];
    acc[t * kRows * kLanes] += scale ? a * *scale : a;
  }
}

template <int R>
void tilePortable(const float *x, int64_t ldx, int64_t tokens, const void *const *r,
                  WeightType type, const float *scale, int64_t len, float *acc) {
  for (int64_t i = 0; i < R; ++i)
    rowPortable(x, ldx, tokens, r + i, type, scale ? scale + i : nullptr, len, acc + i * kLanes);
}

// Quantized weights convert to their integers: the tile applies the scale.
void convertPortable(Weight w, int64_t first, int64_t count, float *dst) {
  if (w.quantized())
    detail::unscaledToF32(w, size_t(first), size_t(count), dst);
  else
    detail::toF32(w, size_t(first), size_t(count), dst);
}

// --- AVX2 + FMA build ---

__attribute__((target("avx2"))) __m256i tailMask(int64_t n) {
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
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i nibble =
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(int(word)), shifts),
                         _mm256_set1_epi32(0xf));
    const __m256i eight = _mm256_set1_epi32(8); // (n ^ 8) - 8 sign-extends
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_xor_si256(nibble, eight), eight));
  } else {
    const __m128i h = _mm_loadu_si128(static_cast<const __m128i *>(p));
    if constexpr (W == WeightType::BF16) // bf16 is the high half of an f32
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else
      return _mm256_cvtph_ps(h);
  }
}
template <WeightType W>
__attribute__((target("avx2,f16c"))) __m256 load8(const void *p, int64_t n) {
  alignas(32) uint8_t tmp[32] = {};
  std::memcpy(tmp, p, detail::bytesOf(W, size_t(n)));
  return load8<W>(tmp);
}

// acc[(t * kRows + i) * kLanes + lane] += x_t[p] * r_i[p] for p = lane mod 8,
// over len elements, for R rows r_i of type W and T tokens. The sequence of
// operations for one (token, row) does not depend on R or T.
template <int R, int T, WeightType W>
__attribute__((target("avx2,fma,f16c"))) void tileAvx2T(const float *x, int64_t ldx,
                                                        const void *const *r,
                                                        const float *scale, int64_t len,
                                                        float *acc) {
  const char *rows[R];
  for (int i = 0; i < R; ++i)
    rows[i] = static_cast<const char *>(r[i]);
  auto load = [&](int i, int64_t p, int64_t n) __attribute__((target("avx2,fma,f16c"))) {
    const char *at = rows[i] + detail::bytesOf(W, size_t(p));
    return n == kLanes ? load8<W>(at) : load8<W>(at, n);
  };
  // Scaled sums start from zero and are added (times the scale) at the end.
  __m256 a[T][R];
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < R; ++i)
      a[t][i] = scale ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + (t * kRows + i) * kLanes);
  int64_t p = 0;
  for (; p + kLanes <= len; p += kLanes) {
    // The pair tile streams its rows from memory: ask for the line 1 KB
    // ahead of each, once per line.
    if constexpr (R <= 2)
      if (detail::bytesOf(W, size_t(p)) % 64 == 0)
        for (int i = 0; i < R; ++i)
          _mm_prefetch(rows[i] + detail::bytesOf(W, size_t(p)) + 1024, _MM_HINT_T0);
    __m256 w[R];
    for (int i = 0; i < R; ++i)
      w[i] = load(i, p, kLanes);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * ldx + p);
      for (int i = 0; i < R; ++i)
        a[t][i] = _mm256_fmadd_ps(xv, w[i], a[t][i]);
    }
  }
  if (p < len) { // missing lanes are 0.0 in both operands
    __m256 w[R];
    for (int i = 0; i < R; ++i)
      w[i] = load(i, p, len - p);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_maskload_ps(x + t * ldx + p, tailMask(len - p));
      for (int i = 0; i < R; ++i)
        a[t][i] = _mm256_fmadd_ps(xv, w[i], a[t][i]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < R; ++i) {
      float *out = acc + (t * kRows + i) * kLanes;
      _mm256_storeu_ps(out, scale ? _mm256_fmadd_ps(a[t][i], _mm256_set1_ps(scale[i]),
                                                    _mm256_loadu_ps(out))
                                  : a[t][i]);
    }
}

// All tokens, Step at a time, then the rest. Four rows: f32 rows fold into
// the multiply-adds as memory operands, so three tokens fit in the
// registers; rows converted from 16 bits take registers, so two. One or two
// rows (the decode path): four tokens.
template <int R, WeightType W>
void tileAvx2Typed(const float *x, int64_t ldx, int64_t tokens, const void *const *r,
                   const float *scale, int64_t len, float *acc) {
  static_assert(R <= kAvx2Rows, "an AVX2 tile holds at most four rows");
  constexpr int Step = R <= 2 ? 4 : W == WeightType::F32 ? kTileTokens : kTileTokens16;
  int64_t t = 0;
  for (; t + Step <= tokens; t += Step)
    tileAvx2T<R, Step, W>(x + t * ldx, ldx, r, scale, len, acc + t * kRows * kLanes);
  x += t * ldx;
  acc += t * kRows * kLanes;
  switch (tokens - t) {
  case 3: if constexpr (Step > 3) tileAvx2T<R, 3, W>(x, ldx, r, scale, len, acc); break;
  case 2: if constexpr (Step > 2) tileAvx2T<R, 2, W>(x, ldx, r, scale, len, acc); break;
  case 1: tileAvx2T<R, 1, W>(x, ldx, r, scale, len, acc); break;
  default: break;
  }
}

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

template <int R>
void tileAvx2(const float *x, int64_t ldx, int64_t tokens, const void *const *r,
              WeightType type, const float *scale, int64_t len, float *acc) {
  if constexpr (R == kRows) { // the buffered path (f32 rows): 4 rows at a time
    for (int i = 0; i < kRows; i += kAvx2Rows)
      tileAvx2Typed<kAvx2Rows, WeightType::F32>(x, ldx, tokens, r + i, scale ? scale + i : nullptr,
                                                len, acc + i * kLanes);
  } else {
    withType(type,
             [&](auto w) { tileAvx2Typed<R, w.value>(x, ldx, tokens, r, scale, len, acc); });
  }
}

// --- AVX-512 build ---
//
// The same per-lane sums as the AVX2 tile, twice as wide: a 16-lane
// accumulator holds the 8 lanes of row i in its low half and those of row
// i + 1 in its high half, the token's 8 x values are broadcast to both
// halves, and each lane sees exactly the AVX2 tile's multiply-adds in the
// same order, so the two builds give the same bits. The direct tile reads
// 4 rows for 6 tokens at a time, the buffered one (below) 8 rows for 6
// tokens (AVX2: 2 rows for 4 tokens, or 4 rows for 2-3 tokens).


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
  } else { // f32, and the rarer fp8 and int4, as two AVX2 halves
    return _mm512_insertf32x8(_mm512_castps256_ps512(load8<W>(a)), load8<W>(b), 1);
  }
}

// Converts the first whole multiple of 8 of `count` elements from `first`
// on (before any scale); returns how many.
template <WeightType W>
__attribute__((target("avx2,f16c"))) int64_t convert8s(const void *data, int64_t first,
                                                       int64_t count, float *dst) {
  const char *src = static_cast<const char *>(data);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(dst + i, load8<W>(src + detail::bytesOf(W, size_t(first + i))));
  return i;
}

void convertAvx2(Weight w, int64_t first, int64_t count, float *dst) {
  const int64_t i = withType(w.type, [&](auto type) -> int64_t {
    if constexpr (type.value == WeightType::F32)
      return 0; // read in place, never converted
    else
      return convert8s<type.value>(w.data, first, count, dst);
  });
  convertPortable(w, first + i, count - i, dst + i);
}

// --- work items ---

// One work item: output rows row[0 .. kRows) (the first `rows` distinct,
// the rest repeating the last) of w for `tokens` tokens of x (row stride
// k); out is the block's first output row (stride n), bias the problem's
// bias as f32. buf and acc are the thread's staging buffer (kBufFloats)
// and accumulators (kTokens * kRows * kLanes).
struct Item {
  const float *x;
  int64_t tokens, k, n;
  Weight w;
  const int64_t *row;
  int64_t rows;
  const float *bias;
  float *out, *buf, *acc;
};
using ItemFn = void (*)(const Item &item);

// The staged chunk of one pair of rows (AVX-512 below) takes 2 * kChunk
// floats; the padding puts the pairs' streams in different L1 sets (a
// stride of a multiple of 4 KiB would put them all in the set of the x
// rows, which are themselves 4 KiB apart when k is a multiple of 1024).
constexpr int64_t kPairStride = 2 * kChunk + 16;
constexpr int64_t kBufFloats = kRows / 2 * kPairStride;
static_assert(kBufFloats >= kRows * kChunk, "the buffer holds kRows converted rows too");

// The elements of a row a chunk at k0 takes: at most kChunk, within one
// scale group.
int64_t chunkLength(const Weight &w, int64_t k, int64_t k0) {
  const int64_t len = std::min(kChunk, k - k0);
  return w.quantized() ? std::min(len, w.group - k0 % w.group) : len;
}

// The scales of rows row[0 .. count) over the chunk at k0, in scale; null
// for an unscaled weight.
const float *chunkScales(const Weight &w, const int64_t *row, int64_t count, int64_t k0,
                         float *scale) {
  if (!w.quantized())
    return nullptr;
  for (int64_t i = 0; i < count; ++i)
    scale[i] = w.scales[w.scaleIndex(row[i], k0)];
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
Lines nextLines(const Weight &w, int64_t first, int64_t k, int64_t k0) {
  const bool more = k0 + kChunk < k;
  const int64_t from = more ? first + kChunk : first - k0 + kRows * k;
  const int64_t count = std::min(kChunk, more ? k - k0 - kChunk : k);
  return {static_cast<const char *>(w.data) + detail::bytesOf(w.type, size_t(from)),
          int64_t(detail::bytesOf(w.type, size_t(count)))};
}

// Requests nextLines. Converting a chunk reads one short stream at a time,
// too little in flight to keep the memory busy; prefetching the next chunk
// of every row of the block while converting this one made a bf16 GEMV about
// 1.4x faster on a 2-core VM.
void prefetchNext(const Weight &w, int64_t first, int64_t k, int64_t k0) {
  const Lines next = nextLines(w, first, k, k0);
  for (int64_t byte = 0; byte < next.bytes; byte += 64)
    __builtin_prefetch(next.p + byte);
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

// Fixed-order sum of one accumulator's lanes.
float lanesSum(const float *a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// out[i] = lanesSum(acc + i * kLanes) + bias[i] for i < kRows: the same
// sums (hadd pairs lanes as lanesSum does, and addition commutes), four rows
// at a time.
using FinishFn = void (*)(const float *acc, const float *bias, float *out);

void finishPortable(const float *acc, const float *bias, float *out) {
  for (int64_t i = 0; i < kRows; ++i)
    out[i] = lanesSum(acc + i * kLanes) + bias[i];
}

__attribute__((target("avx2"))) void finishAvx2(const float *acc, const float *bias,
                                                float *out) {
  for (int64_t i = 0; i < kRows; i += 4, acc += 4 * kLanes) {
    const __m128 sum = laneSums4(_mm256_loadu_ps(acc), _mm256_loadu_ps(acc + kLanes),
                                 _mm256_loadu_ps(acc + 2 * kLanes),
                                 _mm256_loadu_ps(acc + 3 * kLanes));
    _mm_storeu_ps(out + i, _mm_add_ps(sum, _mm_loadu_ps(bias + i)));
  }
}

// --- AVX-512 items: pairs of rows, sums kept in registers ---
//
// A tile register holds elements p .. p + 7 of two rows (the low and high
// halves) and each token's 8 x values are broadcast to both halves, so that
// every lane sees tileAvx2T's multiply-adds in the same order, and the lane
// sums are finishAvx2's: the two builds give the same bits.
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

// Elements [0, len) of rows a and b of type W (before any scale),
// interleaved by 8 into dst; the last group of 8 padded with 0.0.
template <WeightType W>
MOE_TARGET_AVX512 void stagePair(const char *a, const char *b, int64_t len, float *dst) {
  int64_t p = 0;
  for (; p + kLanes <= len; p += kLanes, dst += 2 * kLanes) {
    const size_t at = detail::bytesOf(W, size_t(p));
    _mm512_storeu_ps(dst, load8x2<W>(a + at, b + at));
  }
  if (p < len) {
    const size_t at = detail::bytesOf(W, size_t(p));
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
// line requested 1 KB ahead (as tileAvx2T's pair tile).
template <int P, WeightType W> struct PairsInPlace {
  const char *row[2 * P];
  MOE_TARGET_AVX512 __m512 load(int j, int64_t p, int64_t n) const {
    const size_t at = detail::bytesOf(W, size_t(p));
    if (n == kLanes)
      return load8x2<W>(row[2 * j] + at, row[2 * j + 1] + at);
    return _mm512_insertf32x8(_mm512_castps256_ps512(load8<W>(row[2 * j] + at, n)),
                              load8<W>(row[2 * j + 1] + at, n), 1);
  }
  void prefetch(int64_t p) const {
    const size_t at = detail::bytesOf(W, size_t(p));
    if (at % 64 == 0)
      for (int i = 0; i < 2 * P; ++i)
        _mm_prefetch(row[i] + at + 1024, _MM_HINT_T0);
  }
};

// The lane sums of 8 rows (two per register, rows 0-1 in p[0]) in row
// order: finishAvx2's additions, by gathering even and odd lanes (the lanes
// paired, the pairs paired, the quads paired).
MOE_TARGET_AVX512 __m256 laneSums8(const __m512 *p) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  auto pairUp = [&](__m512 a, __m512 b) MOE_TARGET_AVX512 {
    return _mm512_add_ps(_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b));
  };
  const __m512 quads = pairUp(pairUp(p[0], p[1]), pairUp(p[2], p[3])); // two per row
  const __m512 split = _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15), quads);
  return _mm256_add_ps(_mm512_castps512_ps256(split), _mm512_extractf32x8_ps(split, 1));
}

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
  if (p < len) { // missing lanes are 0.0 in both operands, as in tileAvx2T
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
      const __m128 sum = laneSums4(_mm512_castps512_ps256(a[u][0]), _mm512_extractf32x8_ps(a[u][0], 1),
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

// The weight's chunks of the item: f(k0, len, scales or null).
template <typename F> void forChunks(const Item &it, F &&f) {
  for (int64_t k0 = 0, len; k0 < it.k; k0 += len) {
    len = chunkLength(it.w, it.k, k0);
    float scale[kRows];
    f(k0, len, chunkScales(it.w, it.row, kRows, k0, scale));
  }
}

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
        stagePair<type.value>(data + detail::bytesOf(type.value, size_t(a)),
                              data + detail::bytesOf(type.value, size_t(b)), len, dst);
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

// A direct item (rows row[0 .. 4), read in place): its tokens (at most
// kDirectTokens512) in one tile of the next width up from {1, 2, 4, 6, 8,
// 12}, or two of 8.
constexpr int64_t kDirectTokens512 = 16;
template <WeightType W> MOE_TARGET_AVX512 void directAvx512Typed(const Item &it) {
  forChunks(it, [&](int64_t k0, int64_t len, const float *scale) MOE_TARGET_AVX512 {
    // Addressed through the weight's run-time type, one row at a time: with
    // W the compiler loaded the four row indices as one vector right after
    // the caller's four stores (a failed store forward), which cost batch-1
    // decodes 3%.
    PairsInPlace<2, W> rows;
    for (int i = 0; i < 4; ++i)
      rows.row[i] = static_cast<const char *>(it.w.data) +
                    detail::bytesOf(it.w.type, size_t(it.row[i] * it.k + k0));
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

MOE_TARGET_AVX512 void directAvx512(const Item &it) {
  withType(it.w.type, [&](auto type) { directAvx512Typed<type.value>(it); });
}

// --- items through a TileFn (direct items; buffered ones on AVX2 and portable) ---

// Points r[i] at chunk [k0, k0 + len) of row row[i] of w as f32 for i <
// kRows (the first `rows` distinct, the rest repeating the last): read in
// place, or converted into buf + i * kChunk.
void stageRows(ConvertFn convert, Weight w, const int64_t *row, int64_t rows, int64_t k,
               int64_t k0, int64_t len, float *buf, const void **r) {
  for (int64_t i = 0; i < kRows; ++i) {
    const int64_t first = row[i] * k + k0;
    if (w.type == WeightType::F32) {
      r[i] = static_cast<const float *>(w.data) + first;
      continue;
    }
    if (i < rows) {
      prefetchNext(w, first, k, k0);
      convert(w, first, len, buf + i * kChunk);
    }
    r[i] = buf + std::min(i, rows - 1) * kChunk;
  }
}

// The tiles, conversion and finish of one instruction set. Up to
// directTokens tokens the direct tile reads directRows rows straight from
// memory and converts them in registers (again for each group of tokens:
// cheap next to reading them from memory); more tokens convert a chunk once
// into an L1 buffer: `buffered` where the instruction set has its own
// buffered item, else stageRows, `tile` and `finish`.
struct LinearKernels {
  TileFn tile, directTile;
  int64_t directRows, directTokens;
  ConvertFn convert;
  FinishFn finish;
  ItemFn buffered, direct; ///< or null: itemByTiles
};

// An item through the kernels' tiles: acc holds every (token, row)'s lanes
// over the chunks, summed into out at the end.
void itemByTiles(const LinearKernels &kernels, const Item &it, bool direct) {
  const Weight &w = it.w;
  std::memset(it.acc, 0, size_t(it.tokens * kRows * kLanes) * sizeof(float));
  forChunks(it, [&](int64_t k0, int64_t len, const float *scale) {
    const void *r[kRows];
    if (!direct)
      stageRows(kernels.convert, w, it.row, it.rows, it.k, k0, len, it.buf, r);
    else // read in place
      for (int64_t i = 0; i < kernels.directRows; ++i)
        r[i] = static_cast<const char *>(w.data) +
               detail::bytesOf(w.type, size_t(it.row[i] * it.k + k0));
    (direct ? kernels.directTile : kernels.tile)(it.x + k0, it.k, it.tokens, r,
                                                 direct ? w.type : WeightType::F32, scale, len,
                                                 it.acc);
  });
  for (int64_t t = 0; t < it.tokens; ++t) {
    float *out = it.out + t * it.n;
    if (!direct && it.rows == kRows) { // rows row[0] .. row[0] + kRows - 1
      kernels.finish(&it.acc[t * kRows * kLanes], it.bias + it.row[0], out + it.row[0]);
      continue;
    }
    for (int64_t i = 0; i < it.rows; ++i)
      out[it.row[i]] = lanesSum(&it.acc[(t * kRows + i) * kLanes]) + it.bias[it.row[i]];
  }
}

LinearKernels kernelsFor(Isa level) {
  switch (level) {
  case Isa::Amx: // AMX serves W8A8 only (LinearInt8.cpp)
  case Isa::Avx512:
    // Four rows a quarter of a matrix apart, two pairs in two registers: two
    // independent multiply-add chains (one chain, four cycles a step, made
    // an int8 GEMV latency-bound) over four sequential streams a thread.
    // Whole decodes of the benchmark model with 2 threads on a Xeon (Granite
    // Rapids class) against AVX2's one pair: bf16 1.16x, int8 1.33x (0.98
    // and 0.83 of the triad roofline). Two pairs of *adjacent* rows had run
    // 1.14x and 1.05x slower than AVX2: adjacent rows read together, the
    // pattern this file's history warns of. Up to 16 tokens
    // (a batch's tokens per expert): at 10-12 tokens 1.2-1.5x the buffered
    // path's speed over bf16 matrices larger than the caches, with 2 threads
    // on the same Xeon (the AVX2 tiles: within 6% either way). All of an
    // item's tokens in one pass rather than 6, 4, 2, 1 at a time: decode
    // batch 64 1.05x (the experts' items have 1-16 tokens).
    return {nullptr, nullptr, 4, kDirectTokens512, nullptr, nullptr, bufferedAvx512, directAvx512};
  case Isa::Avx2:
    return {tileAvx2<kRows>, tileAvx2<2>, 2, 8, convertAvx2, finishAvx2, nullptr, nullptr};
  case Isa::Portable:
    break;
  }
  return {tilePortable<kRows>, tilePortable<2>, 2, 8, convertPortable, finishPortable, nullptr,
          nullptr};
}

} // namespace
void linearGroup(const LinearProblem *problems, size_t count) {
  const Isa level = isa();
  const bool avx2 = level >= Isa::Avx2;
  const LinearKernels kernels = kernelsFor(level);
  const int64_t directRows = kernels.directRows;
  // Per problem: its bias as f32, whether its tile reads the weight
  // directly (few tokens), its row blocks and where its work items start in
  // the flat list of (problem, token block, row block).
  struct Prepared {
    std::vector<float> bias;
    bool direct = false;
    int64_t rowBlocks = 0, firstItem = 0;
    detail::Int8Rows int8x; // W8A8: x quantized
  };
  std::vector<Prepared> prep(count);
  int64_t items = 0;
  bool anyBuffered = false;
  for (size_t i = 0; i < count; ++i) {
    const LinearProblem &p = problems[i];
    Prepared &q = prep[i];
    q.bias.assign(size_t(p.n), 0.0f);
    if (p.bias)
      detail::toF32(*p.bias, 0, size_t(p.n), q.bias.data());
    q.direct = p.tokens <= kernels.directTokens && (avx2 || p.w.type == WeightType::F32);
    if (p.w.int8Activations)
      q.int8x = detail::quantizeRows(p.x, p.tokens, p.k);
    else
      anyBuffered |= !q.direct;
    const int64_t rowsPerItem = q.direct ? directRows : kRows;
    q.rowBlocks = (p.n + rowsPerItem - 1) / rowsPerItem;
    q.firstItem = items;
    items += (p.tokens + kTokens - 1) / kTokens * q.rowBlocks;
  }
  // Threads take contiguous runs of items of equal work (multiply-adds), so
  // a thread still reads its weights in order while experts with more
  // tokens do not leave the other idle. Items of one token block weigh the
  // same: a span per token block (work and item before it) locates the item
  // where a given amount of work starts.
  struct Span {
    int64_t work, item, itemWork;
  };
  std::vector<Span> spans;
  int64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const LinearProblem &p = problems[i];
    const int64_t rowsPerItem = prep[i].direct ? directRows : kRows;
    for (int64_t t0 = 0; t0 < p.tokens; t0 += kTokens) {
      const Span span{total, prep[i].firstItem + t0 / kTokens * prep[i].rowBlocks,
                      std::min(kTokens, p.tokens - t0) * rowsPerItem * p.k};
      spans.push_back(span);
      total += span.itemWork * prep[i].rowBlocks;
    }
  }
  // The first item that starts at or after `work`.
  auto itemAt = [&](int64_t work) {
    if (work >= total)
      return items;
    auto s = std::upper_bound(spans.begin(), spans.end(), work,
                              [](int64_t w, const Span &sp) { return w < sp.work; }) - 1;
    return s->item + (work - s->work + s->itemWork - 1) / s->itemWork;
  };
  // kRunsPerThread runs per thread: long enough to stream weights in order,
  // short enough that a thread the machine does not run holds little back.
  const int64_t runs = total >= kParallelWork ? kernelThreads() * kRunsPerThread : 1;
  parallelChunks(runs, [&](Chunks &chunks) {
    std::vector<float> buf(anyBuffered ? kBufFloats : 0);
    std::vector<float> acc(kTokens * kRows * kLanes);
    size_t pi = 0;
    // Outputs of different items are disjoint: no barrier needed. Items of
    // one problem are ordered (token block, row block), so a thread's next
    // item is usually the next row block (see the prefetch below).
    for (int64_t run; chunks.next(run);) {
      const int64_t end = itemAt(total * (run + 1) / runs);
      for (int64_t item = itemAt(total * run / runs); item < end; ++item) {
        while (pi + 1 < count && prep[pi + 1].firstItem <= item)
          ++pi;
        while (prep[pi].firstItem > item)
          --pi;
        const LinearProblem &p = problems[pi];
        const Prepared &q = prep[pi];
        const int64_t k = p.k, n = p.n;
        const Weight w = p.w;
        const int64_t t0 = (item - q.firstItem) / q.rowBlocks * kTokens;
        const int64_t blockTokens = std::min(kTokens, p.tokens - t0);
        // The item's rows (accumulator slot i is row[i]), increasing: the
        // first `rows` exist, the rest repeat the last of them (computed,
        // not stored).
        int64_t row[kRows], rows;
        const int64_t block = (item - q.firstItem) % q.rowBlocks;
        if (q.direct) {
          // Rows j, j + n / d, j + 2 n / d, ... (d = directRows), straight
          // from the weight: over its run of items a thread reads d
          // sequential streams a (1 / d)th of a matrix apart, which the
          // prefetchers follow best (two streams half a matrix apart: 1.6x
          // the bandwidth of four adjacent rows read together on a 2-core
          // Zen 3 VM, 1.3x that of one row at a time).
          for (int64_t i = 0; i < directRows; ++i)
            row[i] = block + i * q.rowBlocks;
          rows = 0;
          while (rows < directRows && row[rows] < n)
            ++rows;
          for (int64_t i = rows; i < kRows; ++i)
            row[i] = row[rows - 1];
        } else {
          const int64_t n0 = block * kRows;
          rows = std::min(kRows, n - n0);
          for (int64_t i = 0; i < kRows; ++i)
            row[i] = n0 + std::min(i, rows - 1);
        }
        if (w.int8Activations) { // integer sums, the rows read in place
          detail::linearInt8(q.int8x, t0, blockTokens, w, k, row, rows, q.bias.data(), p.out, n);
          continue;
        }
        const Item it{p.x + t0 * k, blockTokens, k, n, w, row, rows, q.bias.data(),
                      p.out + t0 * n, buf.data(), acc.data()};
        if (const ItemFn own = q.direct ? kernels.direct : kernels.buffered)
          own(it);
        else
          itemByTiles(kernels, it, q.direct);
      }
    }
  });
}

void linear(const float *x, int64_t tokens, int64_t k, Weight w, int64_t n,
            const Weight *bias, float *out) {
  const LinearProblem p{x, tokens, k, w, n, bias, out};
  linearGroup(&p, 1);
}

} // namespace moe::cpu
