//===- KernelsTest.cpp - CPU kernels against naive double references ------===//
//
// Every reference here is written from the semantics in Kernels.h and
// computes in double; weights are decoded from their bits independently of
// the kernels (ldexp on the fields).
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Kernels.h"
#include "moe/abi/Numeric.h"
#include "kernels/cpu/ThreadPool.h"
#include "kernels/cpu/WeightDetail.h"
#include "test/unit/kernels/NamedRows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace moe::cpu;

namespace {

/// A weight format under test: the element type and, for I8/I4, the
/// elements per scale along a row (0: one scale per row).
struct Format {
  WeightType type = WeightType::F32;
  int64_t group = 0;
  Format(WeightType t = WeightType::F32, int64_t g = 0) : type(t), group(g) {}
  bool quantized() const { return Weight{nullptr, type}.quantized(); }
};

// Names the parameter in test names and failure messages.
void PrintTo(const Format &f, std::ostream *os) {
  const char *names[] = {"F32", "BF16", "F16", "I8", "I4", "F8"};
  *os << names[static_cast<int>(f.type)];
  if (f.group)
    *os << "g" << f.group;
}

double decodeF16(uint16_t b) {
  const int e = (b >> 10) & 31, m = b & 1023;
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  if (e == 31)
    return m ? NAN : sign * INFINITY;
  return sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
}

double decodeBf16(uint16_t b) {
  const int e = (b >> 7) & 255, m = b & 127;
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  if (e == 255)
    return m ? NAN : sign * INFINITY;
  return sign * (e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, e - 134));
}

/// Weight data in its stored form plus its exact values in double (for
/// I8/I4: q * scale rounded to f32, the dequantize-then-f32 reference).
struct TestWeight {
  WeightType type = WeightType::F32;
  std::vector<float> f32;
  std::vector<uint16_t> half;
  std::vector<uint8_t> bytes; // I8 and F8, or I4 two per byte
  std::vector<float> scales;
  int64_t cols = 0, group = 0, rowGroup = 1;
  std::vector<double> ref;

  Weight weight() const {
    Weight w;
    w.type = type;
    w.data = type == WeightType::F32 ? static_cast<const void *>(f32.data())
             : Format(type).quantized() ? static_cast<const void *>(bytes.data())
                                         : half.data();
    if (Format(type).quantized()) {
      w.scales = scales.data();
      w.cols = cols;
      w.group = group;
      w.rowGroup = rowGroup;
    }
    return w;
  }
};

std::vector<float> randomFloats(std::mt19937 &rng, size_t count,
                                float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(count);
  for (float &f : v)
    f = dist(rng);
  return v;
}

std::vector<double> toDouble(const std::vector<float> &v) {
  return {v.begin(), v.end()};
}

/// Symmetric quantization of rows of `cols` values in blocks of rowGroup
/// rows x `group` (0: a whole row) elements, rowGroup 1 for I8/I4 and `group`
/// for F8: scale = max |v| / qmax (127, 7, 448), q = round(v / scale).
void quantize(TestWeight &w, const std::vector<float> &values, int64_t cols, int64_t group) {
  const float qmax = w.type == WeightType::I8 ? 127.0f : w.type == WeightType::I4 ? 7.0f : 448.0f;
  w.cols = cols;
  w.group = group ? group : cols;
  w.rowGroup = w.type == WeightType::F8 ? w.group : 1;
  const int64_t rows = int64_t(values.size()) / cols;
  w.bytes.assign(w.type == WeightType::I4 ? values.size() / 2 : values.size(), 0);
  w.ref.assign(values.size(), 0.0);
  for (int64_t r0 = 0; r0 < rows; r0 += w.rowGroup)
    for (int64_t c0 = 0; c0 < cols; c0 += w.group) {
      const int64_t r1 = std::min(rows, r0 + w.rowGroup), c1 = std::min(cols, c0 + w.group);
      float absmax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          absmax = std::max(absmax, std::abs(values[r * cols + c]));
      const float scale = absmax > 0.0f ? absmax / qmax : 1.0f;
      w.scales.push_back(scale);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const size_t i = size_t(r * cols + c);
          float q;
          if (w.type == WeightType::F8) {
            w.bytes[i] = f32ToFp8(values[i] / scale);
            q = fp8ToF32(w.bytes[i]);
          } else {
            q = float(std::lround(values[i] / scale));
            if (w.type == WeightType::I8)
              w.bytes[i] = uint8_t(int8_t(q));
            else
              w.bytes[i / 2] |= uint8_t((int(q) & 0xf) << (i % 2 ? 4 : 0));
          }
          w.ref[i] = double(q * scale);
        }
    }
}

/// Random weights: f32 and bf16 about uniform in (-scale, scale); f16 with
/// random sign and mantissa and magnitudes in [2^-7, 2), whatever `scale`;
/// I8/I4 quantize uniform values in rows of `cols` (0: one row).
TestWeight randomWeight(Format format, size_t count, std::mt19937 &rng,
                        float scale = 1.0f, int64_t cols = 0) {
  const WeightType type = format.type;
  TestWeight w;
  w.type = type;
  if (format.quantized()) {
    quantize(w, randomFloats(rng, count, scale), cols ? cols : int64_t(count), format.group);
    return w;
  }
  if (type == WeightType::F32) {
    w.f32 = randomFloats(rng, count, scale);
    w.ref = toDouble(w.f32);
    return w;
  }
  for (float f : randomFloats(rng, count, scale)) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    uint16_t h = bits >> 16;
    if (type == WeightType::F16) // exponent field 8..15
      h = (bits >> 16 & 0x8000) | (8 + bits % 8) << 10 | (bits >> 3 & 1023);
    w.half.push_back(h);
    w.ref.push_back(type == WeightType::F16 ? decodeF16(h) : decodeBf16(h));
  }
  return w;
}

/// [experts, rows, cols] gate and up stacked per expert into [experts,
/// 2 * rows, cols], gate rows first.
TestWeight fuse(const TestWeight &gate, const TestWeight &up, int64_t experts) {
  TestWeight f;
  f.type = gate.type;
  f.cols = gate.cols;
  f.group = gate.group;
  f.rowGroup = gate.rowGroup;
  // Each stored array holds the same number of entries per expert.
  auto append = [&](auto &dst, const auto &src, int64_t e) {
    const size_t block = src.size() / size_t(experts);
    dst.insert(dst.end(), src.begin() + e * block, src.begin() + (e + 1) * block);
  };
  for (int64_t e = 0; e < experts; ++e)
    for (const TestWeight *src : {&gate, &up}) {
      append(f.f32, src->f32, e);
      append(f.half, src->half, e);
      append(f.bytes, src->bytes, e);
      append(f.scales, src->scales, e);
      append(f.ref, src->ref, e);
    }
  return f;
}

/// |got - want| within `rel` of `magnitude` (a sum of absolute terms, so
/// cancellation does not shrink the tolerance).
void expectNear(const float *got, const std::vector<double> &want,
                const std::vector<double> &magnitude, double rel = 1e-5) {
  ASSERT_EQ(want.size(), magnitude.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), rel * magnitude[i] + 1e-30)
        << "at " << i << ": got " << got[i] << ", want " << want[i];
}

std::string typeName(const testing::TestParamInfo<Format> &info) {
  std::ostringstream os;
  PrintTo(info.param, &os);
  return os.str();
}

/// Float formats: every weight a kernel takes.
class Typed : public testing::TestWithParam<Format> {
protected:
  std::mt19937 rng{1234};
};
/// Float and quantized formats: the weights of matrix products and tables.
class Quantizable : public Typed {
protected:
  /// A bias or other vector beside the weight: float even for I8/I4.
  Format vectorFormat() const { return GetParam().quantized() ? Format() : GetParam(); }
  /// I4 packs rows of an even number of elements.
  bool fits(int64_t cols) const { return GetParam().type != WeightType::I4 || cols % 2 == 0; }
};

INSTANTIATE_TEST_SUITE_P(Weights, Typed,
                         testing::Values(Format(WeightType::F32), Format(WeightType::BF16),
                                         Format(WeightType::F16)),
                         typeName);
INSTANTIATE_TEST_SUITE_P(Weights, Quantizable,
                         testing::Values(Format(WeightType::F32), Format(WeightType::BF16),
                                         Format(WeightType::F16), Format(WeightType::I8),
                                         Format(WeightType::I8, 64), Format(WeightType::I4, 32),
                                         Format(WeightType::I4, 128), Format(WeightType::I4),
                                         Format(WeightType::F8, 14)),
                         typeName);

// --- Weight ---

// Every 16-bit pattern, through at() and through the bulk conversion that
// embedding() uses.
void checkAllPatterns(WeightType type, double (*decode)(uint16_t)) {
  std::vector<uint16_t> all(65536);
  std::iota(all.begin(), all.end(), 0);
  const Weight w{all.data(), type};
  const int32_t id = 0;
  std::vector<float> bulk(all.size());
  embedding(&id, 1, w, all.size(), bulk.data());
  for (size_t i = 0; i < all.size(); ++i) {
    const double want = decode(all[i]);
    for (float got : {w.at(i), bulk[i]}) {
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << "pattern " << i;
        continue;
      }
      ASSERT_EQ(got, want) << "pattern " << i;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << "pattern " << i;
    }
  }
}

// Every fp8 e4m3 byte through the linear tile (the AVX2 decode) and at(),
// against the format's definition: sign, 4 exponent bits (bias 7, 0 =
// subnormal), 3 mantissa bits; 0x7f/0xff read as 480 (no NaN in weights).
TEST(Weight, Fp8AllPatterns) {
  std::vector<uint8_t> all(256);
  std::iota(all.begin(), all.end(), 0);
  const float one = 1.0f;
  Weight w{all.data(), WeightType::F8, &one, 256, 256, 256, 0};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> 3) & 15, m = b & 7;
    const double want = (b & 0x80 ? -1 : 1) * (e ? std::ldexp(8 + m, e - 10) : std::ldexp(m, -9));
    std::vector<float> x(256, 0.0f);
    x[size_t(b)] = 1.0f;
    float out = 0.0f;
    linear(x.data(), 1, 256, w, 1, nullptr, &out);
    ASSERT_EQ(out, want) << "byte " << b;
    ASSERT_EQ(w.at(size_t(b)), want) << "byte " << b;
    ASSERT_EQ(fp8ToF32(uint8_t(b)), want) << "byte " << b;
    if ((b & 0x7f) != 0x7f) // the encoder saturates at 448
      ASSERT_EQ(fp8ToF32(f32ToFp8(float(want))), want) << "byte " << b;
  }
}

