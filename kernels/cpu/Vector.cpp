//===- Vector.cpp - small vector primitives with ISA dispatch -------------===//
#include "kernels/cpu/Vector.h"
#include "kernels/cpu/LaneSums.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace moe::cpu {
namespace {

float dotPortable(const float *a, const float *b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

// Fixed-order sum of the lanes of s0 + s1.
__attribute__((target("avx2,fma"))) float lanesSum(__m256 s0, __m256 s1) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(s0, s1));
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// dotAvx2 from element i on, given its two accumulators after the steps of
// 16 elements: the last step of 8 into s0, the lanes, the scalar tail.
__attribute__((target("avx2,fma"))) float dotTail(__m256 s0, __m256 s1, const float *a,
                                                  const float *b, int64_t i, int64_t n) {
  for (; i + 8 <= n; i += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  float sum = lanesSum(s0, s1);
  for (; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

// dotTail for four rows at once. With n a multiple of 8 (head dimensions
// are) the four rows' lanes are summed together: the same additions, and
// for a head of 64 most of a row's instructions were its lane sum.
__attribute__((target("avx2,fma"))) void dotTails4(__m256 *s0, const __m256 *s1,
                                                   const float *q, const float *const *row,
                                                   int64_t i, int64_t n, float *out) {
  if (n % 8 != 0) {
    for (int u = 0; u < 4; ++u)
      out[u] = dotTail(s0[u], s1[u], q, row[u], i, n);
    return;
  }
  if (i < n) // the last step of 8
    for (int u = 0; u < 4; ++u)
      s0[u] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(row[u] + i), s0[u]);
  _mm_storeu_ps(out, laneSums4(_mm256_add_ps(s0[0], s1[0]), _mm256_add_ps(s0[1], s1[1]),
                               _mm256_add_ps(s0[2], s1[2]), _mm256_add_ps(s0[3], s1[3])));
}

__attribute__((target("avx2,fma"))) float dotAvx2(const float *a, const float *b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  return dotTail(s0, s1, a, b, i, n);
}

void axpyPortable(float s, const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] += s * x[i];
}

__attribute__((target("avx2,fma"))) void axpyAvx2(float s, const float *x, float *y, int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i)
    y[i] = std::fma(s, x[i], y[i]);
}

// Four rows at a time, each the same operations as dotAvx2 (the query
// vectors loaded once for the four; four independent chains).
__attribute__((target("avx2,fma"))) void dotRowsAvx2(const float *q, const float *rows,
                                                     int64_t stride, int64_t count, int64_t n,
                                                     float *out) {
  int64_t r = 0;
  for (; r + 4 <= count; r += 4) {
    const float *row[4] = {rows + r * stride, rows + (r + 1) * stride, rows + (r + 2) * stride,
                           rows + (r + 3) * stride};
    __m256 s0[4], s1[4];
    for (int u = 0; u < 4; ++u)
      s0[u] = s1[u] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256 qa = _mm256_loadu_ps(q + i), qb = _mm256_loadu_ps(q + i + 8);
      for (int u = 0; u < 4; ++u) {
        s0[u] = _mm256_fmadd_ps(qa, _mm256_loadu_ps(row[u] + i), s0[u]);
        s1[u] = _mm256_fmadd_ps(qb, _mm256_loadu_ps(row[u] + i + 8), s1[u]);
      }
    }
    dotTails4(s0, s1, q, row, i, n, out + r);
  }
  for (; r < count; ++r)
    out[r] = dotAvx2(q, rows + r * stride, n);
}

