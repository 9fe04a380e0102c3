//===- KvCache.cpp - storing and loading KV rows -------------------------===//
#include "kernels/cpu/KvCache.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace moe::cpu {

namespace {

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1); // round to nearest even
  return uint16_t(u >> 16);
}

float fromBf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// fp8 e4m3 (OCP "FN": no infinities, max 448), round to nearest even.
uint8_t toFp8(float f) {
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

float decodeFp8(uint8_t b) {
  float sign = (b & 0x80) ? -1.0f : 1.0f;
  int biased = (b >> 3) & 0xf, mant = b & 7;
  if (biased == 0)
    return sign * std::ldexp(float(mant), -9);
  return sign * std::ldexp(1.0f + float(mant) / 8.0f, biased - 7);
}

/// All 256 fp8 values, decoded once.
float fromFp8(uint8_t b) {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i)
      t[size_t(i)] = decodeFp8(uint8_t(i));
    return t;
  }();
  return table[b];
}

} // namespace

int64_t kvElementBytes(KvType type) {
  switch (type) {
  case KvType::F32: return 4;
  case KvType::BF16: return 2;
  case KvType::Int8: case KvType::Fp8E4M3: return 1;
  }
  return 4;
}

void KvCache::store(const KvPlane &p, int64_t token, int64_t position, const float *src) const {
  int64_t r = row(token, position), w = p.width;
  switch (type) {
  case KvType::F32:
    std::memcpy(static_cast<float *>(p.data) + r * w, src, size_t(w) * 4);
    return;
  case KvType::BF16: {
    auto *dst = static_cast<uint16_t *>(p.data) + r * w;
    for (int64_t i = 0; i < w; ++i)
      dst[i] = toBf16(src[i]);
    return;
  }
  case KvType::Int8:
  case KvType::Fp8E4M3: {
    int64_t d = w / p.heads;
    auto *dst = static_cast<uint8_t *>(p.data) + r * w;
    for (int64_t h = 0; h < p.heads; ++h) {
      float top = 0;
      for (int64_t i = 0; i < d; ++i)
        top = std::max(top, std::fabs(src[h * d + i]));
      float limit = type == KvType::Int8 ? 127.0f : 448.0f;
      float scale = top > 0 ? top / limit : 1.0f;
      p.scales[r * p.heads + h] = scale;
      for (int64_t i = 0; i < d; ++i) {
        float x = src[h * d + i] / scale;
        dst[h * d + i] = type == KvType::Int8
                             ? uint8_t(int8_t(std::clamp(std::nearbyint(x), -127.0f, 127.0f)))
                             : toFp8(x);
      }
    }
    return;
  }
  }
}

const float *KvCache::load(const KvPlane &p, int64_t token, int64_t position, int64_t head,
                           float *scratch) const {
  int64_t r = row(token, position), w = p.width, d = w / p.heads;
  switch (type) {
  case KvType::F32:
    return static_cast<const float *>(p.data) + r * w + head * d;
  case KvType::BF16: {
    const auto *src = static_cast<const uint16_t *>(p.data) + r * w + head * d;
    for (int64_t i = 0; i < d; ++i)
      scratch[i] = fromBf16(src[i]);
    return scratch;
  }
  case KvType::Int8:
  case KvType::Fp8E4M3: {
    const auto *src = static_cast<const uint8_t *>(p.data) + r * w + head * d;
    float scale = p.scales[r * p.heads + head];
    for (int64_t i = 0; i < d; ++i)
      scratch[i] = (type == KvType::Int8 ? float(int8_t(src[i])) : fromFp8(src[i])) * scale;
    return scratch;
  }
  }
  return scratch;
}

} // namespace moe::cpu
