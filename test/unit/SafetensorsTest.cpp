// Safetensors header parsing: valid files, sharded index, and every rejection.
#include "compiler/import/Safetensors.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace {

class SafetensorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moe-st-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Writes header + `dataBytes` zero bytes; returns the path.
  std::string write(const std::string &name, const std::string &header,
                    size_t dataBytes, int64_t lengthField = -1) {
    std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    uint64_t len = lengthField < 0 ? header.size() : uint64_t(lengthField);
    for (int i = 0; i < 8; ++i)
      out.put(static_cast<char>((len >> (8 * i)) & 0xff));
    out << header << std::string(dataBytes, '\0');
    return path;
  }

  std::string error(const std::string &path) {
    try {
      moe::TensorCatalog catalog;
      catalog.addFile(path);
    } catch (const moe::InputError &e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(SafetensorsTest, ReadsTensorsWithAbsoluteOffsets) {
  std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})";
  std::string path = write("model.safetensors", header, 32);
  moe::TensorCatalog catalog = moe::TensorCatalog::open(dir_.string());
  ASSERT_EQ(catalog.tensors().size(), 2u);
  const moe::TensorInfo *b = catalog.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, "BF16");
  EXPECT_EQ(b->shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(b->offset, 8 + header.size() + 24);
  EXPECT_EQ(b->size, 8u);
  EXPECT_EQ(b->file, path);
}

TEST_F(SafetensorsTest, RejectsShortFile) {
  std::string path = (dir_ / "x.safetensors").string();
  std::ofstream(path) << "abc";
  EXPECT_NE(error(path).find("truncated: 3 bytes"), std::string::npos);
}

TEST_F(SafetensorsTest, RejectsHeaderPastEnd) {
  std::string path = write("x.safetensors", "{}", 0, 1000);
  EXPECT_NE(error(path).find("header of 1000 bytes runs past the end"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsNonJson) {
  EXPECT_NE(error(write("x.safetensors", "{nope", 0)).find("not valid JSON"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  auto path = write("x.safetensors",
                    R"({"a":{"dtype":"F13","shape":[1],"data_offsets":[0,4]}})",
                    4);
  EXPECT_NE(error(path).find("tensor 'a' has unknown dtype 'F13'"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsOutOfFileOffsets) {
  auto path = write("x.safetensors",
                    R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                    8);
  EXPECT_NE(error(path).find("ends at byte 16, past the end of the data (8"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsSizeThatDisagreesWithShape) {
  auto path = write("x.safetensors",
                    R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                    8);
  EXPECT_NE(error(path).find("spans 8 bytes but shape [3] of F32 needs 12"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsOverlap) {
  auto path = write(
      "x.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12);
  EXPECT_NE(error(path).find("tensors 'a' and 'b' overlap at data bytes [4, 8)"),
            std::string::npos);
}

TEST_F(SafetensorsTest, RejectsNegativeShape) {
  auto path = write("x.safetensors",
                    R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})",
                    0);
  EXPECT_NE(error(path).find("not a non-negative integer"), std::string::npos);
}

TEST_F(SafetensorsTest, ShardedIndexNamesMissingShard) {
  write("model-1.safetensors",
        R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  std::ofstream(dir_ / "model.safetensors.index.json")
      << R"({"weight_map":{"a":"model-1.safetensors","b":"model-2.safetensors"}})";
  try {
    moe::TensorCatalog::open(dir_.string());
    FAIL() << "expected an error";
  } catch (const moe::InputError &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("model-2.safetensors: missing (listed in"),
              std::string::npos)
        << msg;
  }
}

TEST_F(SafetensorsTest, ShardedIndexReadsEveryShard) {
  write("model-1.safetensors",
        R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  write("model-2.safetensors",
        R"({"b":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4);
  std::ofstream(dir_ / "model.safetensors.index.json")
      << R"({"weight_map":{"a":"model-1.safetensors","b":"model-2.safetensors"}})";
  moe::TensorCatalog catalog = moe::TensorCatalog::open(dir_.string());
  ASSERT_NE(catalog.find("b"), nullptr);
  EXPECT_EQ(catalog.find("b")->file, (dir_ / "model-2.safetensors").string());
}

TEST_F(SafetensorsTest, DirectoryWithoutWeightsSaysWhatToDo) {
  try {
    moe::TensorCatalog::open(dir_.string());
    FAIL() << "expected an error";
  } catch (const moe::InputError &e) {
    EXPECT_NE(std::string(e.what()).find("use --shape-only"), std::string::npos);
  }
}

} // namespace
