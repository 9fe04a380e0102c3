// The plan loader's semantic checks, on small plans built here with the
// FlatBuffers builder (one defect each), and a session run on a valid one.
#include "moe/runtime/Checksum.h"
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/PlanFormat.h"
#include "moe/runtime/Session.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace fs = std::filesystem;
namespace fb = moe::plan;
using namespace moe::rt;

namespace {

/// An embedding-only plan: tokens -> rows of a 4 x 2 table. Each test
/// changes one field to make it invalid.
struct Spec {
  std::vector<int64_t> tableShape = {4, 4};
  fb::DType tableType = fb::DType::F32;
  uint64_t tableOffset = 0;
  uint64_t tableSize = 64;
  uint64_t arenaBytes = 32;
  uint64_t outOffset = 0;
  int32_t maxTokens = 2;
  fb::OpCode op = fb::OpCode::Embedding;
  std::vector<uint32_t> ins = {0, 2}, outs = {3};
  std::vector<uint32_t> planOutputs = {3};
  std::string weightFile = "weights-0.bin";
  int64_t outCols = 4;
  bool attentionParams = false;
  // A quantized table: `group` > 0 adds tensor 4, f32 scales of `scalesShape`
  // read from the start of the weight file.
  int32_t group = 0, rowGroup = 1;
  uint32_t scales = 4;
  std::vector<int64_t> scalesShape = {4, 1};
};

const float kTable[16] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33};

class PlanLoaderTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moe-plan-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::ofstream(dir_ / "weights-0.bin", std::ios::binary)
        .write(reinterpret_cast<const char *>(kTable), sizeof kTable);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const Spec &s) {
    flatbuffers::FlatBufferBuilder b;
    b.ForceDefaults(true);
    std::vector<int64_t> tokenShape = {-1}, outShape = {-1, s.outCols};
    std::vector<flatbuffers::Offset<fb::Tensor>> tensors = {
        fb::CreateTensorDirect(b, "tokens", fb::DType::I32, &tokenShape, fb::Storage::Input),
        fb::CreateTensorDirect(b, "positions", fb::DType::I32, &tokenShape,
                               fb::Storage::Input),
        fb::CreateTensorDirect(b, "table", s.tableType, &s.tableShape, fb::Storage::Weight, 0,
                               s.tableOffset, s.tableSize, checksum64(kTable, 64), s.scales,
                               s.group, s.rowGroup),
        fb::CreateTensorDirect(b, "out", fb::DType::F32, &outShape, fb::Storage::Arena, 0,
                               s.outOffset, uint64_t(s.maxTokens * s.outCols) * 4)};
    if (s.group) {
      uint64_t bytes = 4;
      for (int64_t d : s.scalesShape)
        bytes *= uint64_t(d);
      tensors.push_back(fb::CreateTensorDirect(b, "scales", fb::DType::F32, &s.scalesShape,
                                               fb::Storage::Weight, 0, 0, bytes));
    }
    flatbuffers::Offset<void> params;
    fb::OpParams type = fb::OpParams::NONE;
    if (s.attentionParams) {
      std::vector<float> freq = {1.0f};
      auto rope = fb::CreateRopeDirect(b, &freq);
      params = fb::CreateAttentionParams(b, 0, 1, 1, 2, 1.0f, rope).Union();
      type = fb::OpParams::AttentionParams;
    }
    std::vector<flatbuffers::Offset<fb::Instruction>> insts = {
        fb::CreateInstructionDirect(b, s.op, &s.ins, &s.outs, type, params)};
    std::vector<flatbuffers::Offset<fb::Program>> programs = {
        fb::CreateProgramDirect(b, 0, &insts)};
    std::vector<flatbuffers::Offset<fb::WeightFile>> files = {
        fb::CreateWeightFileDirect(b, s.weightFile.c_str(), sizeof kTable)};
    std::vector<flatbuffers::Offset<fb::KvLayer>> layers;
    std::vector<uint32_t> inputs = {0, 1};
    auto config = fb::CreateModelConfigDirect(b, "mixtral", 4, 4, 1, 1, 1, 8);
    auto kv = fb::CreateKvCacheSpecDirect(b, fb::DType::F32, 8, &layers);
    auto plan = fb::CreatePlanDirect(b, kFormatMajor, kFormatMinor, config, &tensors, &files,
                                     &programs, &inputs, &s.planOutputs, s.maxTokens,
                                     s.arenaBytes, 64, kv);
    fb::FinishPlanBuffer(b, plan);
    std::ofstream out(dir_ / kPlanFileName, std::ios::binary);
    out.write(reinterpret_cast<const char *>(b.GetBufferPointer()), b.GetSize());
    uint64_t sum = checksum64(b.GetBufferPointer(), b.GetSize());
    out.write(kPlanTrailerTag, sizeof kPlanTrailerTag);
    out.write(reinterpret_cast<const char *>(&sum), 8); // little-endian host
  }

  /// The load error of `s`, "" when it loads.
  std::string error(const Spec &s) {
    write(s);
    auto loaded = LoadedPlan::open(dir_.string());
    return loaded ? "" : loaded.status().message();
  }

  fs::path dir_;
};

