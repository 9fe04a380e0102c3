//===- Weight.cpp - weight element access and conversion to f32 -----------===//

#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/LinearDetail.h"
#include "moe/abi/Numeric.h"
#include "kernels/cpu/Scratch.h"
#include "kernels/cpu/Vector.h"
#include "kernels/cpu/WeightDetail.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace moe::cpu {
namespace {

// Element i of a scaled weight before its scale: the integer, or the fp8 value.
float unscaled(const Weight &w, size_t i) {
  const auto *bytes = static_cast<const uint8_t *>(w.data);
  if (w.type == WeightType::I8)
    return float(int8_t(bytes[i]));
  if (w.type == WeightType::F8)
    return fp8ToF32(bytes[i]);
  const uint8_t byte = bytes[i / 2];
  return float(((i % 2 ? byte >> 4 : byte & 0xf) ^ 8) - 8); // sign-extend the nibble
}

float dequantize(const Weight &w, size_t i) {
  const int64_t cols = w.cols;
  return unscaled(w, i) * w.scales[w.scaleIndex(int64_t(i) / cols, int64_t(i) % cols)];
}

} // namespace

float Weight::at(size_t i) const {
  if (panels()) { // F32, BF16 or F16, read where element (r, c) sits
    Weight stored = *this;
    stored.panelCols = 0;
    return stored.at(panelIndex(int64_t(i) / panelCols, int64_t(i) % panelCols, panelCols));
  }
  switch (type) {
  case WeightType::F32:
    return static_cast<const float *>(data)[i];
  case WeightType::BF16:
    return bf16ToF32(static_cast<const uint16_t *>(data)[i]);
  case WeightType::F16:
    return f16ToF32(static_cast<const uint16_t *>(data)[i]);
  case WeightType::I8:
  case WeightType::I4:
  case WeightType::F8:
    return dequantize(*this, i);
  }
  return 0.0f;
}

Weight Weight::offset(size_t elements) const {
  Weight w = *this;
  w.data = static_cast<const char *>(data) + detail::bytesOf(type, elements);
  if (quantized()) {
    const int64_t rows = rowOffset + int64_t(elements) / cols;
    w.scales += rows / rowGroup * ((cols + group - 1) / group);
    w.rowOffset = rows % rowGroup;
  }
  return w;
}

