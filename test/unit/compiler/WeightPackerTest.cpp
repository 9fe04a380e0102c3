// The packer reads a tensor-parallel slice (some columns of each row, a
// strided view of a checkpoint tensor) as the naive copy of those columns,
// both as stored and encoded, in pieces smaller and larger than its buffer;
// in panels, it writes the naive interleave of those rows, 8 at a time,
// whether a panel spans read pieces or parts. Every weight's checksum is
// libxxhash's XXH3-64 of its bytes, streamed across pieces and parts.
// A GPTQ layer's view, whole or sliced on its groups, is the naive nibble
// packing of its q - 8 with its fp16 scales widened; a slice that cuts a
// group is refused.
#include "compiler/import/PackedInt4.h"
#include "compiler/target/WeightPacker.h"
#include "moe/abi/Numeric.h"
#include "moe/abi/PlanFormat.h"

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

namespace {

namespace fs = std::filesystem;

class WeightPackerSlice : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("moe-packer-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kCols; ++c)
        values.push_back(float(r * 1000 + c) * 0.25f);
    std::ofstream(dir / "t.bin", std::ios::binary)
        .write(reinterpret_cast<const char *>(values.data()), std::streamsize(values.size() * 4));
  }
  void TearDown() override { fs::remove_all(dir); }

  /// Columns [c0, c0 + n) of rows [r0, r0 + m), as the plan writer views them.
  moe::TensorInfo view(int r0, int m, int c0, int n) const {
    moe::TensorInfo t;
    t.file = (dir / "t.bin").string();
    t.dtype = "F32";
    t.shape = {m, n};
    t.offset = (uint64_t(r0) * kCols + uint64_t(c0)) * 4;
    t.size = uint64_t(m) * uint64_t(n) * 4;
    t.rowPitch = n == kCols ? 0 : kCols * 4;
    return t;
  }
  std::vector<float> naive(int r0, int m, int c0, int n) const {
    std::vector<float> out;
    for (int r = r0; r < r0 + m; ++r)
      for (int c = c0; c < c0 + n; ++c)
        out.push_back(values[size_t(r) * kCols + size_t(c)]);
    return out;
  }
  std::vector<char> packed(const std::vector<const moe::TensorInfo *> &parts,
                           const moe::Encoding *e, std::vector<float> &scales,
                           int64_t panelCols = 0) {
    const std::string path = (dir / "w.bin").string();
    moe::WeightPacker p(path, 0);
    moe::WeightPacker::Packed placed =
        e ? p.appendEncoded(parts, *e, scales) : p.append(parts, panelCols);
    p.finish();
    std::vector<char> all(fs::file_size(path));
    std::ifstream(path, std::ios::binary).read(all.data(), std::streamsize(all.size()));
    std::vector<char> bytes(all.begin() + long(placed.offset),
                            all.begin() + long(placed.offset + placed.size));
    static_assert(moe::rt::kWeightChecksum == moe::plan::WeightChecksum::XXH3_64);
    EXPECT_EQ(placed.checksum, XXH3_64bits(bytes.data(), bytes.size()));
    return bytes;
  }

  /// Rows of `cols` elements of `size` bytes, 8 at a time: each group's
  /// first elements, then its second elements, and so on.
  static std::vector<char> interleaved(const std::vector<char> &rows, size_t cols, size_t size) {
    const size_t rowBytes = cols * size, count = rows.size() / rowBytes;
    std::vector<char> out;
    for (size_t panel = 0; panel < count / 8; ++panel)
      for (size_t c = 0; c < cols; ++c)
        for (size_t r = 0; r < 8; ++r) {
          const char *element = rows.data() + (panel * 8 + r) * rowBytes + c * size;
          out.insert(out.end(), element, element + size);
        }
    return out;
  }
  static std::vector<char> bytesOf(const std::vector<float> &v) {
    const char *p = reinterpret_cast<const char *>(v.data());
    return {p, p + v.size() * 4};
  }

  static constexpr int kRows = 3000, kCols = 1500; // 18 MB: more than one buffer
  fs::path dir;
  std::vector<float> values;
};