TEST(Weight, F16AllPatterns) { checkAllPatterns(WeightType::F16, decodeF16); }

TEST(Weight, Bf16AllPatterns) {
  checkAllPatterns(WeightType::BF16, decodeBf16);
}

TEST(Weight, F16Landmarks) {
  const uint16_t bits[] = {0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0x7c00};
  const double want[] = {0x1p-24, 1023 * 0x1p-24, 0x1p-14,
                         1.0,     65504.0,        INFINITY};
  for (size_t i = 0; i < std::size(bits); ++i)
    EXPECT_EQ(Weight({bits, WeightType::F16}).at(i), want[i]);
}

TEST_P(Quantizable, Offset) { // rows of 2: whole rows for I8/I4
  const TestWeight w = randomWeight(GetParam(), 10, rng, 1.0f, 2);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(w.weight().offset(4).at(i), w.weight().at(4 + i));
  EXPECT_EQ(w.weight().offset(6).at(0), w.ref[6]);
}

// --- Elementwise ---

TEST_P(Quantizable, Embedding) {
  const int64_t vocab = 11, hidden = 34;
  const TestWeight table = randomWeight(GetParam(), vocab * hidden, rng, 1.0f, hidden);
  const std::vector<int32_t> ids = {3, 0, 10, 3, 7, 1, 10};
  std::vector<float> out(ids.size() * hidden);
  embedding(ids.data(), ids.size(), table.weight(), hidden, out.data());
  for (size_t t = 0; t < ids.size(); ++t)
    for (int64_t c = 0; c < hidden; ++c)
      ASSERT_EQ(out[t * hidden + c], table.ref[ids[t] * hidden + c]);
}

// Rows that start anywhere in a 32-bit word of int4 and runs under one scale
// of every length: each build's conversion gives the exact q * scale.
TEST_P(Quantizable, EmbeddingEqualsTheElementsOnEveryBuild) {
  const int64_t vocab = 9, hidden = 150;
  const TestWeight table = randomWeight(GetParam(), vocab * hidden, rng, 1.0f, hidden);
  const std::vector<int32_t> ids = {1, 8, 0, 3, 5};
  const Isa saved = isa();
  for (Isa level : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
    if (level > cpuIsa())
      continue;
    SCOPED_TRACE(isaName(level));
    setIsa(level);
    std::vector<float> out(ids.size() * hidden);
    embedding(ids.data(), ids.size(), table.weight(), hidden, out.data());
    for (size_t t = 0; t < ids.size(); ++t)
      for (int64_t c = 0; c < hidden; ++c)
        ASSERT_EQ(out[t * hidden + c], table.ref[ids[t] * hidden + c])
            << "row " << ids[t] << ", column " << c;
  }
  setIsa(saved);
}

// MLA's absorb: rows of a weight times each token's scalars added into its
// sums, the rows in turn, each product rounded before its sum; shapes with
// a whole number of 64 columns, a 16-column tail and none of 16 (the
// row-by-row path), up to 9 tokens, on every build.
TEST_P(Quantizable, MulAddRowsIsTheRowByRowLoopOnEveryBuild) {
  const Isa saved = isa();
  for (auto [k, n] : {std::pair<int64_t, int64_t>{512, 512}, {160, 144}, {150, 150}}) {
    const int64_t row0 = 3, rows = 11;
    const TestWeight w = randomWeight(GetParam(), (row0 + rows) * k, rng, 1.0f, k);
    const std::vector<float> x = randomFloats(rng, 9 * rows), y0 = randomFloats(rng, 9 * n);
    for (int64_t tokens : {1, 3, 4, 5, 9}) {
      std::vector<float> want(y0.begin(), y0.begin() + tokens * n);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < tokens; ++i)
          for (int64_t c = 0; c < n; ++c) {
            const float product = x[i * rows + r] * float(w.ref[(row0 + r) * k + c]);
            want[i * n + c] += product;
          }
      for (Isa level : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
        if (level > cpuIsa())
          continue;
        SCOPED_TRACE(testing::Message() << isaName(level) << ", " << tokens << " tokens, k " << k
                                        << ", n " << n);
        setIsa(level);
        std::vector<float> got(want.size());
        std::copy(y0.begin(), y0.begin() + tokens * n, got.begin());
        std::vector<const float *> xs;
        std::vector<float *> ys;
        for (int64_t i = 0; i < tokens; ++i) {
          xs.push_back(x.data() + i * rows);
          ys.push_back(got.data() + i * n);
        }
        detail::mulAddRows(w.weight(), k, row0, rows, n, xs.data(), tokens, ys.data());
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
      }
    }
  }
  setIsa(saved);
}

TEST_P(Typed, RmsNorm) {
  for (int64_t rows : {1, 7, 33})
    for (int64_t cols : {1, 13, 128}) {
      const std::vector<float> x = randomFloats(rng, rows * cols, 3.0f);
      const TestWeight w = randomWeight(GetParam(), cols, rng);
      const float eps = 1e-6f;
      std::vector<double> want(x.size()), magnitude(x.size());
      for (int64_t r = 0; r < rows; ++r) {
        double squares = 0;
        for (int64_t c = 0; c < cols; ++c)
          squares += double(x[r * cols + c]) * x[r * cols + c];
        const double inv = 1.0 / std::sqrt(squares / cols + eps);
        for (int64_t c = 0; c < cols; ++c) {
          want[r * cols + c] = x[r * cols + c] * inv * w.ref[c];
          magnitude[r * cols + c] = std::abs(want[r * cols + c]);
        }
      }
      std::vector<float> out(x.size());
      rmsNorm(x.data(), rows, cols, w.weight(), eps, out.data());
      expectNear(out.data(), want, magnitude);
      std::vector<float> inPlace = x; // x and out alias
      rmsNorm(inPlace.data(), rows, cols, w.weight(), eps, inPlace.data());
      EXPECT_EQ(inPlace, out);
    }
}

// The fused residual add + norm: the sum against a + b computed here, the
// norm bit-equal to rmsNorm of that sum (itself checked above); the sum may
// overwrite an operand.
TEST_P(Typed, AddRmsNorm) {
  for (int64_t rows : {1, 7})
    for (int64_t cols : {13, 128}) {
      const std::vector<float> a = randomFloats(rng, rows * cols, 3.0f),
                               b = randomFloats(rng, rows * cols, 3.0f);
      const TestWeight w = randomWeight(GetParam(), cols, rng);
      std::vector<float> sum(a.size()), out(a.size()), want(a.size());
      addRmsNorm(a.data(), b.data(), rows, cols, w.weight(), 1e-6f, sum.data(), out.data());
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_EQ(sum[i], a[i] + b[i]);
      rmsNorm(sum.data(), rows, cols, w.weight(), 1e-6f, want.data());
      EXPECT_EQ(out, want);
      std::vector<float> inPlace = a; // sum aliases a
      addRmsNorm(inPlace.data(), b.data(), rows, cols, w.weight(), 1e-6f, inPlace.data(),
                 want.data());
      EXPECT_EQ(inPlace, sum);
      EXPECT_EQ(want, out);
    }
}

TEST(Elementwise, Add) {
  std::mt19937 rng(7);
  const std::vector<float> a = randomFloats(rng, 37), b = randomFloats(rng, 37);
  std::vector<float> out(a.size());
  add(a.data(), b.data(), a.size(), out.data());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(out[i], a[i] + b[i]);
}

TEST(Elementwise, SiluMul) {
  std::mt19937 rng(8);
  const int64_t rows = 7, cols = 13;
  // Both layouts: halves of one [rows, 2 * cols] buffer, and a stride wider
  // than that.
  for (int64_t stride : {2 * cols, 3 * cols + 1}) {
    const std::vector<float> buf = randomFloats(rng, rows * stride, 6.0f);
    const float *gate = buf.data(), *up = buf.data() + cols;
    std::vector<double> want(rows * cols), magnitude(rows * cols);
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t i = 0; i < cols; ++i) {
        const double g = gate[t * stride + i];
        want[t * cols + i] = g / (1.0 + std::exp(-g)) * up[t * stride + i];
        magnitude[t * cols + i] = std::abs(want[t * cols + i]);
      }
    std::vector<float> out(rows * cols);
    siluMul(gate, up, rows, cols, stride, out.data());
    expectNear(out.data(), want, magnitude);
  }
  // Gates far out on both sides (where e^-|g| underflows) and around 0.
  const std::vector<float> gate = {-200.0f, -100.0f, -88.0f, -87.0f, -30.0f, -1e-3f, -0.0f,
                                   0.0f,    1e-3f,   30.0f,  87.0f,  88.0f,  100.0f, 200.0f};
  const std::vector<float> up(gate.size(), 1.5f);
  std::vector<double> want, magnitude;
  for (float g : gate) {
    want.push_back(double(g) / (1.0 + std::exp(-double(g))) * 1.5);
    magnitude.push_back(std::abs(want.back()));
  }
  std::vector<float> out(gate.size());
  siluMul(gate.data(), up.data(), 1, int64_t(gate.size()), int64_t(gate.size()), out.data());
  expectNear(out.data(), want, magnitude);
  // A NaN gate gives NaN, in the vector body and in the tail.
  std::vector<float> nanGate(11, 1.0f), nanOut(11);
  nanGate[2] = nanGate[9] = std::nanf("");
  siluMul(nanGate.data(), up.data(), 1, 11, 11, nanOut.data());
  EXPECT_TRUE(std::isnan(nanOut[2]) && std::isnan(nanOut[9]) && !std::isnan(nanOut[0]));
  // No rows (an expert-parallel rank whose experts got none): nothing written.
  std::vector<float> untouched(4, 7.0f);
  siluMul(nanGate.data(), up.data(), 0, 4, 4, untouched.data());
  EXPECT_EQ(untouched, std::vector<float>(4, 7.0f));
}

