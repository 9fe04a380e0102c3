//===- Numeric.h - scalar conversions between f32 and storage types -*- C++ -*-===//
//
// One definition of each 16- and 8-bit float format, shared by the CPU
// kernels (weights, KV cache), moe-compile's weight encoder and the CUDA
// kernels (kernels/cuda: the decoders, compiled for the device too, so both
// backends read a weight as the same f32). Inline: the kernels' row loops
// vectorize through them. f32ToFp8 was checked against its former
// std::-function form on all 2^32 floats: the same bytes.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_KERNELS_CPU_NUMERIC_H
#define MOE_KERNELS_CPU_NUMERIC_H

#include <math.h> // the float functions (ldexpf, frexpf, ...): host and device alike

#include <cstdint>
#include <cstring>

/// What the decoders (and the bf16 encoder, for KV-cache rows) are: host
/// and device functions under nvcc.
#ifdef __CUDACC__
#define MOE_DECODER __host__ __device__ inline
#else
#define MOE_DECODER inline
#endif

namespace moe::cpu {

MOE_DECODER float floatFromBits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

MOE_DECODER uint32_t bitsOfFloat(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/// bf16 is the high half of an f32.
MOE_DECODER float bf16ToF32(uint16_t h) { return floatFromBits(uint32_t(h) << 16); }

/// f32 -> bf16, round to nearest even (NaN stays NaN).
MOE_DECODER uint16_t f32ToBf16(float f) {
  uint32_t u = bitsOfFloat(f);
  if ((u & 0x7fffffff) > 0x7f800000)
    return uint16_t((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

/// IEEE half -> f32: all three cases computed, then picked by bit masks, so
/// that row loops vectorize (GCC will not if-convert a conditional float
/// subtraction). Subnormals are built as 2^-14 * (1.m) - 2^-14, exactly,
/// rather than by scaling an f32 denormal, which would read as zero under
/// denormals-are-zero.
MOE_DECODER float f16ToF32(uint16_t h) {
  const uint32_t magnitude = uint32_t(h & 0x7fff) << 13; // exponent+mantissa
  const uint32_t exponent = magnitude & 0x0f800000;
  const float normal = floatFromBits(magnitude + (112u << 23)); // rebias 15 -> 127
  const float subnormal = floatFromBits(magnitude + (113u << 23)) - 0x1p-14f;
  const uint32_t infNan = magnitude + (224u << 23); // exponent 31 -> 255
  const uint32_t isSubnormal = -uint32_t(exponent == 0);
  const uint32_t isInfNan = -uint32_t(exponent == 0x0f800000);
  uint32_t bits = (bitsOfFloat(subnormal) & isSubnormal) | (bitsOfFloat(normal) & ~isSubnormal);
  bits = (infNan & isInfNan) | (bits & ~isInfNan);
  return floatFromBits(bits | uint32_t(h & 0x8000) << 16);
}

/// f32 -> fp8 e4m3 (OCP "FN": no infinities, max 448), round to nearest even;
/// larger magnitudes saturate to 448; NaN becomes a signed zero. The C
/// float functions, which CUDA has on the device too (the KV cache's store).
MOE_DECODER uint8_t f32ToFp8(float f) {
  const uint8_t sign = signbit(f) ? 0x80 : 0;
  float a = fabsf(f);
  if (a > 448.0f)
    a = 448.0f;
  if (!(a >= ldexpf(1.0f, -10))) // below half the smallest subnormal (or NaN)
    return sign;
  int e;
  frexpf(a, &e); // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1 > -6 ? e - 1 : -6; // unbiased exponent, subnormals at -6
  const float step = ldexpf(1.0f, exp - 3); // 3 mantissa bits
  float q = nearbyintf(a / step) * step;
  if (q >= ldexpf(1.0f, exp + 1))
    ++exp; // rounding carried into the next binade
  if (q > 448.0f)
    q = 448.0f;
  int biased = exp + 7;
  int mant;
  if (q < ldexpf(1.0f, -6)) { // subnormal
    biased = 0;
    mant = int(nearbyintf(q / ldexpf(1.0f, -9)));
  } else {
    mant = int(nearbyintf((q / ldexpf(1.0f, exp) - 1.0f) * 8));
  }
  return uint8_t(sign | (biased << 3) | mant);
}
/// fp8 e4m3 -> f32, as f16ToF32: both cases computed and picked by a bit
/// mask, so that row loops vectorize. Subnormals are 2^-6 * (1.m) - 2^-6,
/// exactly. 0x7f and 0xff (NaN in OCP e4m3fn; the encoder never writes
/// them) read as +-480.
MOE_DECODER float fp8ToF32(uint8_t b) {
  const uint32_t magnitude = uint32_t(b & 0x7f) << 20; // exponent+mantissa
  const float normal = floatFromBits(magnitude + (120u << 23)); // rebias 7 -> 127
  const float subnormal = floatFromBits(magnitude + (121u << 23)) - 0x1p-6f;
  const uint32_t isSubnormal = -uint32_t((magnitude & 0x07800000) == 0);
  const uint32_t bits =
      (bitsOfFloat(subnormal) & isSubnormal) | (bitsOfFloat(normal) & ~isSubnormal);
  return floatFromBits(bits | uint32_t(b & 0x80) << 24);
}

} // namespace moe::cpu

#endif
