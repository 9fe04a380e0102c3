//===- moe-gpu-probe.cpp - a GPU's ceilings, for the GPU check's fractions -===//
//
//   moe-gpu-probe [--plan DIR]... [--json FILE]
//
// What tools/gpu-check.sh divides its measurements by (issue 21's
// acceptance), measured on the GPU in one process:
// - copy bandwidth: a device-to-device copy of --copy-mib, bytes read and
//   written counted, best of 10: the HBM roofline of a decode step;
// - for each --plan, the weight bytes a decode token reads
//   (cost::decodeWeightBytes, as moe-roofline counts them) and the
//   tokens a second that bandwidth allows;
// - our routed experts (kernels/cuda, bf16 weights) on --gemm-tokens
//   tokens of a 64-expert top-8 layer against one cuBLAS bf16 GEMM of the
//   same multiply-adds (f32 accumulation), best of 10 each.
// cuBLAS is the GPU machine's own, opened at run time (libcublas.so.13,
// 600 MB with cuBLASLt, cannot travel in the bundle): without it the GEMM
// figures say so and the rest stands.
//
//===----------------------------------------------------------------------===//
#include "kernels/cuda/Kernels.h"
#include "moe/runtime/Plan.h"
#include "tools/common/Cli.h"
#include "tools/common/Output.h"
#include "tools/plan-cost/PlanCost.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

int fail(const std::string &message) {
  std::fprintf(stderr, "moe-gpu-probe: error: %s\n", message.c_str());
  return 1;
}

/// Throws the call's error as one line.
struct CudaFailure {
  std::string what;
};
void check(cudaError_t e, const char *call) {
  if (e != cudaSuccess)
    throw CudaFailure{std::string(call) + ": " + cudaGetErrorString(e)};
}
#define CHECK(call) check((call), #call)

/// A device allocation, freed on scope exit.
template <typename T> struct DeviceArray {
  T *p = nullptr;
  explicit DeviceArray(size_t n) {
    CHECK(cudaMalloc(reinterpret_cast<void **>(&p), n * sizeof(T)));
  }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;
  void upload(const std::vector<T> &host) {
    CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
};

/// The best of `rounds` timings (seconds) of `work` on `stream`, after one
/// untimed warm-up.
double bestOf(int rounds, cudaStream_t stream, const std::function<void()> &work) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  work();
  CHECK(cudaStreamSynchronize(stream));
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    CHECK(cudaEventRecord(start, stream));
    work();
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, double(ms) / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

/// Bytes a second of a device-to-device copy of `bytes`, read and written.
double copyBandwidth(size_t bytes, cudaStream_t stream) {
  DeviceArray<char> a(bytes), b(bytes);
  CHECK(cudaMemsetAsync(a.p, 1, bytes, stream));
  const double s = bestOf(10, stream, [&] {
    CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * double(bytes) / s;
}

/// Random bf16 values of magnitude below 2^-4 (the high half of an f32).
std::vector<uint16_t> randomBf16(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> u(-0.0625f, 0.0625f);
  std::vector<uint16_t> v(n);
  for (uint16_t &x : v) {
    const float f = u(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    x = uint16_t(bits >> 16);
  }
  return v;
}

/// The routed experts layer the GEMM figures use (the benchmark model's).
struct Layer {
  int64_t tokens, hidden = 1024, inter = 256, experts = 64, topK = 8;
  double flops() const { return 2.0 * double(tokens * topK) * 3 * double(hidden * inter); }
};

/// FLOP/s of moe::cuda::experts on `layer` (bf16 weights, uniform routing).
double expertsRate(const Layer &l, cudaStream_t stream) {
  std::mt19937 rng(7);
  DeviceArray<uint16_t> gateUp(size_t(l.experts * 2 * l.inter * l.hidden)),
      down(size_t(l.experts * l.hidden * l.inter));
  gateUp.upload(randomBf16(size_t(l.experts * 2 * l.inter * l.hidden), rng));
  down.upload(randomBf16(size_t(l.experts * l.hidden * l.inter), rng));
  std::vector<float> x(size_t(l.tokens * l.hidden)), weights(size_t(l.tokens * l.topK));
  std::vector<int32_t> ids(size_t(l.tokens * l.topK));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float &v : x)
    v = u(rng);
  std::vector<int32_t> order(size_t(l.experts));
  for (int64_t t = 0; t < l.tokens; ++t) { // topK distinct experts, ascending
    for (int64_t e = 0; e < l.experts; ++e)
      order[size_t(e)] = int32_t(e);
    std::shuffle(order.begin(), order.end(), rng);
    std::sort(order.begin(), order.begin() + l.topK);
    for (int64_t j = 0; j < l.topK; ++j) {
      ids[size_t(t * l.topK + j)] = order[size_t(j)];
      weights[size_t(t * l.topK + j)] = 1.0f / float(l.topK);
    }
  }
  DeviceArray<float> dx(x.size()), dw(weights.size()), out(x.size());
  DeviceArray<int32_t> dids(ids.size());
  dx.upload(x);
  dw.upload(weights);
  dids.upload(ids);
  moe::cuda::ExpertWeights w;
  w.fused = true;
  w.gate = {gateUp.p, moe::rt::DType::BF16, l.hidden};
  w.down = {down.p, moe::rt::DType::BF16, l.inter};
  const double s = bestOf(10, stream, [&] {
    CHECK(moe::cuda::experts(dx.p, l.tokens, l.hidden, l.inter, l.experts, dw.p, dids.p, l.topK,
                             w, out.p, stream));
  });
  return l.flops() / s;
}

/// cuBLAS, opened from the machine's CUDA libraries.
struct Cublas {
  void *lib = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) setStream = nullptr;
  // cublasGemmEx is overloaded in C++ (cublas_api.h): the C signature.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                    int, int, const void *, const void *, cudaDataType, int,
                                    const void *, cudaDataType, int, const void *, void *,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx gemmEx = nullptr;
  std::string missing;
  Cublas() {
    lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      missing = dlerror();
      return;
    }
    create = reinterpret_cast<decltype(create)>(dlsym(lib, "cublasCreate_v2"));
    destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "cublasDestroy_v2"));
    setStream = reinterpret_cast<decltype(setStream)>(dlsym(lib, "cublasSetStream_v2"));
    gemmEx = reinterpret_cast<decltype(gemmEx)>(dlsym(lib, "cublasGemmEx"));
    if (!create || !destroy || !setStream || !gemmEx)
      missing = "libcublas.so.13 lacks cublasGemmEx or its handle functions";
  }
};