TEST_P(Typed, SigmoidGate) {
  for (int64_t tokens : {1, 7, 33}) {
    const int64_t hidden = 29;
    const std::vector<float> x = randomFloats(rng, tokens * hidden);
    const std::vector<float> y = randomFloats(rng, tokens * hidden);
    const TestWeight g = randomWeight(GetParam(), hidden, rng);
    std::vector<double> want(y.size()), magnitude(y.size());
    for (int64_t t = 0; t < tokens; ++t) {
      double d = 0;
      for (int64_t i = 0; i < hidden; ++i)
        d += x[t * hidden + i] * g.ref[i];
      for (int64_t i = 0; i < hidden; ++i) {
        want[t * hidden + i] = y[t * hidden + i] / (1.0 + std::exp(-d));
        magnitude[t * hidden + i] = std::abs(want[t * hidden + i]);
      }
    }
    std::vector<float> out(y.size());
    sigmoidGate(x.data(), g.weight(), y.data(), tokens, hidden, out.data());
    expectNear(out.data(), want, magnitude);
    std::vector<float> inPlace = y; // y and out alias
    sigmoidGate(x.data(), g.weight(), inPlace.data(), tokens, hidden,
                inPlace.data());
    EXPECT_EQ(inPlace, out);
  }
}

// --- Linear ---

TEST_P(Quantizable, Linear) {
  // k above 1024 spans several conversion chunks (Linear.cpp's kChunk), the
  // last one partial.
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1},   {13, 5},  {33, 17},
                                                {64, 37}, {100, 8}, {2100, 9}};
  for (int64_t tokens : {1, 7, 33, 140}) // 140: more than one block of 128
    for (auto [k, n] : shapes)
      for (bool withBias : {false, true}) {
        if (!fits(k))
          continue;
        SCOPED_TRACE(testing::Message()
                     << tokens << " tokens, k " << k << ", n " << n << ", bias "
                     << withBias);
        const std::vector<float> x = randomFloats(rng, tokens * k);
        const TestWeight w = randomWeight(GetParam(), n * k, rng, 1.0f, k);
        const TestWeight bias = randomWeight(vectorFormat(), n, rng);
        std::vector<double> want(tokens * n), magnitude(tokens * n);
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t o = 0; o < n; ++o) {
            double sum = withBias ? bias.ref[o] : 0.0;
            double mag = std::abs(sum);
            for (int64_t i = 0; i < k; ++i) {
              sum += x[t * k + i] * w.ref[o * k + i];
              mag += std::abs(x[t * k + i] * w.ref[o * k + i]);
            }
            want[t * n + o] = sum;
            magnitude[t * n + o] = mag;
          }
        std::vector<float> out(tokens * n);
        const Weight b = bias.weight();
        linear(x.data(), tokens, k, w.weight(), n, withBias ? &b : nullptr,
               out.data());
        expectNear(out.data(), want, magnitude);
      }
}

// Problems whose tokens are rows of x named by xRows (the routed experts'
// tokens, repeats and all) give, bit for bit, what linear() gives on those
// rows copied out: direct and buffered items, more than one token block.
TEST_P(Quantizable, LinearGroupReadsTheRowsXRowsNames) {
  const int64_t k = 300, n = 24;
  const TestWeight w = randomWeight(GetParam(), n * k, rng, 1.0f, k);
  const std::vector<float> x = randomFloats(rng, 50 * k);
  for (int64_t tokens : {1, 3, 140}) {
    SCOPED_TRACE(testing::Message() << tokens << " tokens");
    const NamedRows rows = nameRows(x, k, tokens, rng);
    std::vector<float> want(size_t(tokens * n)), got(size_t(tokens * n), std::nanf(""));
    linear(rows.copied.data(), tokens, k, w.weight(), n, nullptr, want.data());
    const LinearProblem p{x.data(), tokens, k, w.weight(), n, nullptr, got.data(),
                          rows.index.data()};
    linearGroup(&p, 1);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
  }
}

// A token's result does not depend on the tokens batched with it, on the
// kernel path the batch size picks, or on the thread count: the serving
// engine's outputs equal solo runs because of this.
TEST_P(Quantizable, LinearBatchInvariant) {
  const int64_t k = 2100, n = 19; // k: three chunks of 1024, the last partial
  const TestWeight w = randomWeight(GetParam(), n * k, rng, 1.0f, k);
  const std::vector<float> x = randomFloats(rng, 140 * k);
  std::vector<float> alone(140 * n);
  for (int64_t t = 0; t < 140; ++t)
    linear(x.data() + t * k, 1, k, w.weight(), n, nullptr, alone.data() + t * n);
  const int threads = kernelThreads();
  for (int nthreads : {1, 2})
    for (int64_t tokens : {2, 3, 4, 5, 8, 9, 16, 17, 33, 70, 140}) {
      SCOPED_TRACE(testing::Message() << tokens << " tokens, " << nthreads << " threads");
      setKernelThreads(nthreads);
      std::vector<float> out(tokens * n);
      linear(x.data(), tokens, k, w.weight(), n, nullptr, out.data());
      EXPECT_EQ(0, std::memcmp(out.data(), alone.data(), out.size() * sizeof(float)));
    }
  setKernelThreads(threads);
}

// The AVX-512 tiles give the AVX2 tiles' bits for every weight type, token
// count (tile widths and their remainders) and row count (pairs, a pair's odd
// row, blocks of four and a short last block), with and without bias: a plan
// gives the same tokens on either kind of CPU.
TEST_P(Quantizable, LinearSameBitsOnAvx2AndAvx512) {
  if (cpuIsa() < Isa::Avx512)
    GTEST_SKIP() << "this CPU has no AVX-512 (F/BW/DQ/VL): its tiles were built, not run";
  const Isa saved = isa();
  const std::pair<int64_t, int64_t> shapes[] = {{2100, 19}, {37, 5}, {64, 8}, {1030, 3}};
  for (auto [k, n] : shapes) {
    if (!fits(k))
      continue;
    const TestWeight w = randomWeight(GetParam(), n * k, rng, 1.0f, k);
    const TestWeight bias = randomWeight(vectorFormat(), n, rng);
    const Weight b = bias.weight();
    for (int64_t tokens : {1, 2, 3, 5, 8, 9, 12, 13, 23, 31, 140}) {
      SCOPED_TRACE(testing::Message() << tokens << " tokens, k " << k << ", n " << n);
      const std::vector<float> x = randomFloats(rng, tokens * k);
      auto run = [&](Isa level) {
        setIsa(level);
        std::vector<float> out(tokens * n);
        linear(x.data(), tokens, k, w.weight(), n, tokens % 2 ? &b : nullptr, out.data());
        return out;
      };
      const std::vector<float> avx2 = run(Isa::Avx2), avx512 = run(Isa::Avx512);
      EXPECT_EQ(0, std::memcmp(avx2.data(), avx512.data(), avx2.size() * sizeof(float)));
    }
  }
  setIsa(saved);
}

// --- W8A8 (Weight::int8Activations) ---

// Row t of x quantized as Kernels.h defines it: the int8 values and scale.
std::pair<std::vector<int32_t>, float> quantizeActivations(const float *x, int64_t k) {
  float amax = 0.0f;
  for (int64_t c = 0; c < k; ++c)
    amax = std::max(amax, std::abs(x[c]));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  std::vector<int32_t> q(size_t(k), 0);
  for (int64_t c = 0; c < k; ++c)
    q[size_t(c)] = int32_t(std::clamp(std::rint(x[c] * inv), -127.0f, 127.0f));
  return {q, amax / 127.0f};
}

// An I8 weight with one scale per row, values in [-128, 127] (the whole
// int8 range: -128 too), for W8A8.
TestWeight randomInt8Rows(int64_t n, int64_t k, std::mt19937 &rng) {
  TestWeight w;
  w.type = WeightType::I8;
  w.cols = w.group = k;
  for (int64_t i = 0; i < n * k; ++i)
    w.bytes.push_back(uint8_t(rng() % 7 == 0 ? 0x80 : rng()));
  for (float s : randomFloats(rng, size_t(n), 0.05f))
    w.scales.push_back(std::abs(s) + 1e-3f);
  return w;
}

// Every build (portable, AVX2, AVX-512 VNNI, AMX where the CPU has them) gives
// exactly the definition: integer sums, then float(sum) * s_x * s_w + bias
// (volatile keeps the reference's operations apart as the kernel's are), for
// any token count: batched equals solo without further argument.
TEST(LinearW8A8, EveryBuildMatchesTheDefinitionExactly) {
  std::mt19937 rng(8);
  const Isa saved = isa();
  // AMX takes blocks of 8 rows when k is a multiple of 64 and there are 9
  // tokens or more: {64, 8}, {1024, 19} (and its short last block not).
  // The AVX2 tile's paths: a tail alone (1, 31), a whole step alone (32) or
  // with a tail (48), lines (64), lines and a step (96), all three (100).
  const std::pair<int64_t, int64_t> shapes[] = {{1, 3},    {31, 5},   {32, 6},    {48, 7},
                                                {64, 8},   {96, 4},   {100, 19},  {1030, 9},
                                                {1024, 19}};
  for (auto [k, n] : shapes)
    for (int64_t tokens : {1, 3, 8, 9, 33, 140}) {
      SCOPED_TRACE(testing::Message() << tokens << " tokens, k " << k << ", n " << n);
      std::vector<float> x = randomFloats(rng, size_t(tokens * k), 3.0f);
      std::fill(x.begin(), x.begin() + k, 0.0f); // a zero row
      if (tokens > 1)
        x[size_t(k)] = -1e-30f; // a tiny one
      TestWeight w = randomInt8Rows(n, k, rng);
      Weight weight = w.weight();
      weight.int8Activations = true;
      const TestWeight bias = randomWeight(Format(), size_t(n), rng);
      const Weight b = bias.weight();
      std::vector<float> want(size_t(tokens * n));
      for (int64_t t = 0; t < tokens; ++t) {
        const auto [q, sx] = quantizeActivations(x.data() + t * k, k);
        for (int64_t o = 0; o < n; ++o) {
          int64_t sum = 0;
          for (int64_t c = 0; c < k; ++c)
            sum += q[size_t(c)] * int64_t(int8_t(w.bytes[size_t(o * k + c)]));
          volatile float scaled = float(sum) * sx;
          volatile float product = scaled * w.scales[size_t(o)];
          want[size_t(t * n + o)] = product + bias.f32[size_t(o)];
        }
      }
      for (Isa level : {Isa::Portable, Isa::Avx2, Isa::Avx512, Isa::Amx}) {
        if (level > cpuIsa())
          continue;
        setIsa(level);
        std::vector<float> out(size_t(tokens * n));
        linear(x.data(), tokens, k, weight, n, &b, out.data());
        EXPECT_EQ(0, std::memcmp(out.data(), want.data(), out.size() * sizeof(float)))
            << isaName(level);
      }
    }
  setIsa(saved);
  if (cpuIsa() < Isa::Amx)
    GTEST_SKIP() << "this CPU (or kernel) gives no AMX-INT8: the AMX tiles were built, not run"
                 << (cpuIsa() < Isa::Avx512 || !__builtin_cpu_supports("avx512vnni")
                         ? "; nor AVX-512 VNNI: the VNNI tiles neither"
                         : "");
}

