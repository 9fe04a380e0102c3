// The kernels of the device under test, through the HAL alone: tensors are
// uploaded into device buffers, each kernel is launched as a KernelCall, and
// the result, copied back, is compared with a naive reference computed in
// double from weights decoded here (ldexp on their fields), for every weight
// dtype the device says it supports, on odd shapes and with experts that get
// no token. (Attention and MLA over the paged KV cache are still tested
// against the CPU kernels' functions only: test/unit/kernels.)
#include "Ranks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using moe::conformance::device;
namespace rt = moe::rt;
using rt::DType;
using rt::Kernel;

/// A tensor in the device's memory.
struct DeviceTensor {
  std::unique_ptr<rt::Buffer> data, scales;
  rt::TensorView view;
};

std::unique_ptr<rt::Buffer> toDevice(const void *bytes, size_t n) {
  auto staging = device().allocate(n, rt::MemoryKind::HostVisible);
  auto target = device().allocate(n, rt::MemoryKind::DeviceLocal);
  EXPECT_TRUE(staging && target);
  std::memcpy((*staging)->host(), bytes, n);
  EXPECT_TRUE(device().stream(0).copy(**target, 0, **staging, 0, n));
  EXPECT_TRUE(device().stream(0).synchronize());
  return target.take();
}

/// A weight in its stored form, and its values decoded here.
struct Weight {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  std::vector<float> scales; ///< I8, I4, F8E4M3: per block of rowGroup x group
  int64_t group = 0, rowGroup = 1;
  std::vector<double> ref;

  DeviceTensor upload() const {
    DeviceTensor t;
    t.data = toDevice(bytes.data(), bytes.size());
    t.view = {t.data->data(), dtype, shape};
    if (!scales.empty()) {
      t.scales = toDevice(scales.data(), scales.size() * sizeof(float));
      t.view.scales = static_cast<const float *>(t.scales->data());
      t.view.group = group;
      t.view.rowGroup = rowGroup;
    }
    return t;
  }
};

double fp8Value(uint8_t b) { // e4m3fn: bias 7, no infinities
  const int e = (b >> 3) & 15, m = b & 7;
  const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (b & 0x80) ? -v : v;
}

/// Random values of `dtype` with shape [..., cols]: f32 and bf16 about
/// uniform in (-1, 1), f16 with magnitudes in [2^-7, 2), I8/I4 random
/// integers and F8E4M3 random finite codes with random scales per block.
Weight randomWeight(DType dtype, std::vector<int64_t> shape, std::mt19937 &rng) {
  Weight w;
  w.dtype = dtype;
  w.shape = shape;
  const int64_t cols = shape.back();
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  const int64_t rows = count / cols;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  if (dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16) {
    for (int64_t i = 0; i < count; ++i) {
      float f = uniform(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      if (dtype == DType::F32) {
        w.ref.push_back(f);
        w.bytes.insert(w.bytes.end(), reinterpret_cast<uint8_t *>(&f),
                       reinterpret_cast<uint8_t *>(&f) + 4);
        continue;
      }
      uint16_t h = uint16_t(bits >> 16);
      if (dtype == DType::F16) { // exponent field 8..15, random mantissa
        h = uint16_t((bits >> 16 & 0x8000) | (8 + bits % 8) << 10 | (bits >> 3 & 1023));
        const int e = (h >> 10) & 31, m = h & 1023;
        w.ref.push_back(((h & 0x8000) ? -1 : 1) * std::ldexp(1024 + m, e - 25));
      } else {
        const int e = (h >> 7) & 255, m = h & 127;
        w.ref.push_back(((h & 0x8000) ? -1 : 1) *
                        (e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134)));
      }
      w.bytes.push_back(uint8_t(h & 0xff));
      w.bytes.push_back(uint8_t(h >> 8));
    }
    return w;
  }
  // Scaled: I8/I4 one scale per row (rowGroup 1, group = cols); F8E4M3 in
  // square blocks of 4 (partial at the edges).
  w.group = dtype == DType::F8E4M3 ? 4 : cols;
  w.rowGroup = dtype == DType::F8E4M3 ? 4 : 1;
  const int64_t groups = (cols + w.group - 1) / w.group;
  const int64_t blockRows = (rows + w.rowGroup - 1) / w.rowGroup;
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  for (int64_t i = 0; i < blockRows * groups; ++i)
    w.scales.push_back(dtype == DType::F8E4M3 ? scale(rng) / 64 : scale(rng));
  w.bytes.assign(size_t(dtype == DType::I4 ? count / 2 : count), 0);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t r = i / cols, c = i % cols;
    const float s = w.scales[size_t((r / w.rowGroup) * groups + c / w.group)];
    double q;
    if (dtype == DType::I8) {
      const int v = std::uniform_int_distribution<int>(-127, 127)(rng);
      w.bytes[size_t(i)] = uint8_t(int8_t(v));
      q = v;
    } else if (dtype == DType::I4) {
      const int v = std::uniform_int_distribution<int>(-8, 7)(rng);
      w.bytes[size_t(i / 2)] |= uint8_t((v & 15) << (i % 2 ? 4 : 0)); // low nibble first
      q = v;
    } else {
      uint8_t b;
      do
        b = uint8_t(byte(rng));
      while ((b & 0x7f) == 0x7f); // NaN
      w.bytes[size_t(i)] = b;
      q = fp8Value(b);
    }
    w.ref.push_back(double(float(q) * s)); // decoded in f32, as the format says
  }
  return w;
}