/// FLOP/s of one cuBLAS bf16 GEMM (f32 accumulation) with `layer`'s
/// multiply-adds: every token's topK rows against the three projections
/// at once, [tokens * topK, hidden] x [hidden, 3 * inter].
double cublasRate(const Cublas &cb, const Layer &l, cudaStream_t stream) {
  const int m = int(l.tokens * l.topK), n = int(3 * l.inter), k = int(l.hidden);
  std::mt19937 rng(11);
  DeviceArray<uint16_t> a(size_t(m) * k), b(size_t(k) * n);
  DeviceArray<float> c(size_t(m) * n);
  a.upload(randomBf16(size_t(m) * k, rng));
  b.upload(randomBf16(size_t(k) * n, rng));
  cublasHandle_t handle;
  if (cb.create(&handle) != CUBLAS_STATUS_SUCCESS)
    throw CudaFailure{"cublasCreate failed"};
  cb.setStream(handle, stream);
  const float alpha = 1.0f, beta = 0.0f;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  const double s = bestOf(10, stream, [&] {
    // Column-major: C^T [n, m] = B^T [n, k] x A^T [k, m].
    cublasStatus_t st = cb.gemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b.p,
                                  CUDA_R_16BF, n, a.p, CUDA_R_16BF, k, &beta, c.p, CUDA_R_32F, n,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS)
      status = st;
  });
  cb.destroy(handle);
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaFailure{"cublasGemmEx failed (status " + std::to_string(int(status)) + ")"};
  return l.flops() / s;
}

} // namespace