// W8A8 quantizes the rows xRows names (LinearGroupReadsTheRowsXRowsNames):
// the bits of linear() on those rows copied out.
TEST(LinearW8A8, QuantizesTheRowsXRowsNames) {
  std::mt19937 rng(9);
  const int64_t k = 96, n = 16;
  TestWeight w = randomInt8Rows(n, k, rng);
  Weight weight = w.weight();
  weight.int8Activations = true;
  const std::vector<float> x = randomFloats(rng, size_t(30 * k), 3.0f);
  for (int64_t tokens : {1, 9, 140}) {
    SCOPED_TRACE(testing::Message() << tokens << " tokens");
    const NamedRows rows = nameRows(x, k, tokens, rng);
    std::vector<float> want(size_t(tokens * n)), got(size_t(tokens * n), std::nanf(""));
    linear(rows.copied.data(), tokens, k, weight, n, nullptr, want.data());
    const LinearProblem p{x.data(), tokens, k, weight, n, nullptr, got.data(), rows.index.data()};
    linearGroup(&p, 1);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
  }
}

// The activation rounding error is within its closed-form bound: half a
// step of x's scale times sum |w| (plus f32 rounding).
TEST(LinearW8A8, ErrorWithinTheRoundingBound) {
  std::mt19937 rng(9);
  const int64_t tokens = 17, k = 700, n = 13;
  const std::vector<float> x = randomFloats(rng, size_t(tokens * k), 2.0f);
  const TestWeight w = randomInt8Rows(n, k, rng);
  Weight weight = w.weight();
  weight.int8Activations = true;
  std::vector<float> out(size_t(tokens * n));
  linear(x.data(), tokens, k, weight, n, nullptr, out.data());
  for (int64_t t = 0; t < tokens; ++t) {
    const double sx = quantizeActivations(x.data() + t * k, k).second;
    for (int64_t o = 0; o < n; ++o) {
      double exact = 0, absSum = 0;
      for (int64_t c = 0; c < k; ++c) {
        const double wv = double(int8_t(w.bytes[size_t(o * k + c)])) * w.scales[size_t(o)];
        exact += x[size_t(t * k + c)] * wv;
        absSum += std::abs(wv);
      }
      EXPECT_LE(std::abs(out[size_t(t * n + o)] - exact), 0.5 * sx * absSum * (1 + 1e-5) + 1e-6)
          << "token " << t << ", row " << o;
    }
  }
}

// --- W4A8 (Weight::int8Activations on I4) and int4 nibbles ---

// An I4 weight of n rows of k (even) elements, every byte random (all 16
// nibble values, -8 too), scales random and positive, `group` elements a
// scale (0: one a row).
TestWeight randomInt4Rows(int64_t n, int64_t k, int64_t group, std::mt19937 &rng) {
  TestWeight w;
  w.type = WeightType::I4;
  w.cols = k;
  w.group = group ? group : k;
  for (int64_t i = 0; i < n * k / 2; ++i)
    w.bytes.push_back(uint8_t(rng()));
  const int64_t groups = (k + w.group - 1) / w.group;
  for (float s : randomFloats(rng, size_t(n * groups), 0.05f))
    w.scales.push_back(std::abs(s) + 1e-3f);
  return w;
}

// Element c of row o of an I4 weight: its two's complement nibble.
int32_t nibble(const TestWeight &w, int64_t o, int64_t c) {
  const int64_t i = o * w.cols + c;
  const int v = (w.bytes[size_t(i / 2)] >> (i % 2 ? 4 : 0)) & 0xf;
  return v >= 8 ? v - 16 : v;
}

// The W4A8 definition of Kernels.h, computed plainly: 16 integer lane
// sums a block of 128, an f32 multiply-add per lane and block, the fixed
// lane sum, times the activation scale, plus bias. volatile keeps the
// f32 operations apart as the kernels' are.
std::vector<float> w4a8Reference(const std::vector<float> &x, int64_t tokens, int64_t k,
                                 const TestWeight &w, int64_t n, const std::vector<float> &bias) {
  std::vector<float> out(size_t(tokens * n));
  const int64_t groups = (k + w.group - 1) / w.group;
  for (int64_t t = 0; t < tokens; ++t) {
    const auto [q, sx] = quantizeActivations(x.data() + t * k, k);
    for (int64_t o = 0; o < n; ++o) {
      float f[16] = {};
      for (int64_t b0 = 0; b0 < k; b0 += 128) {
        const float s = w.scales[size_t(o * groups + b0 / w.group)];
        for (int64_t j = 0; j < 16; ++j) {
          int64_t sum = 0;
          for (int64_t c = b0 + 8 * j; c < std::min(k, b0 + 8 * j + 8); ++c)
            sum += q[size_t(c)] * int64_t(nibble(w, o, c));
          volatile float lane = std::fma(float(sum), s, f[j]);
          f[j] = lane;
        }
      }
      float h[8];
      for (int j = 0; j < 8; ++j) {
        volatile float v = f[j] + f[j + 8];
        h[j] = v;
      }
      volatile float a = h[0] + h[1], b = h[2] + h[3], c = h[4] + h[5], d = h[6] + h[7];
      volatile float ab = a + b, cd = c + d;
      volatile float sum = ab + cd;
      volatile float scaled = sum * sx;
      out[size_t(t * n + o)] = scaled + (bias.empty() ? 0.0f : bias[size_t(o)]);
    }
  }
  return out;
}

// Every build (portable, AVX2, AVX-512 VNNI where the CPU has it) gives
// exactly the definition, for any token count (tiles of 1-4 tokens, direct
// and buffered items): batched equals solo. Shapes: whole blocks, a
// partial last block (the row's bytes end mid-block, the last row's at the
// end of the buffer), a row shorter than a block, groups of 128, 256 and a
// whole row, rows not a multiple of the tiles' four.
TEST(LinearW4A8, EveryBuildMatchesTheDefinitionExactly) {
  std::mt19937 rng(48);
  const Isa saved = isa();
  struct Shape {
    int64_t k, n, group;
  };
  const Shape shapes[] = {{128, 4, 128}, {256, 9, 128}, {2048, 6, 128}, {300, 5, 128},
                          {300, 7, 0},   {64, 3, 0},    {2, 5, 0},      {1030, 13, 256},
                          {768, 11, 128}};
  for (const Shape &sh : shapes)
    for (int64_t tokens : {1, 2, 3, 4, 5, 9, 17, 33, 140}) {
      SCOPED_TRACE(testing::Message() << tokens << " tokens, k " << sh.k << ", n " << sh.n
                                      << ", group " << sh.group);
      std::vector<float> x = randomFloats(rng, size_t(tokens * sh.k), 3.0f);
      std::fill(x.begin(), x.begin() + sh.k, 0.0f); // a zero row
      if (tokens > 1)
        x[size_t(sh.k)] = -1e-30f; // a tiny one
      const TestWeight w = randomInt4Rows(sh.n, sh.k, sh.group, rng);
      Weight weight = w.weight();
      weight.int8Activations = true;
      const TestWeight bias = randomWeight(Format(), size_t(sh.n), rng);
      const Weight b = bias.weight();
      const std::vector<float> want = w4a8Reference(x, tokens, sh.k, w, sh.n, bias.f32);
      for (Isa level : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
        if (level > cpuIsa())
          continue;
        setIsa(level);
        std::vector<float> out(size_t(tokens * sh.n));
        linear(x.data(), tokens, sh.k, weight, sh.n, &b, out.data());
        EXPECT_EQ(0, std::memcmp(out.data(), want.data(), out.size() * sizeof(float)))
            << isaName(level);
      }
    }
  setIsa(saved);
  if (cpuIsa() < Isa::Avx512 || !__builtin_cpu_supports("avx512vnni"))
    GTEST_SKIP() << "this CPU has no AVX-512 VNNI: the VNNI tiles were built, not run";
}

// W4A8 quantizes the rows xRows names: the bits of linear() on those rows
// copied out; and experts' unfused gate and up share one copy.
TEST(LinearW4A8, QuantizesTheRowsXRowsNames) {
  std::mt19937 rng(49);
  const int64_t k = 384, n = 16;
  const TestWeight w = randomInt4Rows(n, k, 128, rng);
  Weight weight = w.weight();
  weight.int8Activations = true;
  const std::vector<float> x = randomFloats(rng, size_t(30 * k), 3.0f);
  for (int64_t tokens : {1, 9, 140}) {
    SCOPED_TRACE(testing::Message() << tokens << " tokens");
    const NamedRows rows = nameRows(x, k, tokens, rng);
    std::vector<float> want(size_t(tokens * n)), got(size_t(tokens * n), std::nanf(""));
    linear(rows.copied.data(), tokens, k, weight, n, nullptr, want.data());
    const LinearProblem p{x.data(), tokens, k, weight, n, nullptr, got.data(), rows.index.data()};
    linearGroup(&p, 1);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
  }
}

// The activation rounding error is within its closed-form bound: half a
// step of x's scale times sum |w| (plus f32 rounding).
TEST(LinearW4A8, ErrorWithinTheRoundingBound) {
  std::mt19937 rng(50);
  const int64_t tokens = 17, k = 700, n = 13;
  const std::vector<float> x = randomFloats(rng, size_t(tokens * k), 2.0f);
  const TestWeight w = randomInt4Rows(n, k, 0, rng);
  Weight weight = w.weight();
  weight.int8Activations = true;
  std::vector<float> out(size_t(tokens * n));
  linear(x.data(), tokens, k, weight, n, nullptr, out.data());
  for (int64_t t = 0; t < tokens; ++t) {
    const double sx = quantizeActivations(x.data() + t * k, k).second;
    for (int64_t o = 0; o < n; ++o) {
      double exact = 0, absSum = 0;
      for (int64_t c = 0; c < k; ++c) {
        const double wv = double(nibble(w, o, c)) * w.scales[size_t(o)];
        exact += x[size_t(t * k + c)] * wv;
        absSum += std::abs(wv);
      }
      EXPECT_LE(std::abs(out[size_t(t * n + o)] - exact), 0.5 * sx * absSum * (1 + 1e-5) + 1e-5)
          << "token " << t << ", row " << o;
    }
  }
}

