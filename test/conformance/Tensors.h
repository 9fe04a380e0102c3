//===- Tensors.h - tensors in the device under test, and references -*- C++ -*-===//
//
// What the kernel tests share: tensors uploaded into device buffers through
// the HAL (a host-visible staging buffer and a copy on stream 0) and read
// back the same way; weights of every dtype drawn at random together with
// their values decoded here in double (ldexp on their fields, not through
// the runtime's decoders); kernel launches; and the comparison against a
// double reference within a bound relative to the magnitude of its terms.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TEST_CONFORMANCE_TENSORS_H
#define MOE_TEST_CONFORMANCE_TENSORS_H

#include "Ranks.h"
#include "moe/runtime/Hal.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <vector>

namespace moe::conformance {

/// A tensor in the device's memory.
struct DeviceTensor {
  std::unique_ptr<rt::Buffer> data, scales;
  rt::TensorView view;
};

/// `n` bytes copied into a new device-local buffer.
std::unique_ptr<rt::Buffer> toDevice(const void *bytes, size_t n);

/// A weight in its stored form, and its values decoded here.
struct Weight {
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  std::vector<float> scales; ///< I8, I4, F8E4M3: per block of rowGroup x group
  int64_t group = 0, rowGroup = 1;
  std::vector<double> ref;

  DeviceTensor upload() const;
};

/// The value of an fp8 e4m3fn code.
double fp8Value(uint8_t code);

/// Random values of `dtype` with shape [..., cols]: f32 and bf16 about
/// uniform in (-1, 1), f16 with magnitudes in [2^-7, 2), I8/I4 random
/// integers and F8E4M3 random finite codes with random scales per block.
Weight randomWeight(rt::DType dtype, std::vector<int64_t> shape, std::mt19937 &rng);

std::vector<float> randomFloats(std::mt19937 &rng, size_t n, float lo = -1.0f, float hi = 1.0f);

/// An activation (any shape) in device memory.
template <typename T>
DeviceTensor activation(const std::vector<T> &v, std::vector<int64_t> shape,
                        rt::DType dtype = rt::DType::F32) {
  DeviceTensor t;
  t.data = toDevice(v.data(), v.size() * sizeof(T));
  t.view = {t.data->data(), dtype, shape};
  return t;
}

/// An output of `shape`, filled with NaN first.
DeviceTensor output(std::vector<int64_t> shape, rt::DType dtype = rt::DType::F32);

/// The first `bytes` of a device buffer, copied back.
std::vector<uint8_t> downloadBytes(rt::Buffer &buffer, size_t bytes);

template <typename T> std::vector<T> download(const DeviceTensor &t) {
  size_t count = 1;
  for (int64_t d : t.view.shape)
    count *= size_t(d);
  const std::vector<uint8_t> bytes = downloadBytes(*t.data, count * sizeof(T));
  const T *p = reinterpret_cast<const T *>(bytes.data());
  return std::vector<T>(p, p + count);
}

/// Launches `call` on stream 0 and waits for it.
rt::Status run(const rt::KernelCall &call);
/// The same, for a call without a KV cache.
rt::Status launch(rt::Kernel kernel, rt::KernelParams params,
                  std::initializer_list<const DeviceTensor *> ins,
                  std::initializer_list<const DeviceTensor *> outs);

/// Expects |got - want| within `rel` of `magnitude` (a sum of absolute terms).
void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                const std::vector<double> &magnitude, double rel = 1e-5);

/// y = x / sqrt(mean(x^2) + eps) * w, per row of `cols`.
std::vector<double> rmsNormRef(const std::vector<double> &x, int64_t cols,
                               const std::vector<double> &w, double eps);

/// Adds `weight` times stacked SwiGLU expert e's output for the row `x`,
/// down_e(silu(gate_e x) * up_e x), to y[hidden] in double, and the
/// magnitude of its terms to mag[hidden].
void addSwigluExpertRef(const float *x, int64_t e, double weight, const Weight &gate,
                        const Weight &up, const Weight &down, int64_t hidden, int64_t inter,
                        double *y, double *mag);

/// |v| + 1e-6 elementwise: the magnitude of a value computed in one step.
std::vector<double> magnitudes(const std::vector<double> &v);

} // namespace moe::conformance

#endif