TEST_F(WeightPackerSlice, ColumnsAsStoredAreTheNaiveCopy) {
  for (auto [r0, m, c0, n] : {std::array{0, kRows, 700, 800}, std::array{5, 7, 0, 3},
                              std::array{1, 2, 0, kCols}}) {
    moe::TensorInfo t = view(r0, m, c0, n);
    std::vector<float> scales;
    std::vector<char> got = packed({&t}, nullptr, scales);
    std::vector<float> want = naive(r0, m, c0, n);
    ASSERT_EQ(got.size(), want.size() * 4);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size())) << r0 << " " << c0;
  }
}

TEST_F(WeightPackerSlice, ColumnsEncodedAreTheNaiveCopyEncoded) {
  // Two sliced parts concatenated (a gate and an up slice), as bf16.
  moe::TensorInfo a = view(10, 4, 100, 6), b = view(20, 4, 100, 6);
  moe::Encoding e;
  e.dtype = moe::plan::DType::BF16;
  e.cols = 6;
  std::vector<float> scales;
  std::vector<char> got = packed({&a, &b}, &e, scales);
  std::vector<float> rows = naive(10, 4, 100, 6), more = naive(20, 4, 100, 6);
  rows.insert(rows.end(), more.begin(), more.end());
  std::vector<char> want;
  moe::encodeRows(e, rows.data(), 8, want, scales);
  EXPECT_EQ(got, want);
}

TEST_F(WeightPackerSlice, PanelsAsStoredAreTheNaiveInterleave) {
  // Whole rows (a 16 MB read piece ends 4 rows into a panel), columns of
  // every row, and one panel.
  for (auto [r0, m, c0, n] : {std::array{0, kRows, 0, kCols}, std::array{0, kRows, 700, 800},
                              std::array{16, 8, 5, 3}}) {
    moe::TensorInfo t = view(r0, m, c0, n);
    std::vector<float> scales;
    std::vector<char> got = packed({&t}, nullptr, scales, n);
    std::vector<char> want = interleaved(bytesOf(naive(r0, m, c0, n)), size_t(n), 4);
    ASSERT_EQ(got.size(), size_t(m) * size_t(n) * 4);
    EXPECT_TRUE(got == want) << r0 << " " << c0;
  }
}

TEST_F(WeightPackerSlice, PanelsSpanParts) {
  // Two sliced parts of 4 rows (rank 1's gate and up rows of a fused
  // gate_up): one panel, as stored and encoded as bf16.
  moe::TensorInfo a = view(10, 4, 100, 6), b = view(20, 4, 100, 6);
  std::vector<float> rows = naive(10, 4, 100, 6), more = naive(20, 4, 100, 6);
  rows.insert(rows.end(), more.begin(), more.end());
  std::vector<float> scales;
  EXPECT_TRUE(packed({&a, &b}, nullptr, scales, 6) == interleaved(bytesOf(rows), 6, 4));
  moe::Encoding e;
  e.dtype = moe::plan::DType::BF16;
  e.cols = 6;
  e.panels = true;
  std::vector<char> encoded;
  moe::encodeRows(e, rows.data(), 8, encoded, scales);
  EXPECT_TRUE(packed({&a, &b}, &e, scales) == interleaved(encoded, 6, 2));
}

TEST_F(WeightPackerSlice, PanelsRefuseAPartialPanel) {
  moe::TensorInfo t = view(0, 12, 0, 6);
  std::vector<float> scales;
  try {
    packed({&t}, nullptr, scales, 6);
    FAIL() << "12 rows packed into panels of 8";
  } catch (const moe::InputError &e) {
    EXPECT_NE(std::string(e.what()).find("ends 4 rows into a panel"), std::string::npos)
        << e.what();
  }
  moe::Encoding e;
  e.dtype = moe::plan::DType::I8;
  e.cols = 6;
  e.group = 6;
  e.panels = true;
  EXPECT_THROW(packed({&t}, &e, scales), moe::InputError);
}