#define EXPECT_ERROR(spec, text)                                                      \
  do {                                                                                \
    std::string e = error(spec);                                                      \
    EXPECT_NE(e.find(text), std::string::npos) << "got: " << e;                       \
  } while (0)

TEST_F(PlanLoaderTest, ValidPlanRuns) {
  write(Spec());
  auto loaded = LoadedPlan::open(dir_.string(), {true});
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto device = createCpuDevice();
  auto session = Session::create(**loaded, *device);
  ASSERT_TRUE(session) << session.status().message();
  int32_t tokens[3] = {3, 1, 0}, positions[3] = {0, 1, 2};
  float out[8];
  ASSERT_TRUE((*session)->forward(tokens, positions, 2, out));
  EXPECT_EQ(std::vector<float>(out, out + 8),
            (std::vector<float>{30, 31, 32, 33, 10, 11, 12, 13}));
  tokens[0] = 4;
  Status bad = (*session)->forward(tokens, positions, 2, out);
  EXPECT_EQ(bad.message(), "token id 4 out of vocabulary [0, 4)");
  bad = (*session)->forward(tokens, positions, 3, out);
  EXPECT_EQ(bad.message(), "batch of 3 tokens; the plan takes 1 to 2 (its --max-batch-tokens)");
  tokens[0] = 0;
  positions[1] = 8;
  bad = (*session)->forward(tokens, positions, 2, out);
  EXPECT_EQ(bad.message(), "position 8 out of the context [0, 8)");
}

/// The table as I8 with a scale per row: kTable's first 16 bytes are the
/// integers, its first 4 floats (0, 1, 2, 3) the scales.
Spec int8Table() {
  Spec s;
  s.tableType = fb::DType::I8;
  s.tableSize = 16;
  s.group = 4;
  return s;
}

TEST_F(PlanLoaderTest, QuantizedTableRuns) {
  write(int8Table());
  auto loaded = LoadedPlan::open(dir_.string());
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto device = createCpuDevice();
  auto session = Session::create(**loaded, *device);
  ASSERT_TRUE(session) << session.status().message();
  int32_t tokens[2] = {3, 1}, positions[2] = {0, 1};
  float out[8];
  ASSERT_TRUE((*session)->forward(tokens, positions, 2, out));
  const auto *q = reinterpret_cast<const int8_t *>(kTable);
  for (int t = 0; t < 2; ++t)
    for (int c = 0; c < 4; ++c)
      EXPECT_EQ(out[t * 4 + c], float(q[tokens[t] * 4 + c]) * kTable[tokens[t]]);
}

TEST_F(PlanLoaderTest, RejectsQuantizedWeightWithoutItsScales) {
  Spec s = int8Table();
  s.scales = 7;
  EXPECT_ERROR(s, "tensor 2 ('table') names scales tensor 7, but the plan has 5");
  s = int8Table();
  s.scalesShape = {2, 1};
  EXPECT_ERROR(s, "tensor 2 ('table') needs F32 weight scales [4, 1]; tensor 4 is not that");
  s = int8Table();
  s.group = 5;
  EXPECT_ERROR(s, "tensor 2 ('table') has quantization group 5; it must be in [1, 4]");
  s = int8Table();
  s.tableType = fb::DType::I4;
  s.tableShape = {4, 3};
  s.tableSize = 6;
  s.group = 2;
  s.scalesShape = {4, 2};
  EXPECT_ERROR(s, "tensor 2 ('table') is I4 with an odd row length or group");
  s = Spec();
  s.group = 4;
  EXPECT_ERROR(s, "tensor 2 ('table') has a quantization group but is not an I8, I4 or F8E4M3 "
                  "weight");
  s = int8Table();
  s.rowGroup = 2;
  EXPECT_ERROR(s, "tensor 2 ('table') has row group 2; it must be 1 (I8, I4) or in [1, 4] "
                  "(F8E4M3)");
}

TEST_F(PlanLoaderTest, RejectsTensorIndexOutOfRange) {
  Spec s;
  s.ins = {0, 9};
  EXPECT_ERROR(s, "instruction 0 (embedding) reads tensor 9, but the plan has 4");
}

TEST_F(PlanLoaderTest, RejectsWeightPastItsFile) {
  Spec s;
  s.tableShape = {8, 4};
  s.tableSize = 128;
  EXPECT_ERROR(s, "tensor 2 ('table') ends at byte 128, past its weight file (64 bytes)");
}