// dotRowsAvx2's sums for H query heads (H <= 4; n a multiple of 8), a row
// at a time: each row's 16 elements are loaded once for the H heads (the
// heads of a KV group read the same key rows), each head's two
// accumulators keep dotAvx2's order, and the row's H sums come from one
// laneSums4.
template <int H>
__attribute__((target("avx2,fma"))) void dotRowsHeadsAvx2(const float *const *q,
                                                          const float *rows, int64_t stride,
                                                          int64_t count, int64_t n,
                                                          float *const *out) {
  for (int64_t r = 0; r < count; ++r) {
    const float *row = rows + r * stride;
    __m256 s0[4], s1[4];
    for (int h = 0; h < 4; ++h)
      s0[h] = s1[h] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256 ka = _mm256_loadu_ps(row + i), kb = _mm256_loadu_ps(row + i + 8);
      for (int h = 0; h < H; ++h) {
        s0[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + i), ka, s0[h]);
        s1[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + i + 8), kb, s1[h]);
      }
    }
    if (i < n) { // the last step of 8
      const __m256 ka = _mm256_loadu_ps(row + i);
      for (int h = 0; h < H; ++h)
        s0[h] = _mm256_fmadd_ps(_mm256_loadu_ps(q[h] + i), ka, s0[h]);
    }
    alignas(16) float sums[4];
    _mm_store_ps(sums, laneSums4(_mm256_add_ps(s0[0], s1[0]), _mm256_add_ps(s0[1], s1[1]),
                                 _mm256_add_ps(s0[2], s1[2]), _mm256_add_ps(s0[3], s1[3])));
    for (int h = 0; h < H; ++h)
      out[h][r] = sums[h];
  }
}

// axpyRowsAvx2 for H heads (H <= 4), 16 columns at a time kept in
// registers across all rows: each row's 16 columns are loaded once for the
// H heads. Every element of y is the same chain of fused multiply-adds, row
// after row, however the columns are grouped.
template <int H>
__attribute__((target("avx2,fma"))) void axpyRowsHeadsAvx2(const float *const *s,
                                                           const float *rows, int64_t stride,
                                                           int64_t count, int64_t n,
                                                           float *const *y) {
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    __m256 acc[H][2];
    for (int h = 0; h < H; ++h)
      for (int v = 0; v < 2; ++v)
        acc[h][v] = _mm256_loadu_ps(y[h] + c + 8 * v);
    for (int64_t r = 0; r < count; ++r) {
      const float *row = rows + r * stride + c;
      const __m256 x0 = _mm256_loadu_ps(row), x1 = _mm256_loadu_ps(row + 8);
      for (int h = 0; h < H; ++h) {
        const __m256 sv = _mm256_set1_ps(s[h][r]);
        acc[h][0] = _mm256_fmadd_ps(sv, x0, acc[h][0]);
        acc[h][1] = _mm256_fmadd_ps(sv, x1, acc[h][1]);
      }
    }
    for (int h = 0; h < H; ++h)
      for (int v = 0; v < 2; ++v)
        _mm256_storeu_ps(y[h] + c + 8 * v, acc[h][v]);
  }
  if (c < n)
    for (int h = 0; h < H; ++h)
      for (int64_t r = 0; r < count; ++r)
        axpyAvx2(s[h][r], rows + r * stride + c, y[h] + c, n - c);
}

// The AVX-512 builds below keep dotAvx2's s0 and s1 (or axpyRowsAvx2's
// column vectors) as the halves of one register: each lane sees the same
// multiply-adds, so they give the AVX2 builds' bits with half the
// instructions.

// The sums of H query heads with four rows over elements [0, end), end a
// multiple of 16: head h, row u in s[4h + u] (dotAvx2's s0 and s1 as the
// halves), each row's 16 elements loaded once for the H heads. Inlined:
// called, the sums went through memory (1.5x the time).
template <int H>
MOE_TARGET_AVX512 __attribute__((always_inline)) inline void
steps16(const float *const *q, const float *const *row, int64_t end, __m512 *s) {
  for (int i = 0; i < 16; ++i)
    s[i] = _mm512_setzero_ps();
  for (int64_t i = 0; i < end; i += 16) {
    __m512 k[4];
    for (int u = 0; u < 4; ++u)
      k[u] = _mm512_loadu_ps(row[u] + i);
    for (int h = 0; h < H; ++h) {
      const __m512 qv = _mm512_loadu_ps(q[h] + i);
      for (int u = 0; u < 4; ++u)
        s[4 * h + u] = _mm512_fmadd_ps(qv, k[u], s[4 * h + u]);
    }
  }
}

