//===- Numeric.cpp - f32 -> fp8 e4m3 ---------------------------------------===//
#include "kernels/cpu/Numeric.h"

#include <algorithm>
#include <cmath>

namespace moe::cpu {

uint8_t f32ToFp8(float f) {
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::min(std::fabs(f), 448.0f);
  if (!(a >= std::ldexp(1.0f, -10))) // below half the smallest subnormal (or NaN)
    return sign;
  int e;
  std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
  int exp = std::max(e - 1, -6); // unbiased exponent, subnormals at -6
  float step = std::ldexp(1.0f, exp - 3); // 3 mantissa bits
  float q = std::nearbyint(a / step) * step;
  if (q >= std::ldexp(1.0f, exp + 1))
    ++exp; // rounding carried into the next binade
  q = std::min(q, 448.0f);
  int biased = exp + 7;
  int mant;
  if (q < std::ldexp(1.0f, -6)) { // subnormal
    biased = 0;
    mant = int(std::nearbyint(q / std::ldexp(1.0f, -9)));
  } else {
    mant = int(std::nearbyint((q / std::ldexp(1.0f, exp) - 1.0f) * 8));
  }
  return uint8_t(sign | (biased << 3) | mant);
}

} // namespace moe::cpu
