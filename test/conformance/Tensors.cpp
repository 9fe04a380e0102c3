//===- Tensors.cpp - tensors in the device under test, and references -----===//
#include "Tensors.h"

#include <cmath>
#include <cstring>

namespace moe::conformance {

using rt::DType;

std::unique_ptr<rt::Buffer> toDevice(const void *bytes, size_t n) {
  auto staging = device().allocate(n, rt::MemoryKind::HostVisible);
  auto target = device().allocate(n, rt::MemoryKind::DeviceLocal);
  EXPECT_TRUE(staging && target);
  std::memcpy((*staging)->host(), bytes, n);
  EXPECT_TRUE(device().stream(0).copy(**target, 0, **staging, 0, n));
  EXPECT_TRUE(device().stream(0).synchronize());
  return target.take();
}

DeviceTensor Weight::upload() const {
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

double fp8Value(uint8_t b) { // e4m3fn: bias 7, no infinities
  const int e = (b >> 3) & 15, m = b & 7;
  const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (b & 0x80) ? -v : v;
}

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

std::vector<float> randomFloats(std::mt19937 &rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &f : v)
    f = d(rng);
  return v;
}

DeviceTensor output(std::vector<int64_t> shape, DType dtype) {
  size_t count = 1;
  for (int64_t d : shape)
    count *= size_t(d);
  return activation(std::vector<float>(count, NAN), shape, dtype);
}

std::vector<uint8_t> downloadBytes(rt::Buffer &buffer, size_t bytes) {
  auto host = device().allocate(bytes, rt::MemoryKind::HostVisible);
  EXPECT_TRUE(host);
  EXPECT_TRUE(device().stream(0).copy(**host, 0, buffer, 0, bytes));
  EXPECT_TRUE(device().stream(0).synchronize());
  const auto *p = static_cast<const uint8_t *>((*host)->host());
  return std::vector<uint8_t>(p, p + bytes);
}

rt::Status run(const rt::KernelCall &call) {
  if (rt::Status st = device().stream(0).launch(call); !st)
    return st;
  return device().stream(0).synchronize();
}

rt::Status launch(rt::Kernel kernel, rt::KernelParams params,
                  std::initializer_list<const DeviceTensor *> ins,
                  std::initializer_list<const DeviceTensor *> outs) {
  rt::KernelCall call;
  call.kernel = kernel;
  call.params = params;
  for (const DeviceTensor *t : ins)
    call.inputs.push_back(t->view);
  for (const DeviceTensor *t : outs)
    call.outputs.push_back(t->view);
  return run(call);
}

void expectNear(const std::vector<float> &got, const std::vector<double> &want,
                const std::vector<double> &magnitude, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), rel * magnitude[i] + 1e-30)
        << "at " << i << ": got " << got[i] << ", want " << want[i];
}

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

void addSwigluExpertRef(const float *x, int64_t e, double weight, const Weight &gate,
                        const Weight &up, const Weight &down, int64_t hidden, int64_t inter,
                        double *y, double *mag) {
  std::vector<double> act(static_cast<size_t>(inter));
  for (int64_t i = 0; i < inter; ++i) {
    double gs = 0, us = 0;
    for (int64_t h = 0; h < hidden; ++h) {
      gs += x[h] * gate.ref[size_t((e * inter + i) * hidden + h)];
      us += x[h] * up.ref[size_t((e * inter + i) * hidden + h)];
    }
    act[size_t(i)] = gs / (1.0 + std::exp(-gs)) * us;
  }
  for (int64_t h = 0; h < hidden; ++h) {
    double sum = 0, m = 0;
    for (int64_t i = 0; i < inter; ++i) {
      sum += act[size_t(i)] * down.ref[size_t((e * hidden + h) * inter + i)];
      m += std::abs(act[size_t(i)] * down.ref[size_t((e * hidden + h) * inter + i)]);
    }
    y[h] += weight * sum;
    mag[h] += std::abs(weight) * m;
  }
}

std::vector<double> magnitudes(const std::vector<double> &v) {
  std::vector<double> m;
  for (double x : v)
    m.push_back(std::abs(x) + 1e-6);
  return m;
}

} // namespace moe::conformance
