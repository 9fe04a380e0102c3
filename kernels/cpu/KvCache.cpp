//===- KvCache.cpp - storing and loading KV rows -------------------------===//
#include "kernels/cpu/KvCache.h"
#include "kernels/cpu/Numeric.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moe::cpu {

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
      dst[i] = f32ToBf16(src[i]);
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
                             : f32ToFp8(x);
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
      scratch[i] = bf16ToF32(src[i]);
    return scratch;
  }
  case KvType::Int8:
  case KvType::Fp8E4M3: {
    const auto *src = static_cast<const uint8_t *>(p.data) + r * w + head * d;
    float scale = p.scales[r * p.heads + head];
    for (int64_t i = 0; i < d; ++i)
      scratch[i] = (type == KvType::Int8 ? float(int8_t(src[i])) : fp8ToF32(src[i])) * scale;
    return scratch;
  }
  }
  return scratch;
}

} // namespace moe::cpu
