//===- Linear.cpp - out = x w^T (+ bias), blocked and multi-threaded ------===//
//
// Work items are (problem, block of kTokens tokens, block of kRows output
// rows; kPanelItemRows for a weight in panels, LinearPanels.cpp), shared by
// the threads of one parallel region (linearGroup runs many
// problems, e.g. every routed expert, in one region). An item walks k in
// chunks of kChunk (cut at scale-group ends for int8/int4). Up to a few
// tokens (LinearKernels::directTokens), a direct tile (four rows a quarter
// of a matrix apart on AVX2 and AVX-512) reads 16-bit or quantized weights
// straight from memory and converts (and scales) them in registers, where
// its sums stay until they are stored: the decode GEMV reads each weight
// byte once, in sequential streams per thread, and dequantization costs no
// memory traffic. For more tokens, each
// chunk of the kRows rows is converted to f32 once into a per-thread L1
// buffer and swept by every token of the block (whose x chunks stay in L2),
// each token's sums in registers over the chunk (on AVX-512,
// LinearAvx512.cpp, the buffer holds pairs of rows interleaved). LinearDetail.h
// holds the work item and the sizes both files use.
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
// the ISA (AVX2 or AVX-512; the portable build rounds differently, but over
// panel weights) or its position in a
// block: a token's result does not depend on what it is batched with (the
// serving engine relies on this), and equal weight rows give equal outputs.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/LaneSums.h"
#include "kernels/cpu/LinearDetail.h"
#include "kernels/cpu/LinearInt8.h"
#include "kernels/cpu/PrefetchLines.h"
#include "kernels/cpu/Scratch.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/WeightDetail.h"
#include "kernels/cpu/Vector.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

namespace moe::cpu {
namespace {

using namespace detail;

// Rows and tokens of an AVX2 tile in the 16 registers (stepAvx2): 4 x 3
// accumulators beside the 3 tokens' x and one weight vector at a time
// (f32, bf16, f16 and int8 rows); 4 x 2 beside the 4 rows for the types
// whose conversion needs constants in registers (fp8, int4).
constexpr int64_t kAvx2Rows = 4, kTileTokens = 3, kTileTokensWithConstants = 2;
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

// v, kept in a register: the compiler would otherwise fold a load used
// several times into each multiply-add as a memory operand, and the tiles
// below are bound by loads (two 32-byte loads a cycle on Zen 3 against two
// multiply-adds). The operand is a local copy, not an element of the
// caller's array: an array element as an asm operand kept the array on the
// stack, and GCC stored every converted weight vector there at every step.
template <class V> __attribute__((target("avx2"), always_inline)) inline V inRegister(V v) {
  asm("" : "+x"(v));
  return v;
}

// Whether the R weight vectors of an R x T tile stay in the 16 registers
// beside its sums and one x (stepAvx2); if not, its T x vectors do.
constexpr int kAvx2Registers = 16;
template <int R, int T> constexpr bool rowsStayAvx2() { return R * T + R + 1 <= kAvx2Registers; }

// load8 for a tile with no register left for a constant (its rows loaded
// one at a time beside x, rowsStayAvx2): bf16 widened and shifted, two
// operations where load8 takes one, but load8's byte shuffle needs its mask
// in a register. As a memory operand the shuffle ran a 4 x 3 tile at half
// the speed on a Zen 3 (an L1-resident throwaway benchmark).
template <WeightType W>
__attribute__((target("avx2,f16c"))) inline __m256 load8Lean(const void *p) {
  if constexpr (W == WeightType::BF16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i *>(p))), 16));
  else
    return load8<W>(p);
}