// Routed experts with W4A8 weights: experts() equals its definition
// through linear() (the same bits: each expert's GEMMs are linear()'s).
TEST(LinearW4A8, ExpertsEqualTheirLinearProducts) {
  std::mt19937 rng(51);
  const int64_t tokens = 5, hidden = 256, inter = 128, numExperts = 4, topK = 2;
  auto stack = [&](int64_t rows, int64_t cols) {
    TestWeight w = randomInt4Rows(numExperts * rows, cols, 128, rng);
    return w;
  };
  const TestWeight gate = stack(inter, hidden), up = stack(inter, hidden), down = stack(hidden, inter);
  auto w4a8 = [](const TestWeight &w) {
    Weight v = w.weight();
    v.int8Activations = true;
    return v;
  };
  const std::vector<float> x = randomFloats(rng, size_t(tokens * hidden));
  const std::vector<int32_t> indices = {0, 2, 1, 3, 2, 0, 3, 1, 0, 1};
  const std::vector<float> weights = {0.7f, 0.3f, 0.6f, 0.4f, 0.5f, 0.5f, 0.9f, 0.1f, 0.2f, 0.8f};
  ExpertWeights ew{w4a8(gate), w4a8(up), w4a8(down)};
  std::vector<float> got(size_t(tokens * hidden));
  experts(x.data(), tokens, hidden, inter, numExperts, weights.data(), indices.data(), topK, ew,
          got.data());
  // Token by token through linear() on each expert's slice, combined in
  // ascending expert id (combine's order).
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<std::pair<int32_t, float>> picks;
    for (int64_t j = 0; j < topK; ++j)
      picks.push_back({indices[size_t(t * topK + j)], weights[size_t(t * topK + j)]});
    std::sort(picks.begin(), picks.end());
    std::vector<float> want(size_t(hidden), 0.0f);
    for (auto [e, weight] : picks) {
      std::vector<float> g(inter), u(inter), h(inter), y(hidden);
      linear(x.data() + t * hidden, 1, hidden, ew.gate.offset(size_t(e * inter * hidden)), inter,
             nullptr, g.data());
      linear(x.data() + t * hidden, 1, hidden, ew.up.offset(size_t(e * inter * hidden)), inter,
             nullptr, u.data());
      siluMul(g.data(), u.data(), 1, inter, inter, h.data());
      linear(h.data(), 1, inter, ew.down.offset(size_t(e * hidden * inter)), hidden, nullptr,
             y.data());
      for (int64_t c = 0; c < hidden; ++c)
        want[size_t(c)] += weight * y[size_t(c)];
    }
    std::vector<double> wantD(want.begin(), want.end()), magnitude(size_t(hidden), 1.0);
    expectNear(got.data() + t * hidden, wantD, magnitude, 1e-5);
  }
}

// The f32-activation int4 path converts every nibble, -8 too, exactly:
// random bytes against a double reference, and the AVX2 and AVX-512 items
// (the latter's 64-element conversion and its single steps) agree bit for
// bit, for any token count.
TEST(LinearInt4, EveryNibbleValue) {
  std::mt19937 rng(52);
  const Isa saved = isa();
  const std::pair<int64_t, int64_t> shapes[] = {{2048, 9}, {300, 5}, {70, 4}};
  for (auto [k, n] : shapes)
    for (int64_t group : {int64_t(128), int64_t(0), int64_t(32)})
      for (int64_t tokens : {1, 2, 4, 5, 17, 140}) {
        SCOPED_TRACE(testing::Message() << tokens << " tokens, k " << k << ", group " << group);
        const TestWeight w = randomInt4Rows(n, k, group, rng);
        const std::vector<float> x = randomFloats(rng, size_t(tokens * k));
        const int64_t groups = (k + w.group - 1) / w.group;
        std::vector<double> want(size_t(tokens * n)), magnitude(size_t(tokens * n));
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t o = 0; o < n; ++o)
            for (int64_t c = 0; c < k; ++c) {
              const double term = double(x[size_t(t * k + c)]) * nibble(w, o, c) *
                                  w.scales[size_t(o * groups + c / w.group)];
              want[size_t(t * n + o)] += term;
              magnitude[size_t(t * n + o)] += std::abs(term);
            }
        std::vector<float> avx2(size_t(tokens * n)), avx512(size_t(tokens * n));
        setIsa(Isa::Avx2);
        linear(x.data(), tokens, k, w.weight(), n, nullptr, avx2.data());
        expectNear(avx2.data(), want, magnitude);
        if (cpuIsa() >= Isa::Avx512) {
          setIsa(Isa::Avx512);
          linear(x.data(), tokens, k, w.weight(), n, nullptr, avx512.data());
          EXPECT_EQ(0, std::memcmp(avx2.data(), avx512.data(), avx2.size() * sizeof(float)));
        }
      }
  setIsa(saved);
}

// --- Router ---

struct Routing {
  std::vector<double> weights;
  std::vector<int32_t> indices;
};

// Ids sorted by descending value, ties to the lower id.
std::vector<int32_t> rankDescending(const std::vector<double> &value) {
  std::vector<int32_t> ids(value.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return value[a] > value[b]; });
  return ids;
}

Routing referenceRouter(const std::vector<float> &x, int64_t tokens,
                        int64_t hidden, const std::vector<double> &w,
                        const std::vector<double> &bias,
                        const RouterParams &p) {
  const int64_t experts = p.numExperts, k = p.topK;
  const int64_t size = experts / p.nGroup;
  Routing r;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> logits(experts, 0.0), scores(experts);
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t i = 0; i < hidden; ++i)
        logits[e] += x[t * hidden + i] * w[e * hidden + i];
    const double max = *std::max_element(logits.begin(), logits.end());
    double total = 0;
    for (int64_t e = 0; e < experts; ++e)
      total += std::exp(logits[e] - max);
    for (int64_t e = 0; e < experts; ++e)
      scores[e] = p.scoring == Scoring::Softmax
                      ? std::exp(logits[e] - max) / total
                      : 1.0 / (1.0 + std::exp(-logits[e]));

    std::vector<double> choice = scores;
    if (p.method == TopkMethod::NoAuxTc)
      for (int64_t e = 0; e < experts; ++e)
        choice[e] += bias[e];
    if (p.method != TopkMethod::Greedy) {
      std::vector<double> groupScore(p.nGroup);
      for (int64_t g = 0; g < p.nGroup; ++g) {
        std::vector<double> members(choice.begin() + g * size,
                                    choice.begin() + (g + 1) * size);
        std::sort(members.rbegin(), members.rend());
        groupScore[g] = p.method == TopkMethod::GroupLimitedGreedy
                            ? members[0]
                            : members[0] + members[1];
      }
      const std::vector<int32_t> groups = rankDescending(groupScore);
      for (int64_t g = 0; g < p.nGroup; ++g)
        if (std::find(groups.begin(), groups.begin() + p.topkGroup, g) ==
            groups.begin() + p.topkGroup)
          for (int64_t e = g * size; e < (g + 1) * size; ++e)
            choice[e] = p.method == TopkMethod::NoAuxTc ? -INFINITY : 0.0; // as transformers
    }
    const std::vector<int32_t> chosen = rankDescending(choice);
    std::vector<double> weights;
    for (int64_t j = 0; j < k; ++j)
      weights.push_back(p.method == TopkMethod::NoAuxTc ? scores[chosen[j]]
                                                        : choice[chosen[j]]);
    const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
    for (int64_t j = 0; j < k; ++j) {
      if (p.normTopkProb)
        weights[j] /= sum + 1e-20;
      r.weights.push_back(weights[j] * p.routedScalingFactor);
      r.indices.push_back(chosen[j]);
    }
  }
  return r;
}

void expectRouting(const std::vector<float> &weights,
                   const std::vector<int32_t> &indices, const Routing &want) {
  EXPECT_EQ(indices, want.indices);
  ASSERT_EQ(weights.size(), want.weights.size());
  for (size_t i = 0; i < weights.size(); ++i)
    EXPECT_NEAR(weights[i], want.weights[i], 1e-5 * std::abs(want.weights[i]))
        << "at " << i;
}

TEST_P(Quantizable, RouterRandom) {
  const int64_t hidden = 34;
  struct Case {
    TopkMethod method;
    int64_t experts, k, groups, keptGroups;
  };
  const Case cases[] = {{TopkMethod::Greedy, 10, 1, 1, 1},
                        {TopkMethod::Greedy, 10, 3, 1, 1},
                        {TopkMethod::GroupLimitedGreedy, 12, 3, 4, 2},
                        {TopkMethod::NoAuxTc, 16, 4, 4, 2},
                        {TopkMethod::NoAuxTc, 12, 2, 3, 1}};
  for (const Case &c : cases)
    for (Scoring scoring : {Scoring::Softmax, Scoring::Sigmoid})
      for (bool norm : {false, true})
        for (float factor : {1.0f, 2.5f})
          // 3300 tokens: enough that the threads share them.
          for (int64_t tokens : {1, 7, 33, 3300}) {
            SCOPED_TRACE(testing::Message()
                         << "method " << int(c.method) << ", k " << c.k
                         << ", scoring " << int(scoring) << ", norm " << norm
                         << ", factor " << factor << ", tokens " << tokens);
            RouterParams p;
            p.numExperts = c.experts;
            p.topK = c.k;
            p.scoring = scoring;
            p.method = c.method;
            p.normTopkProb = norm;
            p.nGroup = c.groups;
            p.topkGroup = c.keptGroups;
            p.routedScalingFactor = factor;
            const std::vector<float> x = randomFloats(rng, tokens * hidden);
            const TestWeight w =
                randomWeight(GetParam(), c.experts * hidden, rng, 0.5f, hidden);
            const TestWeight bias =
                randomWeight(vectorFormat(), c.experts, rng, 0.2f);
            const Weight b = bias.weight();
            const bool noAux = c.method == TopkMethod::NoAuxTc;
            std::vector<float> weights(tokens * c.k);
            std::vector<int32_t> indices(tokens * c.k);
            router(x.data(), tokens, hidden, w.weight(), noAux ? &b : nullptr,
                   p, weights.data(), indices.data());
            expectRouting(
                weights, indices,
                referenceRouter(x, tokens, hidden, w.ref, bias.ref, p));
          }
}

/// Routes one token whose logits are exactly `logits` (x = logits, w = I).
struct ExactRouter {
  RouterParams p;
  std::vector<float> bias;
  std::vector<float> weights;
  std::vector<int32_t> indices;

