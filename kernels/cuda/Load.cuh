//===- Load.cuh - weights of every type as f32 on the device -----*- CUDA -*-===//
#ifndef MOE_KERNELS_CUDA_LOAD_CUH
#define MOE_KERNELS_CUDA_LOAD_CUH

#include "moe/abi/Numeric.h"
#include "kernels/cuda/Kernels.h"
#include "kernels/cuda/Reduce.cuh"

namespace moe::cuda {

/// Element (row, col) of `w` as f32: decoded as the CPU kernels decode it
/// (moe/abi/Numeric.h), times its scale for the scaled types.
__device__ inline float at(const Weight &w, int64_t row, int64_t col) {
  const int64_t i = row * w.cols + col;
  float v;
  switch (w.dtype) {
  case rt::DType::BF16: return cpu::bf16ToF32(static_cast<const uint16_t *>(w.data)[i]);
  case rt::DType::F16: return cpu::f16ToF32(static_cast<const uint16_t *>(w.data)[i]);
  case rt::DType::I8: v = float(static_cast<const int8_t *>(w.data)[i]); break;
  case rt::DType::I4: {
    const uint8_t byte = static_cast<const uint8_t *>(w.data)[i / 2];
    v = float(int((i % 2 ? byte >> 4 : byte & 0xf) ^ 8) - 8); // sign-extend the nibble
    break;
  }
  case rt::DType::F8E4M3: v = cpu::fp8ToF32(static_cast<const uint8_t *>(w.data)[i]); break;
  default: return static_cast<const float *>(w.data)[i];
  }
  const int64_t groups = (w.cols + w.group - 1) / w.group;
  return v * w.scales[(w.rowOffset + row) / w.rowGroup * groups + col / w.group];
}

/// x . (row `row` of w) over k elements by one warp: lane l takes elements
/// l, l + 32, ..., then warpSum adds the lanes. The sum is in lane 0.
__device__ inline float warpRowDot(const float *x, const Weight &w, int64_t row, int64_t k) {
  float sum = 0.0f;
  for (int64_t c = threadIdx.x % 32; c < k; c += 32)
    sum += x[c] * at(w, row, c);
  return warpSum(sum);
}

} // namespace moe::cuda

#endif