namespace detail {
namespace {

// dst[j] = unscaled(w, e + j) * scale for j < n, eight at a time through
// linear()'s loads once e is at a whole 32-bit word of an int4 row (each
// element the same exact conversion and one rounded multiply): MLA's
// absorb converts every kv_b row each step, an eighth of a DeepSeek
// decode step when it went element by element.
template <WeightType W>
__attribute__((target("avx2,f16c"))) void scaledRunAvx2(const Weight &w, size_t e, size_t n,
                                                        float scale, float *dst) {
  size_t j = 0;
  for (; j < n && (W != WeightType::I4 || (e + j) % 8 != 0); ++j)
    dst[j] = unscaled(w, e + j) * scale;
  const auto *bytes = static_cast<const uint8_t *>(w.data);
  const __m256 s = _mm256_set1_ps(scale);
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(dst + j, _mm256_mul_ps(load8<W>(bytes + bytesOf(W, e + j)), s));
  for (; j < n; ++j)
    dst[j] = unscaled(w, e + j) * scale;
}

void scaledRun(const Weight &w, size_t e, size_t n, float scale, float *dst) {
  if (useAvx2() && w.type == WeightType::I4)
    return scaledRunAvx2<WeightType::I4>(w, e, n, scale, dst);
  if (useAvx2() && w.type == WeightType::I8)
    return scaledRunAvx2<WeightType::I8>(w, e, n, scale, dst);
  for (size_t j = 0; j < n; ++j)
    dst[j] = unscaled(w, e + j) * scale;
}

// Columns a pass of mulAddRows' AVX-512 build holds (four registers a
// token), and tokens at a time: 16 sums and 4 weight vectors of 32.
constexpr int64_t kRowBlocks = 4, kRowTokens = 4;

// mulAddRows for T tokens over columns [c0, c0 + 16 * B): every 16 columns
// of a row under one scale (scaleRow[r]: the index of row r's first).
template <WeightType W, int T, int B>
MOE_TARGET_AVX512 void mulAddRowsAvx512(const Weight &w, int64_t k, int64_t row0, int64_t rows,
                                        int64_t c0, const int64_t *scaleRow,
                                        const float *const *x, float *const *y) {
  constexpr bool scaled = W == WeightType::I8 || W == WeightType::I4 || W == WeightType::F8;
  const auto *bytes = static_cast<const char *>(w.data);
  __m512 acc[T][B], wv[B];
  int64_t group[B]; // each block's scale after its row's first
  for (int b = 0; b < B; ++b)
    group[b] = scaled ? (c0 + 16 * b) / w.group : 0;
  for (int i = 0; i < T; ++i)
    for (int b = 0; b < B; ++b)
      acc[i][b] = _mm512_loadu_ps(y[i] + c0 + 16 * b);
  for (int64_t r = 0; r < rows; ++r) {
    const char *at = bytes + bytesOf(W, size_t((row0 + r) * k + c0));
    for (int b = 0; b < B; ++b) {
      const char *p = at + bytesOf(W, size_t(16 * b));
      wv[b] = load8x2<W>(p, p + bytesOf(W, 8));
      if constexpr (scaled)
        wv[b] = _mm512_mul_ps(wv[b], _mm512_set1_ps(w.scales[scaleRow[r] + group[b]]));
    }
    for (int i = 0; i < T; ++i) {
      const __m512 s = _mm512_set1_ps(x[i][r]);
      for (int b = 0; b < B; ++b)
        acc[i][b] = _mm512_add_ps(acc[i][b], _mm512_mul_ps(s, wv[b]));
    }
  }
  for (int i = 0; i < T; ++i)
    for (int b = 0; b < B; ++b)
      _mm512_storeu_ps(y[i] + c0 + 16 * b, acc[i][b]);
}

} // namespace

void mulAddRows(Weight w, int64_t k, int64_t row0, int64_t rows, int64_t n,
                const float *const *x, int64_t tokens, float *const *y) {
  // 16 columns of a row: whole 32-bit words of int4 under one scale.
  const bool blocked = n % 16 == 0 && k % 16 == 0 && !w.panels() &&
                       (!w.quantized() || w.group % 16 == 0);
  if (isa() < Isa::Avx512 || !blocked) {
    thread_local std::vector<float> rowScratch;
    float *const row = scratch(rowScratch, n);
    for (int64_t r = 0; r < rows; ++r) {
      toF32(w, size_t((row0 + r) * k), size_t(n), row);
      for (int64_t i = 0; i < tokens; ++i)
        mulAddRow(x[i][r], row, y[i], n);
    }
    return;
  }
  // All the rows into L2 first: a pass reads 32 bytes of each (of int4),
  // too far apart for the prefetchers, and stalled on every row (DeepSeek's
  // W_uk of a head, 32 KB: absorb 72 -> 60 us a layer at decode).
  const char *first = static_cast<const char *>(w.data) + bytesOf(w.type, size_t(row0 * k));
  for (size_t b = 0; b < bytesOf(w.type, size_t(rows * k)); b += 64)
    _mm_prefetch(first + b, _MM_HINT_T1);
  // Kept between calls: a decode step makes one a head and layer.
  thread_local std::vector<int64_t> scaleRowScratch;
  int64_t *const scaleRow = scratch(scaleRowScratch, rows);
  for (int64_t r = 0; w.quantized() && r < rows; ++r)
    scaleRow[r] = w.scaleIndex(row0 + r, 0);
  withType(w.type, [&](auto type) {
    constexpr WeightType W = decltype(type)::value;
    for (int64_t i = 0; i < tokens; i += kRowTokens) {
      // x and y from token i: a pass reads its T tokens from 0.
      const float *const *xi = x + i;
      float *const *yi = y + i;
      const int64_t *sr = scaleRow;
      const int64_t t = std::min(kRowTokens, tokens - i);
      // Passes of kRowBlocks registers a token, then of one.
      auto pass = [&](int64_t c0, auto blocks) {
        constexpr int B = decltype(blocks)::value;
        t == 1   ? mulAddRowsAvx512<W, 1, B>(w, k, row0, rows, c0, sr, xi, yi)
        : t == 2 ? mulAddRowsAvx512<W, 2, B>(w, k, row0, rows, c0, sr, xi, yi)
        : t == 3 ? mulAddRowsAvx512<W, 3, B>(w, k, row0, rows, c0, sr, xi, yi)
                 : mulAddRowsAvx512<W, 4, B>(w, k, row0, rows, c0, sr, xi, yi);
        return c0 + 16 * B;
      };
      int64_t c0 = 0;
      while (n - c0 >= 16 * kRowBlocks)
        c0 = pass(c0, std::integral_constant<int, int(kRowBlocks)>());
      while (c0 < n)
        c0 = pass(c0, std::integral_constant<int, 1>());
    }
  });
}

void unscaledToF32(Weight w, size_t first, size_t count, float *dst) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = unscaled(w, first + i);
}

// Kept in this file so the loops inline the converters.
void toF32(Weight w, size_t first, size_t count, float *dst) {
  if (w.panels()) {
    for (size_t i = 0; i < count; ++i)
      dst[i] = w.at(first + i);
    return;
  }
  const auto *src16 = static_cast<const uint16_t *>(w.data) + first;
  switch (w.type) {
  case WeightType::F32:
    std::memcpy(dst, static_cast<const float *>(w.data) + first,
                count * sizeof(float));
    return;
  case WeightType::BF16:
    for (size_t i = 0; i < count; ++i)
      dst[i] = bf16ToF32(src16[i]);
    return;
  case WeightType::F16:
    for (size_t i = 0; i < count; ++i)
      dst[i] = f16ToF32(src16[i]);
    return;
  case WeightType::I8:
  case WeightType::I4:
  case WeightType::F8:
    // A run of elements under one scale at a time (what dequantize() gives
    // each, without a division per element: MLA converts kv_b's rows).
    for (size_t i = 0; i < count;) {
      const int64_t e = int64_t(first + i), row = e / w.cols, col = e % w.cols;
      const int64_t end = std::min((col / w.group + 1) * w.group, w.cols);
      const size_t run = std::min(count - i, size_t(end - col));
      scaledRun(w, first + i, run, w.scales[w.scaleIndex(row, col)], dst + i);
      i += run;
    }
    return;
  }
}

} // namespace detail
} // namespace moe::cpu