std::vector<float> randomFloats(std::mt19937 &rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &f : v)
    f = d(rng);
  return v;
}

/// An activation [rows, cols] (or any shape) in device memory.
template <typename T> DeviceTensor activation(const std::vector<T> &v, std::vector<int64_t> shape,
                                              DType dtype = DType::F32) {
  DeviceTensor t;
  t.data = toDevice(v.data(), v.size() * sizeof(T));
  t.view = {t.data->data(), dtype, shape};
  return t;
}

/// An output of `count` elements, filled with NaN first.
DeviceTensor output(std::vector<int64_t> shape, DType dtype = DType::F32) {
  size_t count = 1;
  for (int64_t d : shape)
    count *= size_t(d);
  return activation(std::vector<float>(count, NAN), shape, dtype);
}

template <typename T> std::vector<T> download(const DeviceTensor &t) {
  size_t count = 1;
  for (int64_t d : t.view.shape)
    count *= size_t(d);
  auto host = device().allocate(count * sizeof(T), rt::MemoryKind::HostVisible);
  EXPECT_TRUE(host);
  EXPECT_TRUE(device().stream(0).copy(**host, 0, *t.data, 0, count * sizeof(T)));
  EXPECT_TRUE(device().stream(0).synchronize());
  const T *p = static_cast<const T *>((*host)->host());
  return std::vector<T>(p, p + count);
}

rt::Status launch(Kernel kernel, rt::KernelParams params,
                  std::initializer_list<const DeviceTensor *> ins,
                  std::initializer_list<const DeviceTensor *> outs) {
  rt::KernelCall call;
  call.kernel = kernel;
  call.params = params;
  for (const DeviceTensor *t : ins)
    call.inputs.push_back(t->view);
  for (const DeviceTensor *t : outs)
    call.outputs.push_back(t->view);
  if (rt::Status st = device().stream(0).launch(call); !st)
    return st;
  return device().stream(0).synchronize();
}

/// |got - want| within `rel` of `magnitude` (a sum of absolute terms).
void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                const std::vector<double> &magnitude, double rel = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), rel * magnitude[i] + 1e-30)
        << "at " << i << ": got " << got[i] << ", want " << want[i];
}

class Kernels : public testing::TestWithParam<DType> {
protected:
  /// Skips (visibly) what the device does not run.
  bool supported(Kernel kernel) {
    return device().supports(kernel, GetParam());
  }
  std::mt19937 rng{2024};
};

std::string dtypeParamName(const testing::TestParamInfo<DType> &info) {
  return rt::dtypeName(info.param);
}

INSTANTIATE_TEST_SUITE_P(Weights, Kernels,
                         testing::Values(DType::F32, DType::BF16, DType::F16, DType::I8,
                                         DType::I4, DType::F8E4M3),
                         dtypeParamName);

#define SKIP_UNLESS_SUPPORTED(kernel)                                                        \
  if (!supported(kernel))                                                                    \
  GTEST_SKIP() << device().name() << " does not run " << rt::kernelInfo(kernel)->name      \
               << " with " << rt::dtypeName(GetParam()) << " weights"

