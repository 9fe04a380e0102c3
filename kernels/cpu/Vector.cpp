//===- Vector.cpp - small vector primitives with ISA dispatch -------------===//
#include "kernels/cpu/Vector.h"

#include <immintrin.h>

#include <cmath>
#include <cstdlib>
#include <string>

namespace moe::cpu {

bool useAvx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c") &&
                          !(std::getenv("MOE_CPU_ISA") &&
                            std::string(std::getenv("MOE_CPU_ISA")) == "baseline");
  return yes;
}

namespace {

float dotPortable(const float *a, const float *b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
}

__attribute__((target("avx2,fma"))) float dotAvx2(const float *a, const float *b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8)
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(s0, s1));
  float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
              ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i)
    sum += a[i] * b[i];
  return sum;
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

__attribute__((target("avx2,fma"))) void dotRowsAvx2(const float *q, const float *rows,
                                                     int64_t stride, int64_t count, int64_t n,
                                                     float *out) {
  for (int64_t r = 0; r < count; ++r)
    out[r] = dotAvx2(q, rows + r * stride, n);
}

__attribute__((target("avx2,fma"))) void axpyRowsAvx2(const float *s, const float *rows,
                                                      int64_t stride, int64_t count, int64_t n,
                                                      float *y) {
  for (int64_t r = 0; r < count; ++r)
    axpyAvx2(s[r], rows + r * stride, y, n);
}

} // namespace

void dotRows(const float *q, const float *rows, int64_t stride, int64_t count, int64_t n,
             float *out) {
  if (useAvx2())
    return dotRowsAvx2(q, rows, stride, count, n, out);
  for (int64_t r = 0; r < count; ++r)
    out[r] = dotPortable(q, rows + r * stride, n);
}

void axpyRows(const float *s, const float *rows, int64_t stride, int64_t count, int64_t n,
              float *y) {
  if (useAvx2())
    return axpyRowsAvx2(s, rows, stride, count, n, y);
  for (int64_t r = 0; r < count; ++r)
    axpyPortable(s[r], rows + r * stride, y, n);
}

float dot(const float *a, const float *b, int64_t n) {
  return useAvx2() ? dotAvx2(a, b, n) : dotPortable(a, b, n);
}

void axpy(float s, const float *x, float *y, int64_t n) {
  useAvx2() ? axpyAvx2(s, x, y, n) : axpyPortable(s, x, y, n);
}

} // namespace moe::cpu