// One step of a tile: a[t][i] += x(t) * w(i) for R rows and T tokens, with
// each weight vector w(i) and each token's x(t) loaded once (R + T loads
// for R x T multiply-adds). The R weight vectors stay in registers while
// the tokens go by if they fit beside the sums and one x; otherwise the T
// x vectors do, and the rows go by one at a time.
template <int R, int T, class W, class X>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void stepAvx2(__m256 (&a)[T][R],
                                                                              W &&w, X &&x) {
  if constexpr (rowsStayAvx2<R, T>()) {
    __m256 wv[R];
    for (int i = 0; i < R; ++i) {
      wv[i] = inRegister(w(i));
    }
    for (int t = 0; t < T; ++t) {
      const __m256 xv = inRegister(x(t));
      for (int i = 0; i < R; ++i)
        a[t][i] = _mm256_fmadd_ps(xv, wv[i], a[t][i]);
    }
  } else {
    static_assert(R * T + T + 1 <= kAvx2Registers,
                  "a tile's sums, x and one row fit the registers");
    __m256 xv[T];
    for (int t = 0; t < T; ++t) {
      xv[t] = inRegister(x(t));
    }
    for (int i = 0; i < R; ++i) {
      const __m256 wv = inRegister(w(i));
      for (int t = 0; t < T; ++t)
        a[t][i] = _mm256_fmadd_ps(xv[t], wv, a[t][i]);
    }
  }
}

// a[t][i] += x_t[p] * r_i[p] lane by lane (p = lane mod 8) over len
// elements, for R rows r_i of type W and T tokens. The sequence of
// operations for one (token, row) does not depend on R or T.
template <int R, int T, WeightType W, bool Stream>
__attribute__((target("avx2,fma,f16c"))) inline void sumChunkAvx2(const float *x, int64_t ldx,
                                                                  const void *const *r,
                                                                  int64_t len, __m256 (&a)[T][R]) {
  const char *rows[R];
  for (int i = 0; i < R; ++i)
    rows[i] = static_cast<const char *>(r[i]);
  auto load = [&](int i, int64_t p, int64_t n) __attribute__((target("avx2,fma,f16c"))) {
    const char *at = rows[i] + detail::bytesOf(W, size_t(p));
    if (n != kLanes)
      return load8<W>(at, n);
    // Rows loaded one at a time beside x: no register left for a constant.
    return rowsStayAvx2<R, T>() ? load8<W>(at) : load8Lean<W>(at);
  };
  auto step = [&](int64_t p) __attribute__((target("avx2,fma,f16c"), always_inline)) {
    stepAvx2<R, T>(
        a, [&](int i) __attribute__((target("avx2,fma,f16c"))) { return load(i, p, kLanes); },
        [&](int t) __attribute__((target("avx2,fma,f16c"))) {
          return _mm256_loadu_ps(x + t * ldx + p);
        });
  };
  // A direct tile streams its rows from memory: it asks for the line
  // kStreamAhead bytes ahead of each row, once per line.
  auto prefetch = [&](int64_t p) {
    for (int i = 0; i < R; ++i)
      _mm_prefetch(rows[i] + detail::bytesOf(W, size_t(p)) + kStreamAhead, _MM_HINT_T0);
  };
  int64_t p = 0;
  if constexpr (Stream) {
    // A line's steps in a loop of their own (not written out: four steps
    // at a time GCC spilled one of a 4 x 3 tile's sums). A branch to the
    // prefetches in every step had GCC keep that tile's 12 sums on the
    // stack, a store each a step; the one-token int8 tile ran 0.87-0.94x as
    // fast with it as in this form, from memory (make bench-ab-kernels).
    constexpr int64_t kLine = 64, perLine = kLanes * kLine / int64_t(detail::bytesOf(W, kLanes));
    for (; p + perLine <= len; p += perLine) {
      prefetch(p);
#pragma GCC unroll 1
      for (int64_t s = 0; s < perLine; s += kLanes)
        step(p + s);
    }
    if (p + kLanes <= len) // the last, partial line
      prefetch(p);
  }
  for (; p + kLanes <= len; p += kLanes)
    step(p);
  if (p < len) // missing lanes are 0.0 in both operands
    stepAvx2<R, T>(
        a, [&](int i) __attribute__((target("avx2,fma,f16c"))) { return load(i, p, len - p); },
        [&](int t) __attribute__((target("avx2,fma,f16c"))) {
          return _mm256_maskload_ps(x + t * ldx + p, tailMask(len - p));
        });
}