/// A layer of kOut x kIn in groups of kGroup, written as GPTQ or AWQ packs
/// it from random q and zero points in 0..15 and random fp16 scale bits:
/// GPTQ qweight [in / 8, out] (8 inputs a word, in order), AWQ qweight [in,
/// out / 8] (8 outputs a word in the order 0, 2, 4, 6, 1, 3, 5, 7); qzeros
/// [groups, out / 8] packed as the qweight of AWQ is, or in order for GPTQ,
/// whose v1 stores zero - 1; scales [groups, out].
struct Int4Case {
  const char *name;
  moe::Int4Format format;
};

constexpr int kGroup = 16;

class PackedInt4View : public WeightPackerSlice, public ::testing::WithParamInterface<Int4Case> {
protected:
  static constexpr int kOut = 40, kIn = 64, kGroups = kIn / kGroup;
  void SetUp() override {
    WeightPackerSlice::SetUp();
    const moe::Int4Format &f = GetParam().format;
    const bool awq = f.packing == moe::Int4Format::Packing::Awq;
    uint32_t state = 12345;
    auto next = [&] { return state = state * 1664525u + 1013904223u; };
    q.resize(kOut * kIn);
    for (int &v : q)
      v = int(next() >> 28);
    for (int i = 0; i < kGroups * kOut; ++i) {
      scaleBits.push_back(uint16_t(0x3000 + (next() >> 22))); // normal fp16 values
      zeros.push_back(f.symmetric ? 8 : int(next() >> 28));
    }
    static constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    auto pack8 = [&](auto value) { // eight values a word: value(t) for nibble t
      uint32_t w = 0;
      for (int t = 0; t < 8; ++t)
        w |= uint32_t(value(t) & 15) << (4 * t);
      return w;
    };
    std::vector<uint32_t> words, zeroWords;
    if (awq)
      for (int i = 0; i < kIn; ++i)
        for (int k = 0; k < kOut / 8; ++k)
          words.push_back(pack8([&](int t) { return q[size_t((8 * k + kAwqOrder[t]) * kIn + i)]; }));
    else
      for (int j = 0; j < kIn / 8; ++j)
        for (int o = 0; o < kOut; ++o)
          words.push_back(pack8([&](int t) { return q[size_t(o * kIn + 8 * j + t)]; }));
    for (int g = 0; g < kGroups; ++g)
      for (int k = 0; k < kOut / 8; ++k)
        zeroWords.push_back(pack8([&](int t) {
          const int z = zeros[size_t(g * kOut + 8 * k + (awq ? kAwqOrder[t] : t))];
          return f.zeroMinusOne ? z - 1 : z;
        }));
    if (f.zeroMinusOne) // a zero of 0 is stored as 15 and read back as 16
      for (int &z : zeros)
        z = z == 0 ? 16 : z;
    const std::string file = (dir / "packed.bin").string();
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char *>(words.data()), std::streamsize(words.size() * 4));
    out.write(reinterpret_cast<const char *>(scaleBits.data()), std::streamsize(scaleBits.size() * 2));
    out.write(reinterpret_cast<const char *>(zeroWords.data()), std::streamsize(zeroWords.size() * 4));
    auto p = std::make_shared<moe::PackedInt4>();
    p->layer = "layer";
    p->format = f;
    const uint64_t qBytes = words.size() * 4, sBytes = scaleBits.size() * 2;
    p->qweight = {file, "I32", awq ? std::vector<int64_t>{kIn, kOut / 8}
                                   : std::vector<int64_t>{kIn / 8, kOut}, 0, qBytes};
    p->scales = {file, "F16", {kGroups, kOut}, qBytes, sBytes};
    p->qzeros = {file, "I32", {kGroups, kOut / 8}, qBytes + sBytes, zeroWords.size() * 4};
    p->rows = kOut;
    p->cols = kIn;
    p->group = kGroup;
    whole.file = file;
    whole.dtype = moe::kPackedInt4;
    whole.shape = {kOut, kIn};
    whole.size = kOut * kIn / (p->int8() ? 1 : 2);
    whole.packed = p;
  }
  /// Rows [r0, r0 + nr) and columns [c0, c0 + nc): int4 nibbles q - 8 or
  /// int8 q - z, and the scales of each row's groups.
  std::vector<char> naive(int r0, int nr, int c0, int nc, std::vector<float> &scales) const {
    const bool int8 = !GetParam().format.symmetric;
    std::vector<char> out(size_t(nr * nc / (int8 ? 1 : 2)));
    for (int r = 0; r < nr; ++r)
      for (int c = 0; c < nc; ++c) {
        const int o = r0 + r, i = c0 + c;
        const int v = q[size_t(o * kIn + i)] - zeros[size_t(i / kGroup * kOut + o)];
        const size_t at = size_t(r * nc + c);
        if (int8)
          out[at] = char(int8_t(v));
        else
          out[at / 2] = char(uint8_t(out[at / 2]) | uint8_t((v & 15) << (at % 2 ? 4 : 0)));
      }
    for (int r = 0; r < nr; ++r)
      for (int g = c0 / kGroup; g < (c0 + nc) / kGroup; ++g)
        scales.push_back(moe::cpu::f16ToF32(scaleBits[size_t(g * kOut + r0 + r)]));
    return out;
  }
  std::vector<char> read(const moe::TensorInfo &view, std::vector<float> &scales) {
    const std::string path = (dir / "w.bin").string();
    moe::WeightPacker p(path, 0);
    moe::WeightPacker::Packed placed = p.appendPackedInt4({&view, &view}, scales);
    p.finish();
    std::vector<char> all(fs::file_size(path));
    std::ifstream(path, std::ios::binary).read(all.data(), std::streamsize(all.size()));
    return {all.begin() + long(placed.offset), all.begin() + long(placed.offset + placed.size)};
  }
  std::vector<int> q, zeros;
  std::vector<uint16_t> scaleBits;
  moe::TensorInfo whole;
};