int main(int argc, char **argv) {
  moe::tools::Cli cli("moe-gpu-probe", "moe-gpu-probe: a GPU's copy bandwidth, each plan's "
                                       "decode roofline on it, and our grouped expert GEMM "
                                       "against cuBLAS (tools/gpu-check.sh)");
  std::vector<std::string> plans;
  std::string jsonPath;
  int64_t copyMib = 1024, gemmTokens = 4096;
  cli.app.add_option("--plan", plans, "a plan whose decode roofline to print (repeatable)")
      ->type_name("PLAN-DIR");
  cli.app.add_option("--copy-mib", copyMib, "bytes of the copy that measures bandwidth, MiB "
                                            "(default 1024)")
      ->check(moe::tools::integerIn(1, 1 << 16))
      ->type_name("N");
  cli.app.add_option("--gemm-tokens", gemmTokens, "tokens of the expert layer the GEMM "
                                                  "figures run (default 4096)")
      ->check(moe::tools::integerIn(1, 1 << 20))
      ->type_name("N");
  cli.addJson(jsonPath);
  if (auto code = cli.parse(argc, argv))
    return *code;
  moe::tools::Output out(jsonPath);
  if (moe::rt::Status s = out.open(); !s)
    return fail(s.message());
  std::FILE *text = out.text();
  // The plans first: a bad one is an error with or without a GPU.
  std::vector<uint64_t> planBytes;
  for (const std::string &dir : plans) {
    moe::rt::LoadOptions options;
    options.mapWeights = false;
    auto loaded = moe::rt::LoadedPlan::open(dir, options);
    if (!loaded)
      return fail(loaded.status().message());
    planBytes.push_back(moe::cost::decodeWeightBytes((*loaded)->plan(), 1));
  }
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0)
    return fail(std::string("no GPU (cudaGetDeviceCount: ") +
                (e == cudaSuccess ? "no devices" : cudaGetErrorString(e)) + ")");
  json doc;
  try {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    std::fprintf(text, "device: %s, %d multiprocessors, %.1f GiB\n", prop.name,
                 prop.multiProcessorCount, double(prop.totalGlobalMem) / (1ull << 30));
    doc["device"] = prop.name;
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const double copy = copyBandwidth(size_t(copyMib) << 20, stream);
    std::fprintf(text, "copy: %.0f GB/s (device to device, %lld MiB, bytes read and written, "
                       "best of 10)\n",
                 copy / 1e9, (long long)copyMib);
    doc["copy_gbps"] = copy / 1e9;
    doc["plans"] = json::array();
    for (size_t i = 0; i < plans.size(); ++i) {
      const std::string &dir = plans[i];
      const uint64_t bytes = planBytes[i];
      std::fprintf(text, "plan %s: a decode token reads %.1f MB of weights: roofline %.0f "
                         "tok/s at batch 1\n",
                   dir.c_str(), double(bytes) / 1e6, copy / double(bytes));
      doc["plans"].push_back({{"plan", dir},
                              {"bytes_per_token", bytes},
                              {"roofline_tokens_per_second", copy / double(bytes)}});
    }
    const Layer layer{gemmTokens};
    const double ours = expertsRate(layer, stream);
    std::fprintf(text, "our experts, %lld tokens of %lld experts top-%lld, hidden %lld, inter "
                       "%lld, bf16: %.1f TFLOP/s\n",
                 (long long)layer.tokens, (long long)layer.experts, (long long)layer.topK,
                 (long long)layer.hidden, (long long)layer.inter, ours / 1e12);
    doc["experts_tflops"] = ours / 1e12;
    const Cublas cublas;
    if (!cublas.missing.empty()) {
      std::fprintf(text, "cuBLAS: not measured (%s)\n", cublas.missing.c_str());
      doc["cublas"] = "not measured: " + cublas.missing;
    } else {
      const double dense = cublasRate(cublas, layer, stream);
      std::fprintf(text, "cuBLAS bf16 GEMM of the same multiply-adds: %.1f TFLOP/s; ours %.3f "
                         "of it\n",
                   dense / 1e12, ours / dense);
      doc["cublas_tflops"] = dense / 1e12;
      doc["experts_vs_cublas"] = ours / dense;
    }
    cudaStreamDestroy(stream);
  } catch (const CudaFailure &f) {
    return fail(f.what);
  }
  if (out.wantsJson())
    if (moe::rt::Status s = out.writeJson(doc); !s)
      return fail(s.message());
  return 0;
}