// How many tokens a tile of kAvx2Rows rows of type W holds in the 16
// registers. Every AVX2 tile, buffered or direct, takes four rows (direct
// items took two 16-bit rows, 4 tokens a tile, until 2026-12-03). Direct
// bf16, f16 and int8 tiles took 2 tokens until 2026-12-03 (late): 3 ran
// the expert GEMMs of a batch of 64 (1-16 tokens an expert) 1.11x (bf16)
// and 1.15x (int8) as fast on a 2-core Zen 3 (make bench-ab-kernels;
// docs/performance.md).
template <WeightType W> constexpr int tileTokensAvx2() {
  return W == WeightType::F8 || W == WeightType::I4 ? kTileTokensWithConstants : kTileTokens;
}

// f(t, T) for tokens [t, t + T): a tile's worth (tileTokensAvx2) at a time,
// then the rest in tiles of two and one; T is a std::integral_constant. A
// rest of one after tiles of three takes the last of them along as two
// tiles of two: a one-token tile has only four sums to hide the latency of
// its multiply-adds with.
template <WeightType W, class F> void byTileTokens(int64_t tokens, F &&f) {
  constexpr int Step = tileTokensAvx2<W>();
  static_assert(Step == 2 || Step == 3, "the rest below takes tiles of two and one");
  int64_t full = tokens / Step;
  if (Step == 3 && tokens % 3 == 1 && full > 0)
    --full;
  int64_t t = 0;
  for (; t < Step * full; t += Step)
    f(t, std::integral_constant<int, Step>());
  for (; t + 2 <= tokens; t += 2)
    f(t, std::integral_constant<int, 2>());
  if (t < tokens)
    f(t, std::integral_constant<int, 1>());
}

// Tokens [t, t + T) of a buffered item over the chunk [k0, k0 + len) of
// its rows q0 .. q0 + 3, staged as f32 in r (converted, or f32 weights in
// place). The sums start from zero on the first chunk, wait in acc
// (slot (token, row) of kLanes floats) between chunks, and after the last
// are summed lane by lane in registers and stored with the bias: the
// operations of a zeroed acc, a store and reload between chunks and a
// lane sum of the reloaded slots, without the memset, the round trip and
// the scalar stores (a fifth of a prefill's expert GEMMs over their
// 256-element down rows). With a scale (quantized rows: len never crosses
// a scale group) the chunk's sums start from zero and are added times
// scale[i].
template <int T>
__attribute__((target("avx2,fma,f16c"))) void bufferedTileAvx2(const Item &it,
                                                               const void *const *r,
                                                               const float *scale, int64_t t,
                                                               int64_t q0, int64_t k0,
                                                               int64_t len) {
  constexpr int R = kAvx2Rows;
  const bool first = k0 == 0, last = k0 + len == it.k;
  auto slot = [&](int u, int i) { return it.acc + ((t + u) * kRows + q0 + i) * kLanes; };
  __m256 a[T][R];
  for (int u = 0; u < T; ++u)
    for (int i = 0; i < R; ++i)
      a[u][i] = scale || first ? _mm256_setzero_ps() : _mm256_loadu_ps(slot(u, i));
  sumChunkAvx2<R, T, WeightType::F32, false>(it.x + t * it.k + k0, it.k, r, len, a);
  if (scale)
    for (int u = 0; u < T; ++u)
      for (int i = 0; i < R; ++i)
        a[u][i] = _mm256_fmadd_ps(a[u][i], _mm256_set1_ps(scale[q0 + i]),
                                  first ? _mm256_setzero_ps() : _mm256_loadu_ps(slot(u, i)));
  if (!last) {
    for (int u = 0; u < T; ++u)
      for (int i = 0; i < R; ++i)
        _mm256_storeu_ps(slot(u, i), a[u][i]);
    return;
  }
  // Rows row[0] + q0 ...: the item's rows are consecutive.
  const int64_t row0 = it.row[0] + q0, live = std::min<int64_t>(R, it.rows - q0);
  for (int u = 0; u < T; ++u) {
    const __m128 sums = laneSums4(a[u][0], a[u][1], a[u][2], a[u][3]);
    float *out = it.out + (t + u) * it.n + row0;
    if (live == R) {
      _mm_storeu_ps(out, _mm_add_ps(sums, _mm_loadu_ps(it.bias + row0)));
      continue;
    }
    alignas(16) float part[R];
    _mm_store_ps(part, sums);
    for (int64_t i = 0; i < live; ++i)
      out[i] = part[i] + it.bias[row0 + i];
  }
}

