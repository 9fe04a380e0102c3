//===- Elementwise.cpp - embedding, norms and pointwise ops ---------------===//
//
// Memory-bound and small next to the matmuls. A prefill's rows are split
// between the threads (each row is computed the same way either way): run
// on one core, the other would wait through them (a few % of a 512-token
// prefill).
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/WeightDetail.h"
#include "kernels/cpu/Vector.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace moe::cpu {
namespace {

std::vector<float> toVector(Weight w, int64_t count) {
  std::vector<float> v(count);
  detail::toF32(w, 0, count, v.data());
  return v;
}

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

} // namespace

void embedding(const int32_t *ids, int64_t tokens, Weight table, int64_t hidden,
               float *out) {
  for (int64_t t = 0; t < tokens; ++t)
    detail::toF32(table, size_t(ids[t]) * hidden, hidden, out + t * hidden);
}

// The sum of squares is complete before the row is written, so x may
// alias out.
void rmsNormRow(const float *x, int64_t cols, const float *scale, float eps, float *out) {
  const float inv = 1.0f / std::sqrt(dot(x, x, cols) / cols + eps);
#pragma omp simd
  for (int64_t c = 0; c < cols; ++c)
    out[c] = x[c] * inv * scale[c];
}

void rmsNorm(const float *x, int64_t rows, int64_t cols, Weight w, float eps,
             float *out) {
  const std::vector<float> scale = toVector(w, cols);
  forRows(rows, cols,
          [&](int64_t r) { rmsNormRow(x + r * cols, cols, scale.data(), eps, out + r * cols); });
}

void addRmsNorm(const float *a, const float *b, int64_t rows, int64_t cols, Weight w,
                float eps, float *sum, float *out) {
  const std::vector<float> scale = toVector(w, cols);
  forRows(rows, cols, [&](int64_t r) { // the row stays in L1 between the two
    add(a + r * cols, b + r * cols, cols, sum + r * cols);
    rmsNormRow(sum + r * cols, cols, scale.data(), eps, out + r * cols);
  });
}

void add(const float *a, const float *b, int64_t n, float *out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}

void siluMul(const float *gate, const float *up, int64_t rows, int64_t cols,
             int64_t stride, float *out) {
  forRows(rows, cols, [&](int64_t t) {
    siluMulRow(gate + t * stride, up + t * stride, cols, out + t * cols);
  });
}

void sigmoidGate(const float *x, Weight g, const float *y, int64_t tokens,
                 int64_t hidden, float *out) {
  const std::vector<float> gv = toVector(g, hidden);
  forRows(tokens, hidden, [&](int64_t t) {
    const float s = sigmoid(dot(x + t * hidden, gv.data(), hidden));
#pragma omp simd
    for (int64_t i = 0; i < hidden; ++i)
      out[t * hidden + i] = s * y[t * hidden + i];
  });
}

} // namespace moe::cpu
