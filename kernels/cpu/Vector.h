//===- Vector.h - small vector primitives with ISA dispatch -----*- C++ -*-===//
//
// Built for AVX2+FMA and portable (dotRows and axpyRows for AVX-512 too,
// with the AVX2 builds' bits), picked at run time (Isa.h). Each result is a
// fixed sequence of operations for a given length, whatever the caller
// batches, so batched and solo runs agree bit for bit.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_VECTOR_H
#define MOE_KERNELS_CPU_VECTOR_H

#include "kernels/cpu/Isa.h"

#include <cstdint>

namespace moe::cpu {

/// sum a[i] * b[i] over n elements.
float dot(const float *a, const float *b, int64_t n);
/// y[i] += s * x[i] over n elements.
void axpy(float s, const float *x, float *y, int64_t n);
/// out[r] = dot(q, rows + r * stride, n) for r < count (as dot() computes it).
void dotRows(const float *q, const float *rows, int64_t stride, int64_t count, int64_t n,
             float *out);
/// dotRows(q[h], rows, stride, count, n, out[h]) for h < heads (the same
/// bits), reading the rows once for several heads: the query heads of a
/// GQA group score the same key rows.
void dotRowsHeads(const float *const *q, const float *rows, int64_t stride, int64_t count,
                  int64_t n, float *const *out, int64_t heads);
/// y[i] += s * x[i] over n elements, the product rounded before the sum (no
/// fused multiply-add, unlike axpy: the bits of a plain loop built for
/// baseline x86-64), 16 or 8 at a time where the CPU allows.
void mulAddRow(float s, const float *x, float *y, int64_t n);
/// out[i] = g * sigmoid(g) * up[i], g = gate[i], over n elements: SwiGLU.
/// sigmoid(g) is 1 / (1 + e) for g >= 0 and e / (1 + e) below, e =
/// exp(-|g|); the AVX2 build uses its vector exp (as softmax), the portable
/// one std::exp.
void siluMulRow(const float *gate, const float *up, int64_t n, float *out);
/// x = softmax(x) over n elements (n >= 1): exp(x - max) normalised by
/// their sum, accumulated in double. The AVX2 build uses its own vector
/// exp (within 2 ulp of std::exp; below e^-87.3 it returns 1.2e-38).
void softmax(float *x, int64_t n);
/// softmax(x[r], n) for r < rows after each element is multiplied by
/// `scale` (attention's scores): the same bits as that multiply and
/// softmax() row by row; the AVX-512 build runs the rows together.
void scaledSoftmaxRows(float *const *x, int64_t rows, int64_t n, float scale);
/// y += s[r] * (rows + r * stride) for r = 0, 1, ... count - 1 in turn (as
/// repeated axpy() computes it).
void axpyRows(const float *s, const float *rows, int64_t stride, int64_t count, int64_t n,
              float *y);
/// axpyRows(s[h], rows, stride, count, n, y[h]) for h < heads (the same
/// bits), reading the rows once for several heads: the heads of a GQA group
/// weigh the same value rows.
void axpyRowsHeads(const float *const *s, const float *rows, int64_t stride, int64_t count,
                   int64_t n, float *const *y, int64_t heads);

} // namespace moe::cpu

#endif
