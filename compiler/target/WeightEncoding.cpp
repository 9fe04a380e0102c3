//===- WeightEncoding.cpp - convert checkpoint rows to plan storage -------===//
#include "compiler/target/WeightEncoding.h"
#include "moe/abi/Numeric.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moe {

uint64_t Encoding::bytes(uint64_t rows) const {
  const uint64_t n = rows * uint64_t(cols);
  switch (dtype) {
  case plan::DType::BF16: return n * 2;
  case plan::DType::I8: case plan::DType::F8E4M3: return n;
  case plan::DType::I4: return n / 2;
  default: return n * 4;
  }
}

void encodeRows(const Encoding &e, const float *src, int64_t rows, std::vector<char> &out,
                std::vector<float> &scales) {
  const size_t start = out.size();
  out.resize(start + e.bytes(uint64_t(rows)));
  char *dst = out.data() + start;
  const int64_t n = rows * e.cols;
  if (e.dtype == plan::DType::F32) {
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  }
  if (e.dtype == plan::DType::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = cpu::f32ToBf16(src[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
    return;
  }
  // Blocks of rowGroup rows x group elements, each scaled to the format's
  // largest magnitude.
  const float qmax = e.dtype == plan::DType::I8 ? 127.0f : e.dtype == plan::DType::I4 ? 7.0f : 448.0f;
  for (int64_t r0 = 0; r0 < rows; r0 += e.rowGroup)
    for (int64_t c0 = 0; c0 < e.cols; c0 += e.group) {
      const int64_t r1 = std::min(rows, r0 + e.rowGroup), c1 = std::min(e.cols, c0 + e.group);
      float absmax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          absmax = std::max(absmax, std::abs(src[r * e.cols + c]));
      const float scale = absmax / qmax;
      scales.push_back(scale);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t i = r * e.cols + c;
          const float v = scale > 0.0f ? src[i] / scale : 0.0f;
          if (e.dtype == plan::DType::F8E4M3) {
            dst[i] = char(cpu::f32ToFp8(v));
            continue;
          }
          const float q = std::clamp(std::round(v), -qmax, qmax);
          if (e.dtype == plan::DType::I8)
            dst[i] = char(int8_t(q));
          else // two per byte, low nibble first
            dst[i / 2] = char(uint8_t(dst[i / 2]) | uint8_t((int(q) & 0xf) << (i % 2 ? 4 : 0)));
        }
    }
}

} // namespace moe
