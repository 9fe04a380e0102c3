//===- LaneSums.h - fixed-order sums of 8-lane accumulators -----*- C++ -*-===//
//
// The kernels keep partial sums in 8 lanes and reduce them in one fixed
// order, ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)), whatever the
// instruction set: that order is part of each kernel's bits.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_LANESUMS_H
#define MOE_KERNELS_CPU_LANESUMS_H

#include "kernels/cpu/Isa.h"

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

/// Lanes 2i and 2i + 1 of a then b, added: [a0 + a1, a2 + a3, ..., b14 +
/// b15]. The AVX-512 lane sums below are steps of it.
MOE_TARGET_AVX512 inline __m512 pairLanes(__m512 a, __m512 b) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  return _mm512_add_ps(_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b));
}

/// The lane sums of 8 rows, two a register (8 lanes each, rows 0-1 in
/// p[0]), in row order: laneSums4's additions (the lanes paired, the pairs
/// paired, the quads paired).
MOE_TARGET_AVX512 inline __m256 laneSums8(const __m512 *p) {
  const __m512 quads = pairLanes(pairLanes(p[0], p[1]), pairLanes(p[2], p[3])); // two per row
  const __m512 split = _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15), quads);
  return _mm256_add_ps(_mm512_castps512_ps256(split), _mm512_extractf32x8_ps(split, 1));
}

/// Lane i: the fixed-order sum of r[i]'s two halves added (the lanes of
/// an AVX2 dot product's two accumulators, s0 + s1), for 16 registers at
/// once. Each step pairs the lanes that order pairs, two registers into one:
/// the halves added, then the lanes paired, the pairs paired, the quads
/// paired. About 3 instructions a sum, against laneSums4's 5 or more.
MOE_TARGET_AVX512 inline __m512 laneSums16(const __m512 *r) {
  __m512 v[8], p[4], q[2];
  for (int i = 0; i < 8; ++i) // [r[2i] lo + hi | r[2i + 1] lo + hi]
    v[i] = _mm512_add_ps(_mm512_shuffle_f32x4(r[2 * i], r[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(r[2 * i], r[2 * i + 1], 0xee));
  for (int i = 0; i < 4; ++i) // four pairs of r[4i] .. r[4i + 3]
    p[i] = pairLanes(v[2 * i], v[2 * i + 1]);
  for (int i = 0; i < 2; ++i) // two quads of r[8i] .. r[8i + 7]
    q[i] = pairLanes(p[2 * i], p[2 * i + 1]);
  return pairLanes(q[0], q[1]);
}

} // namespace moe::cpu

#endif