TEST_P(Kernels, Embedding) {
  SKIP_UNLESS_SUPPORTED(Kernel::Embedding);
  const int64_t vocab = 11, cols = 10;
  const Weight table = randomWeight(GetParam(), {vocab, cols}, rng);
  const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
  DeviceTensor t = table.upload(), x = activation(ids, {5}, DType::I32),
               y = output({5, cols});
  ASSERT_TRUE(launch(Kernel::Embedding, {}, {&x, &t}, {&y}));
  std::vector<double> want, magnitude;
  for (int32_t id : ids)
    for (int64_t c = 0; c < cols; ++c) {
      want.push_back(table.ref[size_t(id * cols + c)]);
      magnitude.push_back(std::abs(want.back()));
    }
  expectNear(download<float>(y), want, magnitude, 1e-7);
}

TEST_P(Kernels, LinearOddShapesWithAndWithoutBias) {
  SKIP_UNLESS_SUPPORTED(Kernel::Linear);
  const int64_t shapes[][3] = {{1, 6, 5}, {7, 34, 9}, {33, 130, 17}}; // tokens, k, n
  for (auto [tokens, k, n] : shapes)
    for (bool withBias : {false, true}) {
      SCOPED_TRACE(testing::Message() << tokens << " tokens, k " << k << ", n " << n
                                      << (withBias ? ", bias" : ""));
      const Weight w = randomWeight(GetParam(), {n, k}, rng);
      const Weight bias = randomWeight(DType::F32, {n}, rng);
      const std::vector<float> xs = randomFloats(rng, size_t(tokens * k));
      DeviceTensor x = activation(xs, {tokens, k}), wt = w.upload(), b = bias.upload(),
                   y = output({tokens, n});
      ASSERT_TRUE(withBias ? launch(Kernel::Linear, {}, {&x, &wt, &b}, {&y})
                           : launch(Kernel::Linear, {}, {&x, &wt}, {&y}));
      std::vector<double> want, magnitude;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t o = 0; o < n; ++o) {
          double sum = withBias ? bias.ref[size_t(o)] : 0.0, mag = std::abs(sum);
          for (int64_t i = 0; i < k; ++i) {
            sum += xs[size_t(t * k + i)] * w.ref[size_t(o * k + i)];
            mag += std::abs(xs[size_t(t * k + i)] * w.ref[size_t(o * k + i)]);
          }
          want.push_back(sum);
          magnitude.push_back(mag);
        }
      expectNear(download<float>(y), want, magnitude);
    }
}

/// y = x / sqrt(mean(x^2) + eps) * w, per row.
std::vector<double> rmsNormRef(const std::vector<double> &x, int64_t cols,
                               const std::vector<double> &w, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / size_t(cols); ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c)
      ss += x[r * size_t(cols) + size_t(c)] * x[r * size_t(cols) + size_t(c)];
    const double inv = 1.0 / std::sqrt(ss / double(cols) + eps);
    for (int64_t c = 0; c < cols; ++c)
      y[r * size_t(cols) + size_t(c)] = x[r * size_t(cols) + size_t(c)] * inv * w[size_t(c)];
  }
  return y;
}

std::vector<double> magnitudes(const std::vector<double> &v) {
  std::vector<double> m;
  for (double x : v)
    m.push_back(std::abs(x) + 1e-6);
  return m;
}

TEST_P(Kernels, RmsNormAndAddRmsNorm) {
  SKIP_UNLESS_SUPPORTED(Kernel::RmsNorm);
  const int64_t rows = 7, cols = 24;
  const float eps = 1e-5f;
  const Weight w = randomWeight(GetParam(), {cols}, rng);
  const std::vector<float> as = randomFloats(rng, size_t(rows * cols)),
                           bs = randomFloats(rng, size_t(rows * cols));
  DeviceTensor a = activation(as, {rows, cols}), b = activation(bs, {rows, cols}),
               wt = w.upload(), y = output({rows, cols}), sum = output({rows, cols});
  ASSERT_TRUE(launch(Kernel::RmsNorm, rt::RmsNormParams{eps}, {&a, &wt}, {&y}));
  const std::vector<double> a64(as.begin(), as.end());
  std::vector<double> want = rmsNormRef(a64, cols, w.ref, eps);
  expectNear(download<float>(y), want, magnitudes(want));
  if (!supported(Kernel::AddRmsNorm))
    return;
  ASSERT_TRUE(launch(Kernel::AddRmsNorm, rt::RmsNormParams{eps}, {&a, &b, &wt}, {&sum, &y}));
  std::vector<double> s(as.size());
  for (size_t i = 0; i < s.size(); ++i)
    s[i] = double(as[i] + bs[i]); // the sum is stored in f32 and normalised from it
  want = rmsNormRef(s, cols, w.ref, eps);
  expectNear(download<float>(sum), s, magnitudes(s), 1e-7);
  expectNear(download<float>(y), want, magnitudes(want));
}

