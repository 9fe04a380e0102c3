// The packer reads a tensor-parallel slice (some columns of each row, a
// strided view of a checkpoint tensor) as the naive copy of those columns,
// both as stored and encoded, in pieces smaller and larger than its buffer.
#include "compiler/target/WeightPacker.h"

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

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
                           const moe::Encoding *e, std::vector<float> &scales) {
    const std::string path = (dir / "w.bin").string();
    moe::WeightPacker p(path, 0);
    moe::WeightPacker::Packed placed = e ? p.appendEncoded(parts, *e, scales) : p.append(parts);
    p.finish();
    std::vector<char> all(fs::file_size(path));
    std::ifstream(path, std::ios::binary).read(all.data(), std::streamsize(all.size()));
    return {all.begin() + long(placed.offset), all.begin() + long(placed.offset + placed.size)};
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

} // namespace