  void route(const std::vector<float> &logits) {
    const int64_t e = logits.size();
    std::vector<float> identity(e * e, 0.0f);
    for (int64_t i = 0; i < e; ++i)
      identity[i * e + i] = 1.0f;
    p.numExperts = e;
    weights.assign(p.topK, 0.0f);
    indices.assign(p.topK, -1);
    const Weight b{bias.data(), WeightType::F32};
    router(logits.data(), 1, e, {identity.data(), WeightType::F32},
           bias.empty() ? nullptr : &b, p, weights.data(), indices.data());
    std::vector<double> w(identity.begin(), identity.end());
    expectRouting(weights, indices,
                  referenceRouter(logits, 1, e, w, toDouble(bias), p));
  }
};

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

TEST(Router, TiesGoToLowerId) {
  for (Scoring scoring : {Scoring::Softmax, Scoring::Sigmoid}) {
    ExactRouter r;
    r.p.topK = 2;
    r.p.scoring = scoring;
    r.route({0.1f, 0.5f, 0.3f, 0.5f, 0.5f, 0.2f});
    EXPECT_EQ(r.indices, (std::vector<int32_t>{1, 3}));
  }
}

TEST(Router, GroupTiesGoToLowerGroup) {
  ExactRouter r;
  r.p.topK = 2;
  r.p.method = TopkMethod::GroupLimitedGreedy;
  r.p.nGroup = 3;
  r.p.topkGroup = 1;
  // Groups 0 and 1 both peak at 0.7; group 0 is kept.
  r.route({0.1f, 0.7f, 0.7f, 0.2f, 0.3f, 0.3f});
  EXPECT_EQ(r.indices, (std::vector<int32_t>{1, 0}));
}

TEST(Router, GroupLimitedExcludesUnkeptGroup) {
  ExactRouter r;
  r.p.topK = 2;
  r.p.method = TopkMethod::GroupLimitedGreedy;
  r.p.nGroup = 3;
  r.p.topkGroup = 1;
  // The second-best expert (4, logit 4) is in group 2, which is not kept.
  const std::vector<float> logits = {5, 1, 0, 0, 4, 0};
  r.route(logits);
  EXPECT_EQ(r.indices, (std::vector<int32_t>{0, 1}));
  ExactRouter greedy;
  greedy.p.topK = 2;
  greedy.route(logits);
  EXPECT_EQ(greedy.indices, (std::vector<int32_t>{0, 4}));
}

TEST(Router, NoAuxTcBiasChangesChoiceNotWeights) {
  ExactRouter r;
  r.p.topK = 2;
  r.p.scoring = Scoring::Sigmoid;
  r.p.method = TopkMethod::NoAuxTc;
  r.bias = {0.0f, 0.0f, 0.5f, 0.0f};
  // Unbiased, experts 0 and 1 win; the bias lifts expert 2 above both.
  r.route({2.0f, 1.0f, 0.0f, -1.0f});
  EXPECT_EQ(r.indices, (std::vector<int32_t>{2, 0}));
  EXPECT_NEAR(r.weights[0], sigmoid(0.0), 1e-6);
  EXPECT_NEAR(r.weights[1], sigmoid(2.0), 1e-6);
}

// transformers 5.24 masks the unkept groups with -inf: a token whose biased
// scores are all negative still picks from its kept groups (a 0.0 mask would
// pick the masked experts instead).
TEST(Router, NoAuxTcNegativeBiasedScoresStayInKeptGroups) {
  ExactRouter r;
  r.p.topK = 2;
  r.p.scoring = Scoring::Sigmoid;
  r.p.method = TopkMethod::NoAuxTc;
  r.p.nGroup = 2;
  r.p.topkGroup = 1;
  r.bias = {-2.0f, -2.0f, -3.0f, -3.0f};
  // Group 0 sums to about -2.8, group 1 to about -4.8: group 0 is kept.
  r.route({1.0f, 0.0f, 1.0f, 0.0f});
  EXPECT_EQ(r.indices, (std::vector<int32_t>{0, 1}));
}

TEST(Router, NoAuxTcGroupOfTwoBestExcludesBestExpert) {
  ExactRouter r;
  r.p.topK = 2;
  r.p.scoring = Scoring::Sigmoid;
  r.p.method = TopkMethod::NoAuxTc;
  r.p.nGroup = 2;
  r.p.topkGroup = 1;
  r.p.normTopkProb = true;
  r.p.routedScalingFactor = 2.5f;
  r.bias = {0.0f, 0.0f, 0.0f, 0.0f};
  // Group 0 holds the best expert but sums to 1.0; group 1 sums to ~1.35.
  r.route({3.0f, -3.0f, 1.0f, 0.5f});
  EXPECT_EQ(r.indices, (std::vector<int32_t>{2, 3}));
  const double sum = sigmoid(1.0) + sigmoid(0.5);
  EXPECT_NEAR(r.weights[0], sigmoid(1.0) / sum * 2.5, 1e-6);
}

/// Routes `logits` ([tokens, experts], x = logits, w = I) under `p`.
void routeExact(const std::vector<float> &logits, int64_t tokens, RouterParams &p,
                std::vector<float> &weights, std::vector<int32_t> &indices) {
  const int64_t e = int64_t(logits.size()) / tokens;
  std::vector<float> identity(size_t(e * e), 0.0f);
  for (int64_t i = 0; i < e; ++i)
    identity[size_t(i * e + i)] = 1.0f;
  p.numExperts = e;
  weights.assign(size_t(tokens * p.topK), -1.0f);
  indices.assign(size_t(tokens * p.topK), -1);
  router(logits.data(), tokens, e, {identity.data(), WeightType::F32}, nullptr, p,
         weights.data(), indices.data());
}

double softmaxOf(std::vector<double> logits, size_t i) {
  double sum = 0;
  for (double l : logits)
    sum += std::exp(l);
  return std::exp(logits[i]) / sum;
}

// Capacity, worked by hand: 3 experts, top-2, 3 tokens: capacity
// ceil(3 x 2 / 3) = 2. Tokens 0 and 1 prefer 0 > 1 > 2, token 2 prefers
// 2 > 1 > 0. First picks: 0 -> e0, 1 -> e0 (now full), 2 -> e2. Second
// picks: 0 -> e1, 1 -> e1 (full), 2: e1 and e0 full, its only untaken
// expert with room would be none, so its best untaken one, e1, over capacity.
TEST(Router, CapacityOverflowsToTheNextBestExpertWithRoom) {
  RouterParams p;
  p.topK = 2;
  p.policy = RoutingPolicy::Capacity;
  std::vector<float> weights;
  std::vector<int32_t> indices;
  routeExact({3, 2, 0, 3, 2, 0, 0, 1, 3}, 3, p, weights, indices);
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1, 0, 1, 2, 1}));
  EXPECT_NEAR(weights[0], softmaxOf({3, 2, 0}, 0), 1e-6);
  EXPECT_NEAR(weights[5], softmaxOf({0, 1, 3}, 1), 1e-6);
  // A capacity of 2 x the even share leaves every token its own top-2.
  p.capacityFactor = 2;
  routeExact({3, 2, 0, 3, 2, 0, 0, 1, 3}, 3, p, weights, indices);
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1, 0, 1, 2, 1}));
  routeExact({3, 2, 0, 2, 3, 0, 0, 1, 3}, 3, p, weights, indices);
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1, 1, 0, 2, 1}));
}

// Expert choice, worked by hand with sigmoid scores (columns independent):
// 2 experts, top-1, 3 tokens: capacity ceil(3 x 1 / 2) = 2. Both experts
// take tokens 0 and 1 (logits 2 and 1 beat -1); tokens 0 and 1 keep their
// best offer (a tie: the lower id, e0); token 2 gets no offer and is padded
// with its best expert at weight 0.
TEST(Router, ExpertChoiceTakesEachExpertsBestTokensAndPadsTheRest) {
  RouterParams p;
  p.topK = 1;
  p.scoring = Scoring::Sigmoid;
  p.policy = RoutingPolicy::ExpertChoice;
  std::vector<float> weights;
  std::vector<int32_t> indices;
  routeExact({2, 2, 1, 1, -1, -1}, 3, p, weights, indices);
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 0, 0}));
  EXPECT_NEAR(weights[0], sigmoid(2.0), 1e-6);
  EXPECT_NEAR(weights[1], sigmoid(1.0), 1e-6);
  EXPECT_EQ(weights[2], 0.0f);
  // Softmax, 3 experts, top-2, capacity 2: expert 0 takes tokens 1 and 0
  // (0.766, 0.705), expert 1 tokens 0 and 2 (0.260, 0.114), expert 2
  // tokens 2 and 1 (0.844, 0.171); each token keeps its two, best first.
  p.topK = 2;
  p.scoring = Scoring::Softmax;
  routeExact({3, 2, 0, 2.5, 0, 1, 0, 1, 3}, 3, p, weights, indices);
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1, 0, 2, 2, 1}));
  EXPECT_NEAR(weights[3], softmaxOf({2.5, 0, 1}, 2), 1e-6);
}

// One token (a decode step): every policy is token choice.
TEST(Router, PoliciesAgreeOnOneToken) {
  std::mt19937 rng(11);
  const std::vector<float> logits = randomFloats(rng, 8, 3.0f);
  std::vector<float> want, got;
  std::vector<int32_t> wantIds, gotIds;
  RouterParams p;
  p.topK = 3;
  p.normTopkProb = true;
  routeExact(logits, 1, p, want, wantIds);
  for (RoutingPolicy policy : {RoutingPolicy::Capacity, RoutingPolicy::ExpertChoice})
    for (float factor : {1.0f, 1.5f}) {
      p.policy = policy;
      p.capacityFactor = factor;
      routeExact(logits, 1, p, got, gotIds);
      EXPECT_EQ(gotIds, wantIds);
      EXPECT_EQ(got, want);
    }
}