TEST_P(Kernels, SigmoidGate) {
  SKIP_UNLESS_SUPPORTED(Kernel::SigmoidGate);
  const int64_t rows = 5, cols = 18;
  const Weight g = randomWeight(GetParam(), {1, cols}, rng);
  const std::vector<float> xs = randomFloats(rng, size_t(rows * cols)),
                           ys = randomFloats(rng, size_t(rows * cols));
  DeviceTensor x = activation(xs, {rows, cols}), gt = g.upload(), yt = activation(ys, {rows, cols}),
               out = output({rows, cols});
  ASSERT_TRUE(launch(Kernel::SigmoidGate, {}, {&x, &gt, &yt}, {&out}));
  std::vector<double> want, magnitude;
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c)
      dot += xs[size_t(r * cols + c)] * g.ref[size_t(c)];
    for (int64_t c = 0; c < cols; ++c) {
      want.push_back(ys[size_t(r * cols + c)] / (1.0 + std::exp(-dot)));
      magnitude.push_back(std::abs(want.back()) + 1e-6);
    }
  }
  expectNear(download<float>(out), want, magnitude, 1e-5);
}

TEST(KernelsWithoutWeights, AddAndSiluMul) {
  std::mt19937 rng(7);
  const int64_t rows = 3, cols = 37;
  const std::vector<float> as = randomFloats(rng, size_t(rows * cols), -6, 6),
                           bs = randomFloats(rng, size_t(rows * cols));
  DeviceTensor a = activation(as, {rows, cols}), b = activation(bs, {rows, cols}),
               y = output({rows, cols});
  ASSERT_TRUE(launch(Kernel::Add, {}, {&a, &b}, {&y}));
  std::vector<double> want, magnitude;
  for (size_t i = 0; i < as.size(); ++i) {
    want.push_back(double(as[i]) + bs[i]);
    magnitude.push_back(std::abs(double(as[i])) + std::abs(double(bs[i])));
  }
  expectNear(download<float>(y), want, magnitude, 1e-7);
  ASSERT_TRUE(launch(Kernel::SiluMul, {}, {&a, &b}, {&y}));
  want.clear();
  magnitude.clear();
  for (size_t i = 0; i < as.size(); ++i) {
    want.push_back(as[i] / (1.0 + std::exp(-double(as[i]))) * bs[i]);
    magnitude.push_back(std::abs(want.back()) + 1e-7);
  }
  expectNear(download<float>(y), want, magnitude, 1e-5);
}

// Softmax over the experts, the top k (ties: never drawn here), weights
// renormalised over the chosen ones.
TEST_P(Kernels, RouterSoftmaxTopK) {
  SKIP_UNLESS_SUPPORTED(Kernel::Router);
  const int64_t tokens = 9, hidden = 16, experts = 6, topK = 2;
  const Weight w = randomWeight(GetParam(), {experts, hidden}, rng);
  const std::vector<float> xs = randomFloats(rng, size_t(tokens * hidden));
  DeviceTensor x = activation(xs, {tokens, hidden}), wt = w.upload(),
               weights = output({tokens, topK}), ids = output({tokens, topK}, DType::I32);
  rt::RouterParams p;
  p.numExperts = experts;
  p.topK = topK;
  p.normTopkProb = true;
  ASSERT_TRUE(launch(Kernel::Router, p, {&x, &wt}, {&weights, &ids}));
  const std::vector<float> gotW = download<float>(weights);
  const std::vector<int32_t> gotIds = download<int32_t>(ids);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> logits(static_cast<size_t>(experts));
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t h = 0; h < hidden; ++h)
        logits[size_t(e)] += xs[size_t(t * hidden + h)] * w.ref[size_t(e * hidden + h)];
    std::vector<int32_t> order(static_cast<size_t>(experts));
    for (int32_t e = 0; e < experts; ++e)
      order[size_t(e)] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    // Softmax renormalised over the top k is a softmax over their logits.
    const double top = logits[size_t(order[0])];
    double z = 0;
    for (int64_t j = 0; j < topK; ++j)
      z += std::exp(logits[size_t(order[size_t(j)])] - top);
    for (int64_t j = 0; j < topK; ++j) {
      EXPECT_EQ(gotIds[size_t(t * topK + j)], order[size_t(j)]) << "token " << t;
      EXPECT_NEAR(gotW[size_t(t * topK + j)],
                  std::exp(logits[size_t(order[size_t(j)])] - top) / z, 1e-5)
          << "token " << t;
    }
  }
}