// dotRowsAvx512 for n a multiple of 16: every element in the steps of 16,
// then the 4H sums of four rows at once. A last group of fewer rows is
// padded with copies of the last row (computed, not stored): a row's sums
// do not depend on the others'.
template <int H>
MOE_TARGET_AVX512 void dotRowsWholeAvx512(const float *const *q, const float *rows,
                                          int64_t stride, int64_t count, int64_t n,
                                          float *const *out) {
  for (int64_t r = 0; r < count; r += 4) {
    const float *row[4];
    for (int u = 0; u < 4; ++u)
      row[u] = rows + std::min<int64_t>(r + u, count - 1) * stride;
    __m512 s[16]; // heads from H on stay 0
    steps16<H>(q, row, n, s);
    // Stored from the register (through memory, a 16-float store read
    // back in pieces stalled the store forwarding).
    const __m512 sums = laneSums16(s);
    const __mmask8 here = __mmask8((1u << std::min<int64_t>(4, count - r)) - 1);
    for (int h = 0; h < H; ++h) {
      const __m128 head = h == 0   ? _mm512_castps512_ps128(sums)
                          : h == 1 ? _mm512_extractf32x4_ps(sums, 1)
                          : h == 2 ? _mm512_extractf32x4_ps(sums, 2)
                                   : _mm512_extractf32x4_ps(sums, 3);
      _mm_mask_storeu_ps(out[h] + r, here, head);
    }
  }
}

// dotRowsAvx2's sums for H query heads: four rows at a time, each row's 16
// elements loaded once for the H heads.
template <int H>
MOE_TARGET_AVX512 void dotRowsAvx512(const float *const *q, const float *rows, int64_t stride,
                                     int64_t count, int64_t n, float *const *out) {
  if (n % 16 == 0)
    return dotRowsWholeAvx512<H>(q, rows, stride, count, n, out);
  int64_t r = 0;
  for (; r + 4 <= count; r += 4) {
    const float *row[4] = {rows + r * stride, rows + (r + 1) * stride, rows + (r + 2) * stride,
                           rows + (r + 3) * stride};
    const int64_t i = n / 16 * 16;
    __m512 s[16];
    steps16<H>(q, row, i, s);
    for (int h = 0; h < H; ++h) {
      __m256 s0[4], s1[4];
      for (int u = 0; u < 4; ++u) {
        s0[u] = _mm512_castps512_ps256(s[4 * h + u]);
        s1[u] = _mm512_extractf32x8_ps(s[4 * h + u], 1);
      }
      dotTails4(s0, s1, q[h], row, i, n, out[h] + r);
    }
  }
  for (; r < count; ++r)
    for (int h = 0; h < H; ++h)
      out[h][r] = dotAvx2(q[h], rows + r * stride, n);
}

// 64 columns at a time kept in registers across all rows: the same fused
// multiply-adds, in the same order, as repeated axpyAvx2.
__attribute__((target("avx2,fma"))) void axpyRowsAvx2(const float *s, const float *rows,
                                                      int64_t stride, int64_t count, int64_t n,
                                                      float *y) {
  int64_t c = 0;
  for (; c + 64 <= n; c += 64) {
    __m256 acc[8];
    for (int v = 0; v < 8; ++v)
      acc[v] = _mm256_loadu_ps(y + c + 8 * v);
    for (int64_t r = 0; r < count; ++r) {
      const __m256 sv = _mm256_set1_ps(s[r]);
      const float *row = rows + r * stride + c;
      for (int v = 0; v < 8; ++v)
        acc[v] = _mm256_fmadd_ps(sv, _mm256_loadu_ps(row + 8 * v), acc[v]);
    }
    for (int v = 0; v < 8; ++v)
      _mm256_storeu_ps(y + c + 8 * v, acc[v]);
  }
  if (c < n)
    for (int64_t r = 0; r < count; ++r)
      axpyAvx2(s[r], rows + r * stride + c, y + c, n - c);
}

MOE_TARGET_AVX512 void axpyRowsAvx512(const float *s, const float *rows, int64_t stride,
                                      int64_t count, int64_t n, float *y) {
  int64_t c = 0;
  for (; c + 64 <= n; c += 64) {
    __m512 acc[4];
    for (int v = 0; v < 4; ++v)
      acc[v] = _mm512_loadu_ps(y + c + 16 * v);
    for (int64_t r = 0; r < count; ++r) {
      const __m512 sv = _mm512_set1_ps(s[r]);
      const float *row = rows + r * stride + c;
      for (int v = 0; v < 4; ++v)
        acc[v] = _mm512_fmadd_ps(sv, _mm512_loadu_ps(row + 16 * v), acc[v]);
    }
    for (int v = 0; v < 4; ++v)
      _mm512_storeu_ps(y + c + 16 * v, acc[v]);
  }
  if (c < n)
    axpyRowsAvx2(s, rows + c, stride, count, n - c, y + c);
}

