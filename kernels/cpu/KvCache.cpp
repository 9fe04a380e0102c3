//===- KvCache.cpp - storing and loading KV rows -------------------------===//
#include "kernels/cpu/KvCache.h"
#include "kernels/cpu/LinearDetail.h"
#include "moe/abi/Numeric.h"
#include "kernels/cpu/PrefetchLines.h"

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

namespace {

/// Head `head` of `count` consecutive rows from `first` on, as f32 at `to`
/// (d floats a row), converted exactly and multiplied once by the row's
/// scale: one loop per type, the same values as the AVX2 build below.
template <KvType T>
void widenRows(const KvPlane &p, int64_t first, int64_t count, int64_t head, float *to) {
  const int64_t w = p.width, d = w / p.heads;
  for (int64_t r = first; r < first + count; ++r, to += d) {
    if constexpr (T == KvType::BF16) {
      const auto *src = static_cast<const uint16_t *>(p.data) + r * w + head * d;
      for (int64_t e = 0; e < d; ++e)
        to[e] = bf16ToF32(src[e]);
    } else {
      const float scale = p.scales[r * p.heads + head];
      if constexpr (T == KvType::Int8) {
        const auto *src = static_cast<const int8_t *>(p.data) + r * w + head * d;
        for (int64_t e = 0; e < d; ++e)
          to[e] = float(src[e]) * scale;
      } else {
        const auto *src = static_cast<const uint8_t *>(p.data) + r * w + head * d;
        for (int64_t e = 0; e < d; ++e)
          to[e] = fp8ToF32(src[e]) * scale;
      }
    }
  }
}

/// widenRows 8 elements at a time, converted as the linear kernels convert
/// weights of the same storage type (detail::load8): a head is often not a
/// multiple of the 32 bytes GCC's own vector loop wants (40 on the trained
/// example).
template <KvType T>
__attribute__((target("avx2,f16c"))) void widenRowsAvx2(const KvPlane &p, int64_t first,
                                                        int64_t count, int64_t head,
                                                        float *to) {
  constexpr WeightType W = T == KvType::BF16   ? WeightType::BF16
                           : T == KvType::Int8 ? WeightType::I8
                                               : WeightType::F8;
  const int64_t w = p.width, d = w / p.heads, bytes = kvElementBytes(T);
  for (int64_t r = first; r < first + count; ++r, to += d) {
    const auto *src = static_cast<const uint8_t *>(p.data) + (r * w + head * d) * bytes;
    // bf16 rows carry no scale.
    const float s = T == KvType::BF16 ? 1.0f : p.scales[r * p.heads + head];
    auto scaled = [s](__m256 v) __attribute__((target("avx2"))) {
      return T == KvType::BF16 ? v : _mm256_mul_ps(v, _mm256_set1_ps(s));
    };
    int64_t e = 0;
    for (; e + detail::kLanes <= d; e += detail::kLanes)
      _mm256_storeu_ps(to + e, scaled(detail::load8<W>(src + e * bytes)));
    if (e < d)
      _mm256_maskstore_ps(to + e, detail::tailMask(d - e),
                          scaled(detail::load8<W>(src + e * bytes, d - e)));
  }
}

template <KvType T>
void widenRowsAnyIsa(const KvPlane &p, int64_t first, int64_t count, int64_t head, float *to) {
  if (useAvx2())
    widenRowsAvx2<T>(p, first, count, head, to);
  else
    widenRows<T>(p, first, count, head, to);
}

} // namespace

KvCache::Rows KvCache::rows(const KvPlane &p, int64_t token, int64_t position, int64_t head,
                            int64_t count, float *scratch) const {
  // The rows of a run are consecutive in the cache (one block).
  const int64_t first = row(token, position), w = p.width, d = w / p.heads;
  switch (type) {
  case KvType::F32:
    return {static_cast<const float *>(p.data) + first * w + head * d, w};
  case KvType::BF16: widenRowsAnyIsa<KvType::BF16>(p, first, count, head, scratch); break;
  case KvType::Int8: widenRowsAnyIsa<KvType::Int8>(p, first, count, head, scratch); break;
  case KvType::Fp8E4M3: widenRowsAnyIsa<KvType::Fp8E4M3>(p, first, count, head, scratch); break;
  }
  return {scratch, d};
}

void KvCache::prefetch(const KvPlane &p, int64_t token, int64_t first, int64_t end,
                       int64_t head) const {
  const int64_t bytes = kvElementBytes(type), d = p.width / p.heads;
  // Block by block: a row's place costs two divisions, once a run of the
  // block's consecutive rows (a decode batch asks for every row it reads).
  for (int64_t position = first, run; position < end; position += run) {
    run = std::min(end - position, runLength(position));
    const int64_t r0 = row(token, position);
    for (int64_t r = r0; r < r0 + run; ++r) {
      prefetchLines(static_cast<const char *>(p.data) + (r * p.width + head * d) * bytes,
                    d * bytes);
      if (p.scales)
        __builtin_prefetch(p.scales + r * p.heads + head);
    }
  }
}

} // namespace moe::cpu
