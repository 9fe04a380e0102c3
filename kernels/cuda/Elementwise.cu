//===- Elementwise.cu - embedding, norms, add, SiLU gate -----------------===//
//
// Memory-bound kernels: a norm or a gate takes one block a row (its sum is
// a fixed-order block reduction, Reduce.cuh), the rest a thread an element.
// Math as kernels/cpu; each is compared with the conformance suite's
// double references (test/conformance/KernelTest.cpp).
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/Activation.cuh"
#include "kernels/cuda/Kernels.h"
#include "kernels/cuda/Load.cuh"
#include "kernels/cuda/Reduce.cuh"

#include <cmath>

namespace moe::cuda {

namespace {

constexpr int kElementThreads = 256;

/// Blocks of kElementThreads covering n elements (a grid-stride loop does
/// the rest past the grid's limit).
unsigned elementBlocks(int64_t n) {
  const int64_t blocks = (n + kElementThreads - 1) / kElementThreads;
  return unsigned(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

/// A launch's error: a bad configuration or an earlier asynchronous one.
cudaError_t launched() { return cudaGetLastError(); }

__global__ void embeddingKernel(const int32_t *ids, Weight table, int64_t vocab,
                                int64_t hidden, float *out) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  float *row = out + t * hidden;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
    row[c] = id >= 0 && id < vocab ? at(table, id, c) : NAN;
}

/// out = x * rsqrt(mean(x^2) + eps) * w for the block's row; when `b` is
/// given, x = a + b is stored to `sum` first.
__global__ void rmsNormKernel(const float *a, const float *b, int64_t cols, Weight w,
                              float eps, float *out, float *sum) {
  const int64_t r = blockIdx.x;
  const float *ar = a + r * cols;
  const float *br = b ? b + r * cols : nullptr;
  float *sr = sum ? sum + r * cols : nullptr;
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float x = ar[c];
    if (br) {
      x += br[c];
      sr[c] = x;
    }
    squares += x * x;
  }
  const float inv = rsqrtf(blockSum(squares) / float(cols) + eps);
  // Each thread rereads only the elements it wrote: no barrier needed.
  const float *xr = sr ? sr : ar;
  float *yr = out + r * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = xr[c] * inv * at(w, 0, c);
}

__global__ void addKernel(const float *a, const float *b, int64_t n, float *out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void siluMulKernel(const float *gate, const float *up, int64_t rows, int64_t cols,
                              int64_t stride, float *out) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / cols, c = i % cols;
    const float g = gate[t * stride + c];
    out[i] = silu(g) * up[t * stride + c];
  }
}

__global__ void sigmoidGateKernel(const float *x, Weight g, const float *y, int64_t hidden,
                                  float *out) {
  const int64_t t = blockIdx.x;
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
    dot += x[t * hidden + c] * at(g, 0, c);
  const float gate = sigmoid(blockSum(dot));
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
    out[t * hidden + c] = gate * y[t * hidden + c];
}

} // namespace

cudaError_t embedding(const int32_t *ids, int64_t tokens, Weight table, int64_t vocab,
                      int64_t hidden, float *out, cudaStream_t stream) {
  if (tokens > 0)
    embeddingKernel<<<unsigned(tokens), kRowThreads, 0, stream>>>(ids, table, vocab, hidden,
                                                                  out);
  return launched();
}

cudaError_t rmsNorm(const float *x, int64_t rows, int64_t cols, Weight w, float eps,
                    float *out, cudaStream_t stream) {
  if (rows > 0)
    rmsNormKernel<<<unsigned(rows), kRowThreads, 0, stream>>>(x, nullptr, cols, w, eps, out,
                                                              nullptr);
  return launched();
}

cudaError_t addRmsNorm(const float *a, const float *b, int64_t rows, int64_t cols,
                       Weight w, float eps, float *sum, float *out, cudaStream_t stream) {
  if (rows > 0)
    rmsNormKernel<<<unsigned(rows), kRowThreads, 0, stream>>>(a, b, cols, w, eps, out, sum);
  return launched();
}

cudaError_t add(const float *a, const float *b, int64_t n, float *out, cudaStream_t stream) {
  if (n > 0)
    addKernel<<<elementBlocks(n), kElementThreads, 0, stream>>>(a, b, n, out);
  return launched();
}

cudaError_t siluMul(const float *gate, const float *up, int64_t rows, int64_t cols,
                    int64_t stride, float *out, cudaStream_t stream) {
  if (rows > 0 && cols > 0)
    siluMulKernel<<<elementBlocks(rows * cols), kElementThreads, 0, stream>>>(gate, up, rows,
                                                                              cols, stride, out);
  return launched();
}

cudaError_t sigmoidGate(const float *x, Weight g, const float *y, int64_t tokens,
                        int64_t hidden, float *out, cudaStream_t stream) {
  if (tokens > 0)
    sigmoidGateKernel<<<unsigned(tokens), kRowThreads, 0, stream>>>(x, g, y, hidden, out);
  return launched();
}

} // namespace moe::cuda