// axpyRowsAvx512 for H heads at once: each row's 64 columns are loaded once
// for the H heads, and the 4H accumulators are independent chains (one
// head's four chains wait on the multiply-add latency).
template <int H>
MOE_TARGET_AVX512 void axpyRowsHeadsAvx512(const float *const *s, const float *rows,
                                           int64_t stride, int64_t count, int64_t c,
                                           float *const *y) {
  __m512 acc[H][4];
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < 4; ++v)
      acc[h][v] = _mm512_loadu_ps(y[h] + c + 16 * v);
  for (int64_t r = 0; r < count; ++r) {
    const float *row = rows + r * stride + c;
    __m512 x[4];
    for (int v = 0; v < 4; ++v)
      x[v] = _mm512_loadu_ps(row + 16 * v);
    for (int h = 0; h < H; ++h) {
      const __m512 sv = _mm512_set1_ps(s[h][r]);
      for (int v = 0; v < 4; ++v)
        acc[h][v] = _mm512_fmadd_ps(sv, x[v], acc[h][v]);
    }
  }
  for (int h = 0; h < H; ++h)
    for (int v = 0; v < 4; ++v)
      _mm512_storeu_ps(y[h] + c + 16 * v, acc[h][v]);
}

// expAvx2's and expAvx512's constants: the clamp, log2(e), ln 2 in two
// parts, and e^f's Taylor coefficients from degree 7 down to 0.
constexpr float kExpFloor = -87.3f, kLog2e = 1.44269504f, kLn2Hi = 0.693359375f,
                kLn2Lo = -2.12194440e-4f;
constexpr float kExpTaylor[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24,
                                 1.0f / 6,    0.5f,       1.0f,       1.0f};

void mulAddRowPortable(float s, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += s * x[i]; // built without FMA: never contracted
}

// Built without FMA (target avx2 only), so that the compiler cannot fuse
// the multiply and the add; the tail through a vector as well.
__attribute__((target("avx2"))) __m256 mulAdd8(__m256 s, __m256 x, __m256 y) {
  return _mm256_add_ps(y, _mm256_mul_ps(s, x));
}

__attribute__((target("avx2"))) void mulAddRowAvx2(float s, const float *x, float *y,
                                                   int64_t n) {
  const __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, mulAdd8(sv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  if (i < n) {
    alignas(32) float xt[8] = {}, yt[8] = {};
    std::copy(x + i, x + n, xt);
    std::copy(y + i, y + n, yt);
    _mm256_store_ps(yt, mulAdd8(sv, _mm256_load_ps(xt), _mm256_load_ps(yt)));
    std::copy(yt, yt + (n - i), y + i);
  }
}

// Masked throughout (the tail too). This target has FMA: the library is
// built with -ffp-contract=off, and the masked forms are builtins that
// the compiler would not fuse either (a scalar tail inlined here had
// become a vfmadd before that flag).
MOE_TARGET_AVX512 void mulAddRowAvx512(float s, const float *x, float *y, int64_t n) {
  const __m512 sv = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 in = __mmask16((1u << std::min<int64_t>(16, n - i)) - 1);
    const __m512 product = _mm512_maskz_mul_ps(in, sv, _mm512_maskz_loadu_ps(in, x + i));
    _mm512_mask_storeu_ps(y + i, in,
                          _mm512_maskz_add_ps(in, _mm512_maskz_loadu_ps(in, y + i), product));
  }
}

// e^x for x <= 0 (larger x is not needed by softmax): x = k ln 2 + f with
// |f| <= ln 2 / 2, e^f by its Taylor series to degree 7 (truncation below
// 6e-9 relative, under a float's rounding), times 2^k built in the exponent
// field. Below -87.3 (e^x under the smallest normal float) the input is
// clamped there: the result is 1.2e-38 instead of 0 or a subnormal. A NaN
// stays NaN (max_ps returns its second operand when either is NaN).
__attribute__((target("avx2,fma"))) __m256 expAvx2(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(kExpFloor), x);
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // f = x - k ln 2, with ln 2 split so that k * hi is exact.
  __m256 f = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Hi), x);
  f = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Lo), f);
  __m256 p = _mm256_set1_ps(kExpTaylor[0]);
  for (int i = 1; i < 8; ++i)
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(kExpTaylor[i]));
  const __m256i scale =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
}