// Over random steps: every token has top-k distinct experts; capacity
// routing equals a naive simulation of its rule in double precision (rounds
// of pick ranks; the best untaken expert with room, else the best untaken);
// with expert choice no expert computes more real picks than its capacity,
// and each real pick is among the expert's best `capacity` tokens.
TEST(Router, PolicyInvariantsOnRandomSteps) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t e = 2 + rng() % 9, k = 1 + rng() % e, tokens = 1 + rng() % 40;
    const std::vector<float> logits = randomFloats(rng, size_t(tokens * e), 4.0f);
    for (RoutingPolicy policy : {RoutingPolicy::Capacity, RoutingPolicy::ExpertChoice}) {
      RouterParams p;
      p.topK = k;
      p.policy = policy;
      p.capacityFactor = 1.0f + float(rng() % 3) * 0.25f;
      std::vector<float> weights;
      std::vector<int32_t> indices;
      routeExact(logits, tokens, p, weights, indices);
      const int64_t capacity = routingCapacity(p, tokens);
      EXPECT_EQ(capacity, int64_t(std::ceil(double(p.capacityFactor) * tokens * k / e)));
      std::vector<int64_t> load(size_t(e), 0);
      for (int64_t t = 0; t < tokens; ++t) {
        std::set<int32_t> mine(indices.begin() + t * k, indices.begin() + (t + 1) * k);
        ASSERT_EQ(int64_t(mine.size()), k) << "token " << t << " has repeated experts";
        for (int64_t j = 0; j < k; ++j)
          if (policy == RoutingPolicy::Capacity || weights[size_t(t * k + j)] > 0)
            ++load[size_t(indices[size_t(t * k + j)])];
      }
      if (policy == RoutingPolicy::Capacity) {
        std::vector<int64_t> used(size_t(e), 0);
        std::vector<std::set<int64_t>> taken(static_cast<size_t>(tokens));
        for (int64_t j = 0; j < k; ++j)
          for (int64_t t = 0; t < tokens; ++t) {
            std::vector<double> row(logits.begin() + t * e, logits.begin() + (t + 1) * e);
            int64_t withRoom = -1, untaken = -1;
            for (int64_t x = 0; x < e; ++x) {
              if (taken[size_t(t)].count(x))
                continue;
              auto better = [&](int64_t a, int64_t b) {
                return b < 0 || row[size_t(a)] > row[size_t(b)];
              };
              if (better(x, untaken))
                untaken = x;
              if (used[size_t(x)] < capacity && better(x, withRoom))
                withRoom = x;
            }
            const int64_t x = withRoom >= 0 ? withRoom : untaken;
            taken[size_t(t)].insert(x);
            ++used[size_t(x)];
            EXPECT_EQ(indices[size_t(t * k + j)], x) << "token " << t << " pick " << j;
          }
        EXPECT_EQ(used, load);
      }
      for (int64_t x = 0; x < e; ++x) {
        if (policy == RoutingPolicy::ExpertChoice) {
          EXPECT_LE(load[size_t(x)], capacity);
          // Its real picks score at least its capacity-th best token.
          std::vector<float> column;
          for (int64_t t = 0; t < tokens; ++t)
            column.push_back(float(softmaxOf(
                std::vector<double>(logits.begin() + t * e, logits.begin() + (t + 1) * e),
                size_t(x))));
          std::vector<float> sorted = column;
          std::sort(sorted.rbegin(), sorted.rend());
          const float bar = sorted[size_t(std::min(capacity, tokens) - 1)];
          for (int64_t t = 0; t < tokens; ++t)
            for (int64_t j = 0; j < k; ++j)
              if (indices[size_t(t * k + j)] == x && weights[size_t(t * k + j)] > 0)
                EXPECT_GE(column[size_t(t)], bar - 1e-6f);
        }
      }
    }
  }
}

// --- Experts ---

// With shared = 1 the last of the 8 stacked experts is always on (weight 1)
// and the router picks among the other 7.
TEST_P(Quantizable, Experts) {
  const int64_t hidden = 20, inter = 14, numExperts = 8;
  // Experts 2 and 5 never get a token.
  const std::vector<int32_t> used = {0, 1, 3, 4, 6};
  const TestWeight gate =
      randomWeight(GetParam(), numExperts * inter * hidden, rng, 0.5f, hidden);
  const TestWeight up =
      randomWeight(GetParam(), numExperts * inter * hidden, rng, 0.5f, hidden);
  const TestWeight down =
      randomWeight(GetParam(), numExperts * hidden * inter, rng, 0.5f, inter);
  const TestWeight gateUp = fuse(gate, up, numExperts);
  const Weight fused = gateUp.weight();

  for (int64_t shared : {0, 1}) {
    for (int64_t topK = 1; topK <= 4; ++topK)
      for (int64_t tokens : {1, 7, 33}) {
        SCOPED_TRACE(testing::Message()
                     << "topK " << topK << ", tokens " << tokens << ", shared " << shared);
        const ExpertWeights separate{gate.weight(), up.weight(), down.weight(), nullptr, shared};
        const ExpertWeights together{{}, {}, down.weight(), &fused, shared};
        const std::vector<float> x = randomFloats(rng, tokens * hidden);
        const std::vector<float> weights = randomFloats(rng, tokens * topK);
        std::vector<int32_t> indices;
        for (int64_t t = 0; t < tokens; ++t) {
          std::vector<int32_t> pick = used;
          std::shuffle(pick.begin(), pick.end(), rng);
          indices.insert(indices.end(), pick.begin(), pick.begin() + topK);
        }

        std::vector<double> want(tokens * hidden, 0.0), magnitude(want.size());
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t j = 0; j < topK + shared; ++j) {
            const int64_t e = j < topK ? indices[t * topK + j] : numExperts - 1;
            const double weight = j < topK ? weights[t * topK + j] : 1.0;
            std::vector<double> act(inter);
            for (int64_t i = 0; i < inter; ++i) {
              double g = 0, u = 0;
              for (int64_t h = 0; h < hidden; ++h) {
                g += x[t * hidden + h] * gate.ref[(e * inter + i) * hidden + h];
                u += x[t * hidden + h] * up.ref[(e * inter + i) * hidden + h];
              }
              act[i] = g / (1.0 + std::exp(-g)) * u;
            }
            for (int64_t h = 0; h < hidden; ++h) {
              double y = 0, mag = 0;
              for (int64_t i = 0; i < inter; ++i) {
                y += act[i] * down.ref[(e * hidden + h) * inter + i];
                mag += std::abs(act[i] * down.ref[(e * hidden + h) * inter + i]);
              }
              want[t * hidden + h] += weight * y;
              magnitude[t * hidden + h] += std::abs(weight) * mag;
            }
          }

        // Each form grouped and one expert at a time: the same bits.
        for (ExpertWeights w : {separate, together}) {
          std::vector<float> out(tokens * hidden, NAN), single(out.size(), NAN);
          experts(x.data(), tokens, hidden, inter, numExperts - shared, weights.data(),
                  indices.data(), topK, w, out.data());
          expectNear(out.data(), want, magnitude, 2e-5);
          w.grouped = false;
          experts(x.data(), tokens, hidden, inter, numExperts - shared, weights.data(),
                  indices.data(), topK, w, single.data());
          EXPECT_EQ(0, std::memcmp(out.data(), single.data(), out.size() * sizeof(float)));
        }
      }
  }
}

// A prefill's expert rows run in chunks of experts (Experts.cpp,
// kExpertScratchBytes: about 680 rows of an intermediate size of 2,048 at
// once); a batch of 1,200 rows over 8 experts takes two or more chunks, and
// each token's output has the bits it has alone (one chunk), grouped or not.
TEST(Experts, ChunkedRowsEqualEachTokenAlone) {
  std::mt19937 rng(11);
  const int64_t hidden = 8, inter = 2048, numExperts = 8, topK = 4, tokens = 300;
  const Format format(WeightType::F32);
  const TestWeight gate = randomWeight(format, numExperts * inter * hidden, rng, 0.5f, hidden);
  const TestWeight up = randomWeight(format, numExperts * inter * hidden, rng, 0.5f, hidden);
  const TestWeight down = randomWeight(format, numExperts * hidden * inter, rng, 0.5f, inter);
  const std::vector<float> x = randomFloats(rng, tokens * hidden);
  const std::vector<float> weights = randomFloats(rng, tokens * topK);
  std::vector<int32_t> indices;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int32_t> pick(numExperts);
    std::iota(pick.begin(), pick.end(), 0);
    std::shuffle(pick.begin(), pick.end(), rng);
    indices.insert(indices.end(), pick.begin(), pick.begin() + topK);
  }
  for (bool grouped : {true, false}) {
    SCOPED_TRACE(grouped);
    ExpertWeights w{gate.weight(), up.weight(), down.weight(), nullptr, 0};
    w.grouped = grouped;
    std::vector<float> all(tokens * hidden, NAN), alone(hidden, NAN);
    experts(x.data(), tokens, hidden, inter, numExperts, weights.data(), indices.data(), topK, w,
            all.data());
    for (int64_t t = 0; t < tokens; ++t) {
      experts(x.data() + t * hidden, 1, hidden, inter, numExperts, weights.data() + t * topK,
              indices.data() + t * topK, topK, w, alone.data());
      ASSERT_EQ(0, std::memcmp(all.data() + t * hidden, alone.data(), hidden * sizeof(float)))
          << "token " << t;
    }
  }
}

