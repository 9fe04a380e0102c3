//===- KvCacheTest.cpp - KV rows stored and read back, every element type ===//
//
// KvCache::rows against the stored bytes decoded by the formats' closed
// forms (written here, in double), for head widths that are and are not a
// multiple of the vector loops' 8 elements; kernel-tests runs it on each
// ISA level (CMakeLists.txt), which must all give these values.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/KvCache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace moe::cpu;

namespace {

// The value of the element stored at `at` (two bytes for bf16), before its
// scale.
double decode(KvType type, const uint8_t *at) {
  switch (type) {
  case KvType::BF16: {
    uint16_t h;
    std::memcpy(&h, at, 2);
    uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  case KvType::Int8: return double(int8_t(*at));
  case KvType::Fp8E4M3: {
    const int e = (*at >> 3) & 15, m = *at & 7;
    return (*at & 0x80 ? -1 : 1) * (e ? std::ldexp(8 + m, e - 10) : std::ldexp(m, -9));
  }
  case KvType::F32: break;
  }
  ADD_FAILURE() << "no closed form for this type";
  return 0;
}

// How far a stored element may be from what was stored, at most (half a step
// of the format, and a little for the f32 division and product).
double bound(KvType type, float x, float scale) {
  switch (type) {
  case KvType::BF16: return std::ldexp(std::fabs(x), -8);
  case KvType::Int8: return 0.5 * scale * (1 + 1e-5);
  case KvType::Fp8E4M3: return (std::ldexp(std::fabs(x), -4) + std::ldexp(scale, -10)) * (1 + 1e-5);
  case KvType::F32: break;
  }
  return 0;
}

// One sequence of 37 tokens in a 3-block cache whose blocks are not in
// order, 3 heads of `dim`; every row read back through rows() in runs.
void checkRows(KvType type, int64_t dim) {
  constexpr int64_t kHeads = 3, kBlock = 16, kTokens = 37;
  const int64_t width = kHeads * dim, rows = 3 * kBlock;
  std::vector<uint8_t> data(size_t(rows * width * kvElementBytes(type)));
  std::vector<float> scales(size_t(rows * kHeads), NAN);
  const std::vector<int32_t> table = {2, 0, 1};
  KvCache cache;
  cache.type = type;
  cache.k = {data.data(), kvScaled(type) ? scales.data() : nullptr, width, kHeads};
  cache.blockSize = kBlock;
  cache.tables = table.data();
  cache.tableStride = int64_t(table.size());

  std::mt19937 rng{unsigned(dim)};
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> x(size_t(kTokens * width));
  for (float &f : x)
    f = dist(rng);
  x[5] = 0.0f; // exact zero, and a row head of zeros (scale 1)
  std::fill(x.begin() + width, x.begin() + width + dim, 0.0f);
  for (int64_t t = 0; t < kTokens; ++t)
    cache.store(cache.k, 0, t, x.data() + t * width);

  std::vector<float> scratch(size_t(kBlock * dim));
  for (int64_t head = 0; head < kHeads; ++head)
    for (int64_t t = 0; t < kTokens;) {
      const int64_t run = std::min(kTokens - t, cache.runLength(t));
      const KvCache::Rows got = cache.rows(cache.k, 0, t, head, run, scratch.data());
      for (int64_t i = 0; i < run; ++i) {
        const int64_t r = cache.row(0, t + i);
        const float scale = kvScaled(type) ? scales[size_t(r * kHeads + head)] : 1.0f;
        for (int64_t e = 0; e < dim; ++e) {
          const uint8_t *at =
              data.data() + size_t((r * width + head * dim + e) * kvElementBytes(type));
          const float want = float(decode(type, at)) * scale;
          const float value = got.data[i * got.stride + e];
          ASSERT_EQ(value, want) << "token " << t + i << " head " << head << " element " << e;
          const float stored = x[size_t((t + i) * width + head * dim + e)];
          ASSERT_LE(std::fabs(value - stored), bound(type, stored, scale))
              << "token " << t + i << " head " << head << " element " << e;
        }
      }
      t += run;
    }
}

TEST(KvCacheRows, StoredValuesReadBack) {
  for (KvType type : {KvType::BF16, KvType::Int8, KvType::Fp8E4M3})
    for (int64_t dim : {8, 13, 40, 72}) {
      SCOPED_TRACE(::testing::Message() << "type " << int(type) << " dim " << dim);
      checkRows(type, dim);
    }
}

// An f32 cache is read in place: rows() points into it, a row apart.
TEST(KvCacheRows, F32InPlace) {
  std::vector<float> data(size_t(2 * 4 * 6), 0.0f);
  const std::vector<int32_t> table = {1, 0};
  KvCache cache;
  cache.k = {data.data(), nullptr, 6, 2};
  cache.blockSize = 4;
  cache.tables = table.data();
  cache.tableStride = 2;
  const KvCache::Rows got = cache.rows(cache.k, 0, 1, 1, 3, nullptr);
  EXPECT_EQ(got.data, data.data() + (4 + 1) * 6 + 3);
  EXPECT_EQ(got.stride, 6);
}

} // namespace