TEST_F(PlanLoaderTest, RejectsUnalignedWeight) {
  Spec s;
  s.tableOffset = 4;
  EXPECT_ERROR(s, "tensor 2 ('table') offset 4 is not 64-byte aligned");
}

TEST_F(PlanLoaderTest, RejectsSizeThatDisagreesWithShape) {
  Spec s;
  s.tableSize = 16;
  EXPECT_ERROR(s, "tensor 2 ('table') has size 16 but its shape and dtype need 64");
}

TEST_F(PlanLoaderTest, RejectsArenaOverflow) {
  Spec s;
  s.outOffset = 64;
  EXPECT_ERROR(s, "tensor 3 ('out') ends at arena byte 96, past the arena (32 bytes)");
}

TEST_F(PlanLoaderTest, RejectsArenaOffsetThatWrapsAround) {
  Spec s;
  s.maxTokens = 6;             // out: 6 x 4 floats = 96 bytes
  s.outOffset = ~uint64_t(63); // 2^64 - 64: offset + size wraps around to 32
  EXPECT_ERROR(s, "tensor 3 ('out') ends at arena byte 2^64 or more, past the arena (32 bytes)");
}

// Found by fuzz-plan: a misaligned arena buffer made the kernels store
// floats at odd addresses.
TEST_F(PlanLoaderTest, RejectsMisalignedArenaBuffer) {
  Spec s;
  s.outOffset = 7;
  EXPECT_ERROR(s, "tensor 3 ('out') arena offset 7 is not 64-byte aligned");
}

TEST_F(PlanLoaderTest, RejectsUnknownDtype) {
  Spec s;
  s.tableType = static_cast<fb::DType>(9);
  EXPECT_ERROR(s, "tensor 2 ('table') has unknown dtype 9");
}

TEST_F(PlanLoaderTest, RejectsUnknownOpCode) {
  Spec s;
  s.op = static_cast<fb::OpCode>(42);
  EXPECT_ERROR(s, "instruction 0 has unknown op code 42");
}

TEST_F(PlanLoaderTest, RejectsWrongArity) {
  Spec s;
  s.ins = {0};
  EXPECT_ERROR(s, "instruction 0 (embedding) has 1 inputs and 1 outputs; expected 2-2 and 1");
}

TEST_F(PlanLoaderTest, RejectsMissingParameters) {
  Spec s;
  s.op = fb::OpCode::RmsNorm;
  EXPECT_ERROR(s, "instruction 0 (rms_norm) lacks its RmsNormParams");
}

TEST_F(PlanLoaderTest, RejectsKvLayerOutOfRange) {
  Spec s;
  s.op = fb::OpCode::Attention;
  s.ins = {3, 3, 3, 1};
  s.attentionParams = true;
  EXPECT_ERROR(s, "instruction 0 (attention) uses KV-cache layer 0, but the cache has 0");
}

TEST_F(PlanLoaderTest, RejectsWritingAWeight) {
  Spec s;
  s.outs = {2};
  EXPECT_ERROR(s, "instruction 0 (embedding) writes tensor 2, which is not an arena tensor");
}

TEST_F(PlanLoaderTest, RejectsOutputThatIsAnInput) {
  Spec s;
  s.planOutputs = {0};
  EXPECT_ERROR(s, "output tensor 0 ('tokens') has the wrong storage");
}

TEST_F(PlanLoaderTest, RejectsWeightFileOutsideThePlanDirectory) {
  Spec s;
  s.weightFile = "../weights-0.bin";
  EXPECT_ERROR(s, "weight file names must be plain file names in the plan directory");
}

// Shape agreement: what each kernel will read and write must fit.
TEST_F(PlanLoaderTest, RejectsLogitsNarrowerThanTheVocabulary) {
  Spec s;
  s.outCols = 2;
  EXPECT_ERROR(s, "the plan's inputs and output: its logits 'out' is F32 [T, 2] in Arena; "
                  "expected F32 [T, 4] in Arena");
}

TEST_F(PlanLoaderTest, RejectsEmbeddingOfPositions) {
  Spec s;
  s.ins = {1, 2};
  EXPECT_ERROR(s, "instruction 0 (embedding): its ids must be the plan's tokens input");
}

TEST_F(PlanLoaderTest, RejectsOpOnTheWrongShapes) {
  Spec s;
  s.op = fb::OpCode::Add;
  s.ins = {3, 2};
  EXPECT_ERROR(s, "instruction 0 (add): its second input 'table' is F32 [4, 4] in Weight; "
                  "expected F32 [T, 4] in Arena");
}

TEST_F(PlanLoaderTest, RejectsZeroBatch) {
  Spec s;
  s.maxTokens = 0;
  EXPECT_ERROR(s, "max_batch_tokens 0 out of range [1, 16777216]");
}

} // namespace