// experts() in its parts: dispatch puts each slot's token row in its
// expert's group; expertRows and combine give the same bits wherever the
// rows lie (here in reverse order, as rows from other ranks may arrive):
// expertRows regroups them, and every token sums its picks in ascending
// expert id.
TEST(ExpertParts, DispatchGroupsRowsAndTheRestIgnoresTheirLayout) {
  std::mt19937 rng(5);
  const int64_t tokens = 7, hidden = 12, inter = 8, numExperts = 5, topK = 2, shared = 1;
  const int64_t stacked = numExperts + shared;
  const TestWeight gate = randomWeight(WeightType::F32, stacked * inter * hidden, rng);
  const TestWeight up = randomWeight(WeightType::F32, stacked * inter * hidden, rng);
  const TestWeight down = randomWeight(WeightType::F32, stacked * hidden * inter, rng);
  const ExpertWeights w{gate.weight(), up.weight(), down.weight(), nullptr, shared};
  const std::vector<float> x = randomFloats(rng, tokens * hidden),
                           weights = randomFloats(rng, tokens * topK);
  std::vector<int32_t> indices;
  for (int64_t t = 0; t < tokens; ++t) {
    const int32_t a = int32_t(rng() % numExperts);
    indices.push_back(a);
    indices.push_back(int32_t((a + 1 + rng() % (numExperts - 1)) % numExperts));
  }
  const int64_t slots = tokens * (topK + shared);
  std::vector<float> rows(slots * hidden), y(slots * hidden), whole(tokens * hidden),
      parts(tokens * hidden);
  std::vector<int32_t> slotOf(slots, -1), rowOf(slots, -1);
  dispatch(x.data(), tokens, hidden, indices.data(), topK, numExperts, shared, rows.data(),
           slotOf.data(), rowOf.data());
  EXPECT_TRUE(std::is_sorted(slotOf.begin(), slotOf.end()));
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t t = s / (topK + shared), j = s % (topK + shared);
    const int64_t e = j < topK ? indices[t * topK + j] : numExperts + j - topK;
    const int64_t row = rowOf[s];
    ASSERT_TRUE(row >= 0 && row < slots) << "slot " << s;
    EXPECT_EQ(slotOf[row], e) << "slot " << s;
    EXPECT_EQ(0, std::memcmp(&rows[row * hidden], &x[t * hidden], hidden * 4)) << "slot " << s;
  }
  expertRows(rows.data(), slotOf.data(), slots, hidden, inter, w, stacked, ExpertShare(), y.data());
  experts(x.data(), tokens, hidden, inter, numExperts, weights.data(), indices.data(), topK, w,
          whole.data());
  // The same rows and slots in reverse order: expertRows gives each row the
  // same bits, and combine (told where each row went) the same sums.
  std::vector<float> reversedRows(rows.size()), reversedY(y.size());
  std::vector<int32_t> reversedSlots(slots), reversedRowOf(slots);
  for (int64_t row = 0; row < slots; ++row) {
    std::copy_n(&rows[row * hidden], hidden, &reversedRows[(slots - 1 - row) * hidden]);
    reversedSlots[slots - 1 - row] = slotOf[row];
  }
  for (int64_t s = 0; s < slots; ++s)
    reversedRowOf[s] = int32_t(slots - 1 - rowOf[s]);
  expertRows(reversedRows.data(), reversedSlots.data(), slots, hidden, inter, w, stacked,
             ExpertShare(), reversedY.data());
  for (int64_t row = 0; row < slots; ++row)
    EXPECT_EQ(0, std::memcmp(&y[row * hidden], &reversedY[(slots - 1 - row) * hidden], hidden * 4))
        << "row " << row;
  combine(reversedY.data(), reversedRowOf.data(), weights.data(), indices.data(), tokens, topK,
          shared, hidden, parts.data());
  EXPECT_EQ(0, std::memcmp(whole.data(), parts.data(), whole.size() * 4));

  // Expert parallelism: three ranks hold experts {h, a}, {b, h}, {c, d, 5}
  // (h, the most picked, replicated: its rows alternate between ranks 0
  // and 1), each rank's stacks packed in that order; each computes its rows
  // and zeros the others', so the sum over the ranks (an all-reduce) is
  // every row's own bits, and each replica of h takes half of its rows.
  std::vector<int32_t> byLoad(numExperts);
  std::iota(byLoad.begin(), byLoad.end(), 0);
  std::stable_sort(byLoad.begin(), byLoad.end(), [&](int32_t a, int32_t b) {
    return std::count(slotOf.begin(), slotOf.end(), a) > std::count(slotOf.begin(), slotOf.end(), b);
  });
  const int32_t hot = byLoad[0];
  const std::vector<std::vector<int32_t>> heldBy = {
      {hot, byLoad[1]}, {byLoad[2], hot}, {byLoad[3], byLoad[4], 5}};
  std::vector<float> summed(y.size(), 0.0f), slice(y.size());
  std::vector<int64_t> rowsOf3;
  for (size_t rank = 0; rank < heldBy.size(); ++rank) {
    ExpertShare share{std::vector<int32_t>(stacked, -1), std::vector<int32_t>(stacked, 1),
                      std::vector<int32_t>(stacked, 0)};
    std::vector<float> g, u, d;
    for (size_t i = 0; i < heldBy[rank].size(); ++i) {
      const int32_t e = heldBy[rank][i];
      share.stack[size_t(e)] = int32_t(i);
      if (e == hot) {
        share.replicas[size_t(hot)] = 2;
        share.replica[size_t(hot)] = rank == 0 ? 0 : 1;
      }
      const size_t n = size_t(inter * hidden);
      g.insert(g.end(), gate.f32.begin() + e * n, gate.f32.begin() + (e + 1) * n);
      u.insert(u.end(), up.f32.begin() + e * n, up.f32.begin() + (e + 1) * n);
      d.insert(d.end(), down.f32.begin() + e * n, down.f32.begin() + (e + 1) * n);
    }
    Weight gw, uw, dw;
    gw.data = g.data();
    uw.data = u.data();
    dw.data = d.data();
    const ExpertWeights held{gw, uw, dw, nullptr, shared};
    expertRows(reversedRows.data(), reversedSlots.data(), slots, hidden, inter, held,
               int64_t(heldBy[rank].size()), share, slice.data());
    int64_t mine3 = 0;
    for (int64_t row = 0; row < slots; ++row) {
      const bool zero = std::all_of(&slice[row * hidden], &slice[(row + 1) * hidden],
                                    [](float v) { return v == 0.0f; });
      mine3 += reversedSlots[row] == hot && !zero;
    }
    rowsOf3.push_back(mine3);
    for (size_t i = 0; i < slice.size(); ++i)
      summed[i] += slice[i];
  }
  EXPECT_EQ(0, std::memcmp(summed.data(), reversedY.data(), summed.size() * 4));
  const int64_t all3 = std::count(slotOf.begin(), slotOf.end(), hot);
  ASSERT_GE(all3, 2) << "the routing must give the hot expert rows to share";
  EXPECT_EQ(rowsOf3[0], (all3 + 1) / 2);
  EXPECT_EQ(rowsOf3[1], all3 / 2);
  EXPECT_EQ(rowsOf3[2], 0);
}

// Across calls (decode steps of one row each), a replicated expert's rows
// keep their round-robin when the launch keeps the count (`seen`): the two
// replicas alternate instead of the first taking every one-row step.
TEST(ExpertParts, ReplicasAlternateAcrossOneRowSteps) {
  std::mt19937 rng(6);
  const int64_t hidden = 8, inter = 4, stacked = 2;
  const TestWeight gate = randomWeight(WeightType::F32, stacked * inter * hidden, rng);
  const TestWeight up = randomWeight(WeightType::F32, stacked * inter * hidden, rng);
  const TestWeight down = randomWeight(WeightType::F32, stacked * hidden * inter, rng);
  const ExpertWeights w{gate.weight(), up.weight(), down.weight(), nullptr, 0};
  const std::vector<float> row = randomFloats(rng, hidden);
  const int32_t expert = 1;
  std::vector<uint64_t> seen0(stacked, 0), seen1(stacked, 0);
  for (int step = 0; step < 5; ++step) {
    std::vector<int> computedBy;
    for (int rank = 0; rank < 2; ++rank) {
      ExpertShare share{{0, 1}, {1, 2}, {0, rank}, rank == 0 ? &seen0 : &seen1};
      std::vector<float> y(hidden, -1.0f);
      expertRows(row.data(), &expert, 1, hidden, inter, w, stacked, share, y.data());
      if (std::any_of(y.begin(), y.end(), [](float v) { return v != 0.0f; }))
        computedBy.push_back(rank);
    }
    EXPECT_EQ(computedBy, std::vector<int>{step % 2}) << "step " << step;
  }
  EXPECT_EQ(seen0[1], 5u);
  EXPECT_EQ(seen1[1], 5u);
}

// linearGroup's threads claim a run's items one at a time and take the
// upper half of another run's rest when their own are done: every output
// is computed exactly once (outputs start as NaN) and gives the bits one
// thread gives, however the items were shared. Problems of uneven work
// (1 to 70 tokens, direct and buffered items), many times over.
TEST(LinearGroup, EveryItemOnceHoweverThreadsShareRuns) {
  std::mt19937 rng(7);
  const int64_t k = 512, n = 96, count = 24;
  std::vector<TestWeight> weights;
  std::vector<std::vector<float>> xs;
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < count; ++i) {
    weights.push_back(randomWeight(i % 3 ? WeightType::BF16 : WeightType::I8, n * k, rng, 1.0f, k));
    tokens.push_back(1 + int64_t(rng() % 70));
    xs.push_back(randomFloats(rng, size_t(tokens.back() * k)));
  }
  auto run = [&](int threads) {
    const int saved = kernelThreads();
    setKernelThreads(threads);
    std::vector<std::vector<float>> outs;
    std::vector<LinearProblem> problems;
    for (int64_t i = 0; i < count; ++i)
      outs.emplace_back(size_t(tokens[size_t(i)] * n), std::nanf(""));
    for (int64_t i = 0; i < count; ++i)
      problems.push_back({xs[size_t(i)].data(), tokens[size_t(i)], k, weights[size_t(i)].weight(), n,
                          nullptr, outs[size_t(i)].data()});
    linearGroup(problems.data(), problems.size());
    setKernelThreads(saved);
    return outs;
  };
  const auto one = run(1);
  for (const auto &out : one)
    for (float v : out)
      ASSERT_FALSE(std::isnan(v));
  for (int round = 0; round < 20; ++round)
    for (int threads : {2, 3, 4}) {
      const auto many = run(threads);
      for (int64_t i = 0; i < count; ++i)
        ASSERT_EQ(0, std::memcmp(many[size_t(i)].data(), one[size_t(i)].data(),
                                 one[size_t(i)].size() * sizeof(float)))
            << "problem " << i << ", " << threads << " threads, round " << round;
    }
}

// Results do not depend on the number of threads (sizes large enough for
// linear() to use them).
TEST(Determinism, SameBitsForAnyThreadCount) {
  std::mt19937 rng(99);
  const int64_t tokens = 40, hidden = 256, inter = 96, numExperts = 4;
  const int64_t topK = 2;
  const TestWeight gate =
      randomWeight(WeightType::BF16, numExperts * inter * hidden, rng);
  const TestWeight up =
      randomWeight(WeightType::BF16, numExperts * inter * hidden, rng);
  const TestWeight down =
      randomWeight(WeightType::BF16, numExperts * hidden * inter, rng);
  const std::vector<float> x = randomFloats(rng, tokens * hidden);
  const std::vector<float> weights = randomFloats(rng, tokens * topK);
  std::vector<int32_t> indices(tokens * topK);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < topK; ++j)
      indices[t * topK + j] = (t + j) % numExperts;
  auto run = [&](int threads) {
    const int saved = kernelThreads();
    setKernelThreads(threads);
    std::vector<float> out(tokens * hidden);
    experts(x.data(), tokens, hidden, inter, numExperts, weights.data(),
            indices.data(), topK, {gate.weight(), up.weight(), down.weight()},
            out.data());
    setKernelThreads(saved);
    return out;
  };
  const std::vector<float> one = run(1);
  for (int threads : {2, 3}) {
    const std::vector<float> many = run(threads);
    EXPECT_EQ(0, std::memcmp(many.data(), one.data(), many.size() * 4))
        << threads << " threads";
  }
}

} // namespace
