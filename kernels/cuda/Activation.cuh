//===- Activation.cuh - the logistic functions the kernels share -*- CUDA -*-===//
#ifndef MOE_KERNELS_CUDA_ACTIVATION_CUH
#define MOE_KERNELS_CUDA_ACTIVATION_CUH

#include <cmath>

namespace moe::cuda {

/// 1 / (1 + e^-x): router scores, Qwen2-MoE's shared-expert gate.
__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/// silu(g) = g / (1 + e^-g): SwiGLU's gate.
__device__ inline float silu(float g) { return g / (1.0f + expf(-g)); }

} // namespace moe::cuda

#endif
