//===- Weight.cpp - weight element access and conversion to f32 -----------===//

#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/Numeric.h"
#include "kernels/cpu/WeightDetail.h"

#include <cstring>

namespace moe::cpu {
namespace {

// The integer of element i of a quantized weight.
int integer(const Weight &w, size_t i) {
  if (w.type == WeightType::I8)
    return static_cast<const int8_t *>(w.data)[i];
  const uint8_t byte = static_cast<const uint8_t *>(w.data)[i / 2];
  return ((i % 2 ? byte >> 4 : byte & 0xf) ^ 8) - 8; // sign-extend the nibble
}

float dequantize(const Weight &w, size_t i) {
  const size_t cols = size_t(w.cols), group = size_t(w.group);
  const size_t row = i / cols, col = i % cols;
  return float(integer(w, i)) * w.scales[row * ((cols + group - 1) / group) + col / group];
}

} // namespace

float Weight::at(size_t i) const {
  switch (type) {
  case WeightType::F32:
    return static_cast<const float *>(data)[i];
  case WeightType::BF16:
    return bf16ToF32(static_cast<const uint16_t *>(data)[i]);
  case WeightType::F16:
    return f16ToF32(static_cast<const uint16_t *>(data)[i]);
  case WeightType::I8:
  case WeightType::I4:
    return dequantize(*this, i);
  }
  return 0.0f;
}

Weight Weight::offset(size_t elements) const {
  Weight w = *this;
  w.data = static_cast<const char *>(data) + detail::bytesOf(type, elements);
  if (quantized())
    w.scales += elements / size_t(cols) * size_t((cols + group - 1) / group);
  return w;
}

namespace detail {

void integersToF32(Weight w, size_t first, size_t count, float *dst) {
  for (size_t i = 0; i < count; ++i)
    dst[i] = float(integer(w, first + i));
}

// Kept in this file so the loops inline the converters.
void toF32(Weight w, size_t first, size_t count, float *dst) {
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
    for (size_t i = 0; i < count; ++i)
      dst[i] = dequantize(w, first + i);
    return;
  }
}

} // namespace detail
} // namespace moe::cpu