TEST_P(PackedInt4View, WholeAndSlicedAreTheNaivePacking) {
  for (auto [r0, nr, c0, nc] : {std::array{0, kOut, 0, kIn}, std::array{8, 24, 16, 32},
                                std::array{3, 17, 48, 16}, std::array{0, kOut, 32, 32}}) {
    moe::TensorInfo view =
        nr == kOut && nc == kIn ? whole : moe::slicePackedInt4(whole, r0, nr, c0, nc);
    std::vector<float> want, got;
    std::vector<char> once = naive(r0, nr, c0, nc, want);
    std::vector<char> twice = once; // the test packs the view twice, as two parts
    twice.insert(twice.end(), once.begin(), once.end());
    want.insert(want.end(), want.begin(), want.end());
    EXPECT_EQ(read(view, got), twice) << r0 << " " << nr << " " << c0 << " " << nc;
    EXPECT_EQ(got, want);
  }
}

TEST_P(PackedInt4View, ASliceThatCutsAGroupIsRefused) {
  for (auto [c0, nc] : {std::array{8, 16}, std::array{0, 24}})
    try {
      moe::slicePackedInt4(whole, 0, kOut, c0, nc);
      FAIL() << "columns " << c0 << " + " << nc << " cut a group of " << kGroup;
    } catch (const moe::InputError &e) {
      EXPECT_NE(std::string(e.what()).find("quantized layer 'layer': columns"), std::string::npos)
          << e.what();
    }
}

using Packing = moe::Int4Format::Packing;
INSTANTIATE_TEST_SUITE_P(
    Formats, PackedInt4View,
    ::testing::Values(Int4Case{"GptqSymmetricV1", {Packing::Gptq, kGroup, true, true}},
                      Int4Case{"GptqZerosV1", {Packing::Gptq, kGroup, true, false}},
                      Int4Case{"GptqZerosV2", {Packing::Gptq, kGroup, false, false}},
                      Int4Case{"Awq", {Packing::Awq, kGroup, false, false}}),
    [](const ::testing::TestParamInfo<Int4Case> &info) { return info.param.name; });

} // namespace