float siluPortable(float g) {
  const float e = std::exp(-std::abs(g));
  return g * (g >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e));
}

// siluPortable's formula, 8 at a time with expAvx2.
__attribute__((target("avx2,fma"))) __m256 siluAvx2(__m256 g) {
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), g);
  const __m256 e = expAvx2(_mm256_sub_ps(_mm256_setzero_ps(), magnitude));
  const __m256 one = _mm256_set1_ps(1.0f), denominator = _mm256_add_ps(one, e);
  // e where g's sign bit is set (-0.0 too: 1 / 2 either way), and 0 below
  // -87.3, where expAvx2 clamps (the true value is under 1e-36).
  const __m256 underflow = _mm256_cmp_ps(magnitude, _mm256_set1_ps(87.3f), _CMP_GT_OQ);
  const __m256 numerator = _mm256_blendv_ps(one, _mm256_andnot_ps(underflow, e), g);
  return _mm256_mul_ps(g, _mm256_div_ps(numerator, denominator));
}

__attribute__((target("avx2,fma"))) void siluMulAvx2(const float *gate, const float *up,
                                                     int64_t n, float *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(siluAvx2(_mm256_loadu_ps(gate + i)),
                                            _mm256_loadu_ps(up + i)));
  if (i < n) { // the tail through one masked vector
    alignas(32) float g[8] = {}, u[8] = {}, o[8];
    std::copy(gate + i, gate + n, g);
    std::copy(up + i, up + n, u);
    _mm256_store_ps(o, _mm256_mul_ps(siluAvx2(_mm256_load_ps(g)), _mm256_load_ps(u)));
    std::copy(o, o + (n - i), out + i);
  }
}

void softmaxPortable(float *x, int64_t n) {
  const float m = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - m);
    sum += x[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j)
    x[j] *= inv;
}

// std::max_element's value, 8 lanes at a time: max is exact, so any order
// gives it (+0.0 and -0.0 may swap, which x - max does not see). With a NaN
// _mm256_max_ps depends on the order: then the scalar loop's answer. That
// loop was a chain of dependent maxss, two thirds of a long row's softmax.
__attribute__((target("avx2"))) float maxAvx2(const float *x, int64_t n) {
  if (n < 16)
    return *std::max_element(x, x + n);
  __m256 m = _mm256_loadu_ps(x), m1 = m;
  __m256 nan = _mm256_cmp_ps(m, m, _CMP_UNORD_Q);
  int64_t i = 8;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    m = _mm256_max_ps(m, a);
    m1 = _mm256_max_ps(m1, b);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(m, m1));
  float best = *std::max_element(lanes, lanes + 8);
  bool anyNan = !_mm256_testz_ps(nan, nan);
  for (; i < n; ++i) {
    anyNan |= std::isnan(x[i]);
    best = std::max(best, x[i]);
  }
  return anyNan ? *std::max_element(x, x + n) : best;
}

// softmaxAvx2 from element j on, given its sums of exp(x - max) so far
// (four double lanes, element i in lane i % 4, in order): the steps of 8,
// the lanes, the masked tail; returns the total.
__attribute__((target("avx2,fma"))) double expSumTail(float *x, int64_t j, int64_t n,
                                                      __m256 mv, __m256d sum) {
  for (; j + 8 <= n; j += 8) {
    const __m256 e = expAvx2(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
    _mm256_storeu_ps(x + j, e);
    sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, sum);
  double total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  if (j < n) { // the tail through one masked vector
    alignas(32) float tail[8];
    std::fill_n(tail, 8, -INFINITY);
    std::copy(x + j, x + n, tail);
    _mm256_store_ps(tail, expAvx2(_mm256_sub_ps(_mm256_load_ps(tail), mv)));
    for (int64_t i = j; i < n; ++i) {
      x[i] = tail[i - j];
      total += x[i];
    }
  }
  return total;
}

__attribute__((target("avx2,fma"))) void softmaxAvx2(float *x, int64_t n) {
  // Sums in double, four lanes, combined in a fixed order.
  const float invTotal = static_cast<float>(
      1.0 / expSumTail(x, 0, n, _mm256_set1_ps(maxAvx2(x, n)), _mm256_setzero_pd()));
  const __m256 inv = _mm256_set1_ps(invTotal);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), inv));
  for (; j < n; ++j)
    x[j] *= invTotal;
}

