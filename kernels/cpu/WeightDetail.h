//===- WeightDetail.h - weight helpers shared by the kernels ----*- C++ -*-===//
//
// Not part of the public kernel contract (Kernels.h): bulk conversion of a
// weight's elements to f32 and the byte size of a run of elements.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_WEIGHTDETAIL_H
#define MOE_KERNELS_CPU_WEIGHTDETAIL_H

#include "kernels/cpu/Kernels.h"

namespace moe::cpu::detail {

/// dst[i] = w.at(first + i) for i < count.
void toF32(Weight w, size_t first, size_t count, float *dst);

/// y[i][c] += x[i][r] * w(row0 + r, c) for c < n, r = 0, 1, ... rows - 1 in
/// turn, and i < tokens (rows of k elements, n <= k): the same bits as
/// toF32() of each row and mulAddRow(x[i][r], row, y[i], n). The AVX-512
/// build keeps y's sums in registers over all the rows instead of a trip
/// through memory per row (MLA's absorb of W_uk, one token at a decode step).
void mulAddRows(Weight w, int64_t k, int64_t row0, int64_t rows, int64_t n,
                const float *const *x, int64_t tokens, float *const *y);

/// Scaled types: dst[i] = element first + i without its scale (the integer,
/// or the fp8 value).
void unscaledToF32(Weight w, size_t first, size_t count, float *dst);

/// Bytes taken by `elements` elements of `type` (even for I4). Inline: the
/// kernels' inner loops address weights with it.
constexpr size_t bytesOf(WeightType type, size_t elements) {
  switch (type) {
  case WeightType::F32:
    return elements * 4;
  case WeightType::BF16:
  case WeightType::F16:
    return elements * 2;
  case WeightType::I8:
  case WeightType::F8:
    return elements;
  case WeightType::I4:
    return elements / 2;
  }
  return 0;
}

} // namespace moe::cpu::detail

#endif
