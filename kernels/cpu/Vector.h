//===- Vector.h - small vector primitives with ISA dispatch -----*- C++ -*-===//
//
// Built twice (AVX2+FMA and portable), picked at run time. Each result is a
// fixed sequence of operations for a given length, whatever the caller
// batches, so batched and solo runs agree bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_VECTOR_H
#define MOE_KERNELS_CPU_VECTOR_H

#include <cstdint>

namespace moe::cpu {

/// Whether the AVX2+FMA+F16C builds run here (MOE_CPU_ISA=baseline: no).
bool useAvx2();

/// sum a[i] * b[i] over n elements.
float dot(const float *a, const float *b, int64_t n);
/// y[i] += s * x[i] over n elements.
void axpy(float s, const float *x, float *y, int64_t n);

} // namespace moe::cpu

#endif
