//===- Weight.cpp - weight element access and conversion to f32 -----------===//

#include "kernels/cpu/Kernels.h"
#include "kernels/cpu/WeightDetail.h"

#include <cstring>

namespace moe::cpu {
namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t toBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// bf16 is the high half of an f32.
float bf16ToF32(uint16_t h) { return fromBits(uint32_t(h) << 16); }

// IEEE half -> f32: all three cases computed, then picked by bit masks, so
// that the row loop below vectorizes (GCC will not if-convert a conditional
// float subtraction). Subnormals are built as 2^-14 * (1.m) - 2^-14, exactly,
// rather than by scaling an f32 denormal, which would read as zero under
// denormals-are-zero.
float f16ToF32(uint16_t h) {
  const uint32_t magnitude = uint32_t(h & 0x7fff) << 13; // exponent+mantissa
  const uint32_t exponent = magnitude & 0x0f800000;
  const float normal = fromBits(magnitude + (112u << 23)); // rebias 15 -> 127
  const float subnormal = fromBits(magnitude + (113u << 23)) - 0x1p-14f;
  const uint32_t infNan = magnitude + (224u << 23); // exponent 31 -> 255
  const uint32_t isSubnormal = -uint32_t(exponent == 0);
  const uint32_t isInfNan = -uint32_t(exponent == 0x0f800000);
  uint32_t bits =
      (toBits(subnormal) & isSubnormal) | (toBits(normal) & ~isSubnormal);
  bits = (infNan & isInfNan) | (bits & ~isInfNan);
  return fromBits(bits | uint32_t(h & 0x8000) << 16);
}

// Element i of a quantized weight: its integer times the scale of its row
// and group.
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