// Tokens [t, t + T) of a direct item (rows row[0 .. 4) read in place):
// their sums stay in registers over every chunk and go to the output, with
// the bias, at the end. The operations of bufferedTileAvx2 chunk after
// chunk, so the same bits, without its stores and reloads of the
// accumulators between chunks and its calls per chunk: for a decode GEMV
// over an expert's rows, a whole row is one chunk.
template <int T, WeightType W>
__attribute__((target("avx2,fma,f16c"))) void directTokensAvx2(const Item &it, int64_t t) {
  constexpr int R = kAvx2Rows;
  __m256 total[T][R];
  for (int u = 0; u < T; ++u)
    for (int i = 0; i < R; ++i)
      total[u][i] = _mm256_setzero_ps();
  const float *x = it.x + t * it.k;
  forChunks(it, [&](int64_t k0, int64_t len,
                    const float *scale) __attribute__((target("avx2,fma,f16c"))) {
    const char *data = static_cast<const char *>(it.w.data);
    const void *r[R];
    for (int i = 0; i < R; ++i)
      r[i] = data + detail::bytesOf(W, size_t(it.row[i] * it.k + k0));
    // The chunk's sums run in a local array: `total` outlives this call,
    // and __m256 may alias the x loads, so summing into it directly stored
    // every accumulator at every step (8 stores a step for 2 rows x 4
    // tokens).
    __m256 a[T][R];
    for (int u = 0; u < T; ++u)
      for (int i = 0; i < R; ++i)
        a[u][i] = scale ? _mm256_setzero_ps() : total[u][i];
    sumChunkAvx2<R, T, W, true>(x + k0, it.k, r, len, a);
    for (int u = 0; u < T; ++u)
      for (int i = 0; i < R; ++i)
        total[u][i] =
            scale ? _mm256_fmadd_ps(a[u][i], _mm256_set1_ps(scale[i]), total[u][i]) : a[u][i];
  });
  for (int u = 0; u < T; ++u) {
    alignas(16) float sums[4];
    _mm_store_ps(sums, laneSums4(total[u][0], total[u][1], total[u][2], total[u][3]));
    float *out = it.out + (t + u) * it.n;
    for (int64_t i = 0; i < it.rows; ++i)
      out[it.row[i]] = sums[i] + it.bias[it.row[i]];
  }
}

// Rows of an AVX2 direct item, of every type: four a quarter of a matrix
// apart, four independent multiply-add chains. For int8, two (each step
// waiting for the last) had kept the GEMV at 11-14 GB/s, four 15-19 GB/s,
// over a 64 MB matrix on a 2-core Zen 3 VM. 16-bit rows were read two at a
// time, half a matrix apart, until the tile stopped storing its converted
// weights at every step (inRegister): four then ran the bf16 decode of the
// benchmark model 1.24-1.26x as fast on a 2-core Zen 3 VM (its expert down
// rows, 256 elements, 1.25-1.6x), and batches of 4 and 8 tokens an expert
// as fast.
constexpr int64_t kDirectRowsAvx2 = kAvx2Rows; // one tile's rows
// Tokens up to which an AVX2 item reads its rows directly (tiles of 4 rows
// x 3 tokens, each pass converting the rows again). 8 until 2026-12-03;
// with the tile's stores gone, 16: a throwaway linearGroup benchmark of 64
// experts x 16 layers (512 x 1024, bf16, 2 threads, from memory) on a
// 2-core Zen 3 VM ran 12 tokens an expert at 117-123 GFLOP/s against 105
// buffered, 16 at 127 against 113; at 24 and 32 tokens the buffered path
// stays ahead (133-136 against 126-129 read directly). Decode batch 64 of
// the benchmark model: 0.97x the inter-token time (6 rounds). With tiles
// of 3 tokens, 21 ran 17-21 tokens an expert 1.02-1.10x as fast from
// memory but 20 tokens at 0.90x (bf16) and 0.94x (int8) with the weights
// in cache, where converting a chunk once wins: kept at 16.
constexpr int64_t kDirectTokensAvx2 = 16;