// expAvx2's steps on 16 lanes (the same operations lane by lane).
MOE_TARGET_AVX512 __m512 expAvx512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(kExpFloor), x);
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), x);
  f = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Lo), f);
  __m512 p = _mm512_set1_ps(kExpTaylor[0]);
  for (int i = 1; i < 8; ++i)
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kExpTaylor[i]));
  const __m512i scale =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(scale));
}

// scaledSoftmaxRows for R rows at once: softmaxAvx2's operations on each
// element (x * scale first), 16 at a time, the R rows' passes interleaved
// so that their chains of double additions (four lanes, in softmaxAvx2's
// order) overlap.
template <int R>
MOE_TARGET_AVX512 void scaledSoftmaxAvx512(float *const *x, int64_t n, float scale) {
  const __m512 sv = _mm512_set1_ps(scale);
  const int64_t whole = n / 16 * 16;
  const __mmask16 rest = __mmask16((1u << (n - whole)) - 1);
  __m512 mv[R];
  for (int r = 0; r < R; ++r) { // scaled in place; the max
    __m512 m = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    for (int64_t j = 0; j <= whole; j += 16) {
      const __mmask16 in = j < whole ? __mmask16(0xffff) : rest;
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(in, x[r] + j), sv);
      _mm512_mask_storeu_ps(x[r] + j, in, v);
      m = _mm512_mask_max_ps(m, in, m, v);
      nan |= _mm512_mask_cmp_ps_mask(in, v, v, _CMP_UNORD_Q);
    }
    // maxAvx2's value: exact without a NaN, else std::max_element's.
    mv[r] = _mm512_set1_ps(nan ? *std::max_element(x[r], x[r] + n) : _mm512_reduce_max_ps(m));
  }
  __m256d sum[R];
  for (int r = 0; r < R; ++r)
    sum[r] = _mm256_setzero_pd();
  for (int64_t j = 0; j < whole; j += 16)
    for (int r = 0; r < R; ++r) { // softmaxAvx2's two steps of 8
      const __m512 e = expAvx512(_mm512_sub_ps(_mm512_loadu_ps(x[r] + j), mv[r]));
      _mm512_storeu_ps(x[r] + j, e);
      sum[r] = _mm256_add_pd(sum[r], _mm256_cvtps_pd(_mm512_castps512_ps128(e)));
      sum[r] = _mm256_add_pd(sum[r], _mm256_cvtps_pd(_mm512_extractf32x4_ps(e, 1)));
      sum[r] = _mm256_add_pd(sum[r], _mm256_cvtps_pd(_mm512_extractf32x4_ps(e, 2)));
      sum[r] = _mm256_add_pd(sum[r], _mm256_cvtps_pd(_mm512_extractf32x4_ps(e, 3)));
    }
  for (int r = 0; r < R; ++r) {
    const __m512 inv = _mm512_set1_ps(static_cast<float>(
        1.0 / expSumTail(x[r], whole, n, _mm512_castps512_ps256(mv[r]), sum[r])));
    for (int64_t j = 0; j <= whole; j += 16) {
      const __mmask16 in = j < whole ? __mmask16(0xffff) : rest;
      _mm512_mask_storeu_ps(x[r] + j, in, _mm512_mul_ps(_mm512_maskz_loadu_ps(in, x[r] + j), inv));
    }
  }
}

// f(std::integral_constant<int, H>(), h) for heads [h, h + H): four at a
// time, then the rest.
template <typename F> void byFour(int64_t heads, F &&f) {
  for (int64_t h = 0; h < heads; h += 4)
    switch (std::min<int64_t>(4, heads - h)) {
    case 4: f(std::integral_constant<int, 4>(), h); break;
    case 3: f(std::integral_constant<int, 3>(), h); break;
    case 2: f(std::integral_constant<int, 2>(), h); break;
    default: f(std::integral_constant<int, 1>(), h); break;
    }
}

} // namespace

