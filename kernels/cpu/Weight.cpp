//===- Weight.cpp - weight element access and conversion to f32 -----------===//

#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/LinearDetail.h"
#include "kernels/cpu/Numeric.h"
#include "kernels/cpu/WeightDetail.h"

#include <algorithm>
#include <cstring>

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

} // namespace

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