// A direct item on AVX2, a tile's worth of tokens at a time.
void directAvx2(const Item &it) {
  withType(it.w.type, [&](auto w) {
    constexpr WeightType W = w.value;
    byTileTokens<W>(it.tokens,
                    [&](int64_t t, auto T) { directTokensAvx2<T.value, W>(it, t); });
  });
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

// --- prefetch (AVX2 and portable), lane sums (portable) ---

// Requests nextLines. Converting a chunk reads one short stream at a time,
// too little in flight to keep the memory busy; prefetching the next chunk
// of every row of the block while converting this one made a bf16 GEMV about
// 1.4x faster on a 2-core VM.
void prefetchNext(const Weight &w, int64_t first, int64_t k, int64_t k0) {
  const Lines next = nextLines(w, first, k, k0);
  prefetchLines(next.p, next.bytes);
}

// Fixed-order sum of one accumulator's lanes.
float lanesSum(const float *a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// --- staged rows (buffered items on AVX2 and portable) ---

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

// A buffered item on AVX2: each chunk of its rows converted once into the
// buffer, then swept by the tokens a tile's worth at a time, four rows at a
// time (the rows past the last distinct one are not computed).
void bufferedAvx2(const Item &it) {
  forChunks(it, [&](int64_t k0, int64_t len, const float *scale) {
    const void *r[kRows];
    stageRows(convertAvx2, it.w, it.row, it.rows, it.k, k0, len, it.buf, r);
    for (int64_t q0 = 0; q0 < it.rows; q0 += kAvx2Rows)
      byTileTokens<WeightType::F32>(it.tokens, [&](int64_t t, auto T) {
        bufferedTileAvx2<T.value>(it, r + q0, scale, t, q0, k0, len);
      });
  });
}

// --- items through a TileFn (the portable build's) ---

// A direct tile and how many rows (a 1 / rows-th of a matrix apart) it
// reads at once.
struct DirectTile {
  TileFn tile; ///< or null: the instruction set's own direct item
  int64_t rows;
};

// The items of one instruction set. Up to directTokens tokens a direct
// tile reads its rows straight from memory and converts them in registers
// (again for each group of tokens: cheap next to reading them from memory);
// more tokens convert a chunk once into an L1 buffer. `buffered` and
// `direct` are the instruction set's own items; where null, itemByTiles
// runs `tile` (or the direct tile) over rows staged with `convert`.
struct LinearKernels {
  TileFn tile;
  DirectTile directTile;
  int64_t directTokens;
  ConvertFn convert;
  ItemFn buffered, direct; ///< or null: itemByTiles
};

// An item through the kernels' tiles: acc holds every (token, row)'s lanes
// over the chunks, summed into out at the end.
void itemByTiles(const LinearKernels &kernels, const Item &it, bool direct) {
  const Weight &w = it.w;
  std::memset(it.acc, 0, size_t(it.tokens * kRows * kLanes) * sizeof(float));
  const DirectTile &d = kernels.directTile;
  forChunks(it, [&](int64_t k0, int64_t len, const float *scale) {
    const void *r[kRows];
    if (!direct)
      stageRows(kernels.convert, w, it.row, it.rows, it.k, k0, len, it.buf, r);
    else // read in place
      for (int64_t i = 0; i < d.rows; ++i)
        r[i] = static_cast<const char *>(w.data) +
               detail::bytesOf(w.type, size_t(it.row[i] * it.k + k0));
    (direct ? d.tile : kernels.tile)(it.x + k0, it.k, it.tokens, r,
                                     direct ? w.type : WeightType::F32, scale, len, it.acc);
  });
  for (int64_t t = 0; t < it.tokens; ++t) {
    float *out = it.out + t * it.n;
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
    return {nullptr, {nullptr, 4}, kDirectTokens512, nullptr, bufferedAvx512, directAvx512};
  case Isa::Avx2:
    return {nullptr, {nullptr, kDirectRowsAvx2}, kDirectTokensAvx2, nullptr, bufferedAvx2,
            directAvx2};
  case Isa::Portable:
    break;
  }
  return {tilePortable<kRows>, {tilePortable<2>, 2}, 8, convertPortable, nullptr, nullptr};
}

// The items [next, end) of one of linearGroup's runs, in one word: the
// run's thread claims them one at a time, and once every run has a thread,
// one done with its own run's items takes the upper half of what another
// has left, each with a compare-and-swap.
// Runs stay long, so each thread still streams its weights in order; only
// their ends are shared. (Shorter runs had shortened the waits at a
// region's end too, but cost decode 7-16%: shorter weight streams.) The
// run's chunk ends only when the stolen items are done too: `thieves`
// holds its thread until then, so the region's end still follows every
// item.
class alignas(64) ItemRange {
public:
  void reset(int64_t next, int64_t end) { word_.store(pack(next, end), std::memory_order_relaxed); }
  /// The next item, or -1 when none is left.
  int64_t claim() {
    uint64_t w = word_.load(std::memory_order_acquire);
    while (nextOf(w) < endOf(w))
      if (word_.compare_exchange_weak(w, w + (uint64_t(1) << 32), std::memory_order_acq_rel))
        return nextOf(w);
    return -1;
  }
  int64_t left() const {
    const uint64_t w = word_.load(std::memory_order_relaxed);
    return endOf(w) - nextOf(w);
  }
  /// The upper half of the items left (at least 2 left): [first, end),
  /// empty when the run's thread took them first. A non-empty half must be
  /// followed by stolenDone() once its items are computed.
  std::pair<int64_t, int64_t> stealHalf() {
    thieves_.fetch_add(1, std::memory_order_acq_rel);
    uint64_t w = word_.load(std::memory_order_acquire);
    for (;;) {
      const int64_t next = nextOf(w), end = endOf(w);
      if (end - next < 2)
        break;
      const int64_t mid = next + (end - next + 1) / 2;
      if (word_.compare_exchange_weak(w, pack(next, mid), std::memory_order_acq_rel))
        return {mid, end};
    }
    stolenDone();
    return {0, 0};
  }
  void stolenDone() { thieves_.fetch_sub(1, std::memory_order_acq_rel); }
  /// Waits until no stolen item of this run is still being computed. Out
  /// of line, so that profiles show this wait as such.
  __attribute__((noinline)) void awaitThieves() const {
    while (thieves_.load(std::memory_order_acquire) != 0)
      __builtin_ia32_pause();
  }

private:
  static uint64_t pack(int64_t next, int64_t end) { return uint64_t(next) << 32 | uint64_t(end); }
  static int64_t nextOf(uint64_t w) { return int64_t(w >> 32); }
  static int64_t endOf(uint64_t w) { return int64_t(w & 0xffffffffu); }
  std::atomic<uint64_t> word_{0};
  std::atomic<int> thieves_{0};
};

} // namespace
void linearGroup(const LinearProblem *problems, size_t count) {
  const Isa level = isa();
  const bool avx2 = level >= Isa::Avx2;
  const LinearKernels kernels = kernelsFor(level);
  // Per problem: its bias as f32 (its own, or zeros), whether its tile
  // reads the weight directly (few tokens), the rows of an item, its row
  // blocks and where its work items start in the flat list of (problem,
  // token block, row block).
  struct Prepared {
    std::vector<float> ownBias;
    const float *bias = nullptr;
    bool direct = false;
    int64_t rowsPerItem = 0, rowBlocks = 0, firstItem = 0;
    detail::Int8Rows int8x; // W8A8 and W4A8: x quantized
    // x and its rows as the items read them: a panel weight's as given,
    // the others' gathered (below) when they come as xRows.
    const float *x = nullptr;
    const int32_t *xRows = nullptr;
  };
  std::vector<Prepared> prep(count);
  // The rows named by xRows of problems whose kernels read x at a fixed
  // stride, copied in one parallel region for all of them (the permute of
  // a prefill's routed tokens is tens of MB). A problem naming the same rows
  // as the one before it (an expert's unfused gate and up) shares its copy.
  auto gathered = [&](size_t i) { return problems[i].xRows && !problems[i].w.panels(); };
  auto ownCopy = [&](size_t i) {
    const LinearProblem &p = problems[i];
    return gathered(i) && !(i > 0 && gathered(i - 1) && problems[i - 1].x == p.x &&
                            problems[i - 1].xRows == p.xRows &&
                            problems[i - 1].tokens == p.tokens && problems[i - 1].k == p.k);
  };
  thread_local std::vector<float> gatheredBuf;
  int64_t gatheredRows = 0, gatheredFloats = 0, widestK = 0;
  for (size_t i = 0; i < count; ++i)
    if (ownCopy(i)) {
      gatheredRows += problems[i].tokens;
      gatheredFloats += problems[i].tokens * problems[i].k;
      widestK = std::max(widestK, problems[i].k);
    }
  struct RowCopy {
    const float *from;
    int64_t k;
    float *to;
  };
  std::vector<RowCopy> copies;
  copies.reserve(size_t(gatheredRows));
  float *next = scratch(gatheredBuf, gatheredFloats);
  for (size_t i = 0; i < count; ++i) {
    const LinearProblem &p = problems[i];
    prep[i].x = p.x;
    prep[i].xRows = p.xRows;
    if (!gathered(i))
      continue;
    prep[i].xRows = nullptr;
    if (!ownCopy(i)) {
      prep[i].x = prep[i - 1].x;
      continue;
    }
    prep[i].x = next;
    for (int64_t t = 0; t < p.tokens; ++t, next += p.k)
      copies.push_back({p.x + int64_t(p.xRows[t]) * p.k, p.k, next});
  }
  forRows(int64_t(copies.size()), widestK, [&](int64_t r) {
    const RowCopy &c = copies[size_t(r)];
    std::copy_n(c.from, c.k, c.to);
  });
  // The biases of problems without one: zeros grown by the calling thread
  // before its regions and never written, so the helpers' copies of their
  // lines stay valid. A vector of n zeros a call (128 KB for an LM head)
  // cost its memset, and the helpers' reads of the lines just written.
  thread_local std::vector<float> zeros;
  int64_t widest = 0;
  for (size_t i = 0; i < count; ++i)
    widest = std::max(widest, problems[i].n);
  const float *const zero = scratch(zeros, widest);
  int64_t items = 0;
  bool anyBuffered = false;
  for (size_t i = 0; i < count; ++i) {
    const LinearProblem &p = problems[i];
    Prepared &q = prep[i];
    q.bias = zero;
    if (p.bias) {
      q.ownBias.resize(size_t(p.n));
      detail::toF32(*p.bias, 0, size_t(p.n), q.ownBias.data());
      q.bias = q.ownBias.data();
    }
    q.direct = !p.w.panels() && p.tokens <= kernels.directTokens &&
               (avx2 || p.w.type == WeightType::F32);
    if (p.w.int8Activations) // W8A8 or W4A8
      q.int8x = p.w.type == WeightType::I4 ? detail::quantizeRowsInt4(q.x, p.tokens, p.k)
                                           : detail::quantizeRows(q.x, p.tokens, p.k);
    else
      anyBuffered |= !q.direct && !p.w.panels();
    q.rowsPerItem = p.w.panels() ? kPanelItemRows : q.direct ? kernels.directTile.rows : kRows;
    q.rowBlocks = (p.n + q.rowsPerItem - 1) / q.rowsPerItem;
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
    for (int64_t t0 = 0; t0 < p.tokens; t0 += kTokens) {
      const Span span{total, prep[i].firstItem + t0 / kTokens * prep[i].rowBlocks,
                      std::min(kTokens, p.tokens - t0) * std::min(prep[i].rowsPerItem, p.n) *
                          p.k};
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
  std::unique_ptr<ItemRange[]> ranges(new ItemRange[size_t(runs)]);
  for (int64_t r = 0; r < runs; ++r)
    ranges[r].reset(itemAt(total * r / runs), itemAt(total * (r + 1) / runs));
  parallelChunks(runs, [&](Chunks &chunks) {
    // Each thread's own, kept between regions (allocating and zeroing 32 KB
    // of accumulators per thread and region showed in decode profiles).
    thread_local std::vector<float> bufScratch, accScratch;
    float *const buf = anyBuffered ? scratch(bufScratch, kBufFloats) : nullptr;
    float *const acc = scratch(accScratch, kTokens * kRows * kLanes);
    size_t pi = 0;
    // Moves pi on to the problem of `item` if that starts after pi's.
    auto onToItemsProblem = [&](int64_t item) {
      const size_t was = pi;
      while (pi + 1 < count && prep[pi + 1].firstItem <= item)
        ++pi;
      return pi != was;
    };
    // The item's place (problem pi, token block tb, row block block) and
    // the item that follows it: a run's next item is found by counting,
    // without a division each; any other (a run's first, a stolen one) by
    // dividing.
    int64_t following = -1, tb = 0, block = 0;
    auto locate = [&](int64_t item) {
      if (item == following) {
        if (++block == prep[pi].rowBlocks) {
          block = 0;
          ++tb;
        }
        if (onToItemsProblem(item)) // its first item
          tb = block = 0;
      } else {
        onToItemsProblem(item);
        while (prep[pi].firstItem > item)
          --pi;
        tb = (item - prep[pi].firstItem) / prep[pi].rowBlocks;
        block = (item - prep[pi].firstItem) % prep[pi].rowBlocks;
      }
      following = item + 1;
    };
    // Outputs of different items are disjoint: no barrier needed. Items of
    // one problem are ordered (token block, row block), so a thread's next
    // item is usually the next row block (see the prefetch below).
    auto compute = [&](int64_t item) {
      locate(item);
      const LinearProblem &p = problems[pi];
      const Prepared &q = prep[pi];
      const int64_t k = p.k, n = p.n;
      const Weight w = p.w;
      const int64_t t0 = tb * kTokens;
      const int64_t blockTokens = std::min(kTokens, p.tokens - t0);
      // The item's rows (accumulator slot i is row[i]), increasing: the
      // first `rows` exist, the rest repeat the last of them (computed,
      // not stored).
      int64_t row[kRows], rows;
      if (w.panels()) { // consecutive rows, whole panels
        row[0] = block * kPanelItemRows;
        rows = std::min(kPanelItemRows, n - row[0]);
        detail::panelItem({q.xRows ? q.x : q.x + t0 * k, blockTokens, k, n, w, row, rows, q.bias,
                           p.out + t0 * n, buf, acc, q.xRows ? q.xRows + t0 : nullptr});
        return;
      }
      if (q.direct) {
        // Rows j, j + n / d, j + 2 n / d, ... (d = rowsPerItem), straight
        // from the weight: over its run of items a thread reads d
        // sequential streams a (1 / d)th of a matrix apart, which the
        // prefetchers follow best (two streams half a matrix apart: 1.6x
        // the bandwidth of four adjacent rows read together on a 2-core
        // Zen 3 VM, 1.3x that of one row at a time).
        for (int64_t i = 0; i < q.rowsPerItem; ++i)
          row[i] = block + i * q.rowBlocks;
        rows = 0;
        while (rows < q.rowsPerItem && row[rows] < n)
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
        (w.type == WeightType::I4 ? detail::linearInt4 : detail::linearInt8)(
            q.int8x, t0, blockTokens, w, k, row, rows, q.bias, p.out, n);
        return;
      }
      const Item it{q.x + t0 * k, blockTokens, k, n, w, row, rows, q.bias, p.out + t0 * n,
                    buf, acc};
      if (const ItemFn own = q.direct ? kernels.direct : kernels.buffered)
        own(it);
      else
        itemByTiles(kernels, it, q.direct);
    };
    // Once every run has its thread, one done with its own helps the run
    // with the most items left, while it still holds its own run's chunk:
    // the chunk keeps the region, and `ranges`, alive.
    auto helpOthers = [&] {
      for (;;) {
        ItemRange *most = nullptr;
        int64_t left = 1;
        for (int64_t r = 0; r < runs; ++r)
          if (ranges[r].left() > left) {
            most = &ranges[r];
            left = most->left();
          }
        if (!most)
          return;
        const auto [first, end] = most->stealHalf();
        for (int64_t item = first; item < end; ++item)
          compute(item);
        if (first < end)
          most->stolenDone();
      }
    };
    for (int64_t run; chunks.next(run);) {
      for (int64_t item; (item = ranges[run].claim()) >= 0;)
        compute(item);
      if (chunks.exhausted())
        helpOthers();
      ranges[run].awaitThieves(); // its chunk ends with its last item
    }
  });
}

size_t linearProblemBytes() { return sizeof(LinearProblem); }

void linear(const float *x, int64_t tokens, int64_t k, Weight w, int64_t n,
            const Weight *bias, float *out) {
  const LinearProblem p{x, tokens, k, w, n, bias, out};
  linearGroup(&p, 1);
}

} // namespace moe::cpu
