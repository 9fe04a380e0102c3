//===- LinearInt8.h - W8A8 and W4A8 matrix products -------------*- C++ -*-===//
//
// Not part of the public kernel contract (Kernels.h): the integer half of
// linearGroup() for weights with Weight::int8Activations, int8 (W8A8,
// LinearInt8.cpp) or int4 (W4A8, LinearInt4.cpp). Integer sums are exact,
// and their f32 epilogues the same operations everywhere, so every build
// (portable, AVX2, AVX-512 VNNI) and every batch gives the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_LINEARINT8_H
#define MOE_KERNELS_CPU_LINEARINT8_H

#include "kernels/cpu/Kernels.h"

#include <cstdint>
#include <vector>

namespace moe::cpu::detail {

/// Rows of x quantized as Weight::int8Activations says: row t at
/// q.data() + t * stride (stride: k rounded up to 64, the rest zero) with
/// scale scale[t]. With AMX, for k a multiple of 64 and more rows than a
/// decode batch, also `tiles`: each 16 rows x 64 columns as the AMX B
/// operand (16 rows of 4 columns x 16 x rows; past the last row zero), the
/// blocks of rows 0-15 first (k / 64 of them), then rows 16-31, ...
///
/// For W4A8 (quantizeRowsInt4) the stride is k rounded up to a block of
/// kInt4Block, and each block of a row holds its even elements, then its
/// odd ones (the order of an int4 row's low nibbles, then its high ones);
/// `blockSums` holds, per row and block, -8 times the sum of each of its
/// 16 lanes of 8 consecutive elements (lane j: elements 8j .. 8j + 7 of the
/// block), 16 int32 a block: the integer kernels multiply x by nibble + 8
/// (unsigned) and start each lane from these.
struct Int8Rows {
  std::vector<int8_t> q, tiles;
  std::vector<float> scale;
  /// W8A8 (quantizeRows): the sum of each row's quantized elements.
  std::vector<int32_t> sums;
  std::vector<int32_t> blockSums;
  int64_t stride = 0, blocks = 0;
};

/// x: [rows, k].
Int8Rows quantizeRows(const float *x, int64_t rows, int64_t k);

/// Elements of an int4 row a W4A8 block sums in integers (Kernels.h).
constexpr int64_t kInt4Block = 128;

/// x: [rows, k], quantized as quantizeRows does, in W4A8's layout.
Int8Rows quantizeRowsInt4(const float *x, int64_t rows, int64_t k);

/// For t < tokens and i < rows (at most 8): out[(t0 + t) * n + row[i]] = row t0 + t of x
/// times row row[i] of w (I8, one scale per row, [n, k]), as
/// Weight::int8Activations defines it, plus bias[row[i]].
void linearInt8(const Int8Rows &x, int64_t t0, int64_t tokens, Weight w, int64_t k,
                const int64_t *row, int64_t rows, const float *bias, float *out, int64_t n);

/// The same for an I4 weight with one group of scales a row (rowGroup 1)
/// whose groups start at multiples of kInt4Block (W4A8, Kernels.h), x from
/// quantizeRowsInt4; row[rows .. kRows) repeat the last row.
void linearInt4(const Int8Rows &x, int64_t t0, int64_t tokens, Weight w, int64_t k,
                const int64_t *row, int64_t rows, const float *bias, float *out, int64_t n);

} // namespace moe::cpu::detail

#endif