void dotRows(const float *q, const float *rows, int64_t stride, int64_t count, int64_t n,
             float *out) {
  if (isa() >= Isa::Avx512)
    return dotRowsAvx512<1>(&q, rows, stride, count, n, &out);
  if (useAvx2())
    return dotRowsAvx2(q, rows, stride, count, n, out);
  for (int64_t r = 0; r < count; ++r)
    out[r] = dotPortable(q, rows + r * stride, n);
}

void axpyRows(const float *s, const float *rows, int64_t stride, int64_t count, int64_t n,
              float *y) {
  if (isa() >= Isa::Avx512)
    return axpyRowsAvx512(s, rows, stride, count, n, y);
  if (useAvx2())
    return axpyRowsAvx2(s, rows, stride, count, n, y);
  for (int64_t r = 0; r < count; ++r)
    axpyPortable(s[r], rows + r * stride, y, n);
}

void dotRowsHeads(const float *const *q, const float *rows, int64_t stride, int64_t count,
                  int64_t n, float *const *out, int64_t heads) {
  if (isa() >= Isa::Avx512)
    return byFour(heads, [&](auto h4, int64_t h) {
      dotRowsAvx512<h4.value>(q + h, rows, stride, count, n, out + h);
    });
  if (useAvx2() && n % 8 == 0)
    return byFour(heads, [&](auto h4, int64_t h) {
      dotRowsHeadsAvx2<h4.value>(q + h, rows, stride, count, n, out + h);
    });
  for (int64_t h = 0; h < heads; ++h)
    dotRows(q[h], rows, stride, count, n, out[h]);
}

void axpyRowsHeads(const float *const *s, const float *rows, int64_t stride, int64_t count,
                   int64_t n, float *const *y, int64_t heads) {
  if (isa() >= Isa::Avx512) {
    const int64_t whole = n / 64 * 64; // the columns axpyRowsAvx512 takes 64 at a time
    return byFour(heads, [&](auto h4, int64_t h) {
      for (int64_t c = 0; c < whole; c += 64)
        axpyRowsHeadsAvx512<h4.value>(s + h, rows, stride, count, c, y + h);
      if (whole < n)
        for (int64_t i = h; i < h + h4.value; ++i)
          axpyRowsAvx2(s[i], rows + whole, stride, count, n - whole, y[i] + whole);
    });
  }
  if (useAvx2())
    return byFour(heads, [&](auto h4, int64_t h) {
      axpyRowsHeadsAvx2<h4.value>(s + h, rows, stride, count, n, y + h);
    });
  for (int64_t h = 0; h < heads; ++h)
    axpyRows(s[h], rows, stride, count, n, y[h]);
}

void mulAddRow(float s, const float *x, float *y, int64_t n) {
  if (isa() >= Isa::Avx512)
    return mulAddRowAvx512(s, x, y, n);
  useAvx2() ? mulAddRowAvx2(s, x, y, n) : mulAddRowPortable(s, x, y, n);
}

void siluMulRow(const float *gate, const float *up, int64_t n, float *out) {
  if (useAvx2())
    return siluMulAvx2(gate, up, n, out);
  for (int64_t i = 0; i < n; ++i)
    out[i] = siluPortable(gate[i]) * up[i];
}

void softmax(float *x, int64_t n) {
  useAvx2() ? softmaxAvx2(x, n) : softmaxPortable(x, n);
}

void scaledSoftmaxRows(float *const *x, int64_t rows, int64_t n, float scale) {
  if (isa() >= Isa::Avx512)
    return byFour(rows,
                  [&](auto r4, int64_t r) { scaledSoftmaxAvx512<r4.value>(x + r, n, scale); });
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j)
      x[r][j] *= scale;
    softmax(x[r], n);
  }
}

float dot(const float *a, const float *b, int64_t n) {
  return useAvx2() ? dotAvx2(a, b, n) : dotPortable(a, b, n);
}

void axpy(float s, const float *x, float *y, int64_t n) {
  useAvx2() ? axpyAvx2(s, x, y, n) : axpyPortable(s, x, y, n);
}

} // namespace moe::cpu
