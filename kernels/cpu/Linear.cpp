//===- Linear.cpp - out = x w^T (+ bias), blocked and multi-threaded ------===//
//
// Threads split the output rows in blocks of kRows. For each block of
// kTokens tokens, a row block walks k in chunks of kChunk: the chunk of its
// kRows weight rows is converted to f32 once into a small per-thread buffer
// (it stays in L1) and swept against every token of the block (whose x chunks
// stay in L2). For one token this is a GEMV that reads each weight element
// exactly once.
//
// Every output element is the same fixed sequence of operations whatever the
// thread count or its position in a block, so results are reproducible and
// equal weight rows give bit-equal outputs.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Kernels.h"

#include <algorithm>
#include <vector>

namespace moe::cpu {
namespace detail {
void toF32(Weight w, size_t first, size_t count, float *dst); // Weight.cpp
} // namespace detail

namespace {

// Output rows per step: each x element loaded feeds kRows multiply-adds.
constexpr int64_t kRows = 4;
// Tokens per block: more tokens per block means fewer re-conversions of the
// weight; their x chunks (kTokens * kChunk floats) must stay cached.
constexpr int64_t kTokens = 32;
// Elements of a row converted at a time.
constexpr int64_t kChunk = 512;
// Multiply-adds below which threads cost more than they save.
constexpr int64_t kParallelWork = 1 << 16;

// acc[i] += dot(x, r[i]) over n elements for the kRows rows.
void dotRows(const float *x, const float *const r[kRows], int64_t n,
             float acc[kRows]) {
  const float *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3];
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
  for (int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    a0 += xi * r0[i];
    a1 += xi * r1[i];
    a2 += xi * r2[i];
    a3 += xi * r3[i];
  }
  acc[0] += a0;
  acc[1] += a1;
  acc[2] += a2;
  acc[3] += a3;
}

// Requests elements [first, first + count) of a 16-bit weight. Converting a
// chunk reads one short stream at a time, too little in flight to keep the
// memory busy; prefetching the next chunk of every row of the block while
// converting this one made a bf16 GEMV about 1.4x faster on a 2-core VM.
void prefetch(Weight w, int64_t first, int64_t count) {
  const char *p = static_cast<const char *>(w.data) + first * 2;
  for (int64_t byte = 0; byte < count * 2; byte += 64)
    __builtin_prefetch(p + byte);
}

} // namespace

void linear(const float *x, int64_t tokens, int64_t k, Weight w, int64_t n,
            const Weight *bias, float *out) {
  std::vector<float> b(n, 0.0f);
  if (bias)
    detail::toF32(*bias, 0, n, b.data());
  const bool f32 = w.type == WeightType::F32;
  const int64_t rowBlocks = (n + kRows - 1) / kRows;
#pragma omp parallel if (tokens * n * k >= kParallelWork)
  {
    std::vector<float> buf(f32 ? 0 : kRows * kChunk);
    std::vector<float> acc(kTokens * kRows);
    for (int64_t t0 = 0; t0 < tokens; t0 += kTokens) {
      const int64_t blockTokens = std::min(kTokens, tokens - t0);
      // Outputs of different row blocks are disjoint: no barrier needed.
#pragma omp for schedule(static) nowait
      for (int64_t rb = 0; rb < rowBlocks; ++rb) {
        const int64_t n0 = rb * kRows, rows = std::min(kRows, n - n0);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
          const int64_t len = std::min(kChunk, k - k0);
          const float *r[kRows];
          for (int64_t i = 0; i < kRows; ++i) {
            // A short last block repeats its last row; those sums are dropped.
            const int64_t row = std::min(i, rows - 1);
            const int64_t first = (n0 + row) * k + k0;
            if (f32) {
              r[i] = static_cast<const float *>(w.data) + first;
              continue;
            }
            if (i == row) {
              prefetch(w, first + kChunk, std::min(kChunk, k - k0 - kChunk));
              detail::toF32(w, first, len, buf.data() + i * kChunk);
            }
            r[i] = buf.data() + row * kChunk;
          }
          for (int64_t t = 0; t < blockTokens; ++t)
            dotRows(x + (t0 + t) * k + k0, r, len, acc.data() + t * kRows);
        }
        for (int64_t t = 0; t < blockTokens; ++t)
          for (int64_t i = 0; i < rows; ++i)
            out[(t0 + t) * n + n0 + i] = acc[t * kRows + i] + b[n0 + i];
      }
    }
  }
}

} // namespace moe::cpu