// Experts 2 and 5 get no token (empty groups); grouped and one expert at a
// time give the same bits; an always-on expert is stacked last.
TEST_P(Kernels, ExpertsWithEmptyGroups) {
  SKIP_UNLESS_SUPPORTED(Kernel::Experts);
  const int64_t hidden = 20, inter = 14, routed = 7, shared = 1, experts = routed + shared;
  const int64_t tokens = 6, topK = 2;
  const Weight gate = randomWeight(GetParam(), {experts, inter, hidden}, rng);
  const Weight up = randomWeight(GetParam(), {experts, inter, hidden}, rng);
  const Weight down = randomWeight(GetParam(), {experts, hidden, inter}, rng);
  const std::vector<int32_t> used = {0, 1, 3, 4, 6};
  std::vector<int32_t> indices;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int32_t> pick = used;
    std::shuffle(pick.begin(), pick.end(), rng);
    indices.insert(indices.end(), pick.begin(), pick.begin() + topK);
  }
  const std::vector<float> xs = randomFloats(rng, size_t(tokens * hidden)),
                           ws = randomFloats(rng, size_t(tokens * topK), 0, 1);
  DeviceTensor x = activation(xs, {tokens, hidden}), w = activation(ws, {tokens, topK}),
               ids = activation(indices, {tokens, topK}, DType::I32), g = gate.upload(),
               u = up.upload(), d = down.upload(), grouped = output({tokens, hidden}),
               single = output({tokens, hidden});
  rt::ExpertsParams p;
  p.numExperts = routed;
  p.intermediate = inter;
  p.numShared = shared;
  ASSERT_TRUE(launch(Kernel::Experts, p, {&x, &w, &ids, &g, &u, &d}, {&grouped}));
  p.grouped = false;
  ASSERT_TRUE(launch(Kernel::Experts, p, {&x, &w, &ids, &g, &u, &d}, {&single}));
  std::vector<double> want(size_t(tokens * hidden)), magnitude(want.size());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < topK + shared; ++j) {
      const int64_t e = j < topK ? indices[size_t(t * topK + j)] : routed;
      const double weight = j < topK ? ws[size_t(t * topK + j)] : 1.0;
      std::vector<double> act(static_cast<size_t>(inter));
      for (int64_t i = 0; i < inter; ++i) {
        double gs = 0, us = 0;
        for (int64_t h = 0; h < hidden; ++h) {
          gs += xs[size_t(t * hidden + h)] * gate.ref[size_t((e * inter + i) * hidden + h)];
          us += xs[size_t(t * hidden + h)] * up.ref[size_t((e * inter + i) * hidden + h)];
        }
        act[size_t(i)] = gs / (1.0 + std::exp(-gs)) * us;
      }
      for (int64_t h = 0; h < hidden; ++h) {
        double y = 0, mag = 0;
        for (int64_t i = 0; i < inter; ++i) {
          y += act[size_t(i)] * down.ref[size_t((e * hidden + h) * inter + i)];
          mag += std::abs(act[size_t(i)] * down.ref[size_t((e * hidden + h) * inter + i)]);
        }
        want[size_t(t * hidden + h)] += weight * y;
        magnitude[size_t(t * hidden + h)] += std::abs(weight) * mag;
      }
    }
  const std::vector<float> a = download<float>(grouped), b = download<float>(single);
  expectNear(a, want, magnitude, 2e-5);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
}

} // namespace
