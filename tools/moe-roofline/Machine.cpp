//===- Machine.cpp - this machine's memory and matmul ceilings ------------===//
#include "tools/moe-roofline/Machine.h"

#ifdef MOE_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace moe::roofline {
namespace {

template <typename F> double bestSeconds(int repeats, F &&f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                              .count());
  }
  return best;
}

} // namespace

double triadGBps(size_t elements, int repeats) {
  std::vector<float> a(elements), b(elements), c(elements);
  const long n = long(elements);
  // First touch on the threads that use the pages.
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) {
    a[size_t(i)] = 0.0f;
    b[size_t(i)] = 1.0f;
    c[size_t(i)] = 2.0f;
  }
  const float s = 3.0f;
  double t = bestSeconds(repeats, [&] {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i)
      a[size_t(i)] = b[size_t(i)] + s * c[size_t(i)];
  });
  return 12.0 * double(elements) / t / 1e9;
}

double readGBps(size_t elements, int repeats) {
  std::vector<float> a(3 * elements / 32 * 32);
  const long n = long(a.size());
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i)
    a[size_t(i)] = 1.0f;
  volatile float sink = 0.0f;
  double t = bestSeconds(repeats, [&] {
    float total = 0.0f;
#pragma omp parallel reduction(+ : total)
    {
      // Independent sums, so that the adds' latency does not bound the reads.
      float s[32] = {};
#pragma omp for schedule(static)
      for (long i = 0; i < n; i += 32)
        for (int j = 0; j < 32; ++j)
          s[j] += a[size_t(i + j)];
      for (float v : s)
        total += v;
    }
    sink = total;
  });
  (void)sink;
  return 4.0 * double(n) / t / 1e9;
}

MatmulPeak matmulPeak(int64_t size) {
#ifdef MOE_HAVE_DNNL
  std::vector<float> a(size_t(size * size), 0.5f), b(a), c(a);
  double t = bestSeconds(5, [&] {
    dnnl_sgemm('N', 'T', size, size, size, 1.0f, a.data(), size, b.data(), size, 0.0f, c.data(),
               size);
  });
  return {2.0 * double(size) * double(size) * double(size) / t / 1e9,
          "oneDNN sgemm, f32, m = n = k = " + std::to_string(size)};
#else
  return {linearGflops(cpu::WeightType::F32, size, size, size),
          "our linear kernel, f32 (built without oneDNN), m = n = k = " + std::to_string(size)};
#endif
}

double linearGflops(cpu::WeightType type, int64_t tokens, int64_t n, int64_t k) {
  std::vector<float> x(size_t(tokens * k), 0.5f), out(size_t(tokens * n));
  std::vector<float> w32(type == cpu::WeightType::F32 ? size_t(n * k) : 0, 0.25f);
  std::vector<uint16_t> w16(type == cpu::WeightType::F32 ? 0 : size_t(n * k), 0x3e80);
  cpu::Weight w{type == cpu::WeightType::F32 ? static_cast<const void *>(w32.data()) : w16.data(),
                type};
  double t = bestSeconds(3, [&] { cpu::linear(x.data(), tokens, k, w, n, nullptr, out.data()); });
  return 2.0 * double(tokens) * double(n) * double(k) / t / 1e9;
}

} // namespace moe::roofline
