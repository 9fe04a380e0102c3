//===- LaneSums.h - fixed-order sums of 8-lane accumulators -----*- C++ -*-===//
//
// The kernels keep partial sums in 8 lanes and reduce them in one fixed
// order, ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)), whatever the
// instruction set: that order is part of each kernel's bits.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_LANESUMS_H
#define MOE_KERNELS_CPU_LANESUMS_H

#include <immintrin.h>

namespace moe::cpu {

/// The fixed-order lane sums of a, b, c and d in lanes 0-3: hadd pairs lanes
/// as that order does (and addition commutes).
__attribute__((target("avx2"))) inline __m128 laneSums4(__m256 a, __m256 b, __m256 c,
                                                        __m256 d) {
  // Lanes 0-3: (x0 + x1) + (x2 + x3) of a, b, c, d; lanes 4-7: (x4 + x5) + (x6 + x7).
  const __m256 q = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
}

} // namespace moe::cpu

#endif
