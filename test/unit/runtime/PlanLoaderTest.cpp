// The plan loader's semantic checks, on small plans built here with the
// FlatBuffers builder (one defect each), and a session run on a valid one.
#include "moe/abi/Checksum.h"
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "moe/abi/PlanFormat.h"
#include "moe/runtime/Session.h"
#include "moe/abi/WeightChecksum.h"

#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <optional>
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
  int32_t vocab = 4; // the logits' width
  bool attentionParams = false;
  bool dispatchParams = false; // of 4 routed experts
  // A quantized table: `group` > 0 adds tensor 4, f32 scales of `scalesShape`
  // read from the start of the weight file.
  int32_t group = 0, rowGroup = 1;
  uint32_t scales = 4;
  bool int8Activations = false; // the table is W8A8 (format 2.7)
  fb::Layout layout = fb::Layout::Rows; // the table's (format 2.8)
  std::vector<int64_t> scalesShape = {4, 1};
  // Events of the first instruction; `second` adds another embedding into
  // a tensor "out2" at `offset` of the arena, on `stream`.
  std::vector<uint32_t> waits, records;
  struct {
    bool on = false;
    uint8_t stream = 1;
    uint64_t offset = 0;
    std::vector<uint32_t> waits, records;
    bool allReduce = false; // then an all_reduce of out2 in place, on its stream
  } second;
  // Format 2.0: ranks 1.. run the same embedding from a table of their own
  // file (weights-<r>.bin); `collective` (on `collectiveStream`) follows it
  // in place on every rank but `skipCollectiveOn`.
  int ranks = 1;
  std::vector<int> programRanks;          // as stored; default 0, 1, ...
  uint32_t tableFile = 0;                 // rank 0's table's file
  std::optional<uint64_t> weightBytes;    // rank 0's stated; default its tables
  int fileRank1 = 1;                      // the rank weights-1.bin says it belongs to
  fb::CollectiveOp collective = fb::CollectiveOp::None;
  std::vector<uint8_t> collectiveStreams; // per rank; default 0
  int skipCollectiveOn = -1;
  int placementLayers = 0;                // placement entries of one expert
  uint64_t weightFileBytes = 64;          // weights-0.bin as the plan states it (and as made)
  // Format 2.10: the algorithm the plan names for its weights' checksums
  // (nullopt: the field left out and format 2.9, as plans before 2.10), and
  // the one they are computed with (nullopt: the same).
  std::optional<fb::WeightChecksum> weightChecksum = fb::WeightChecksum::Checksum64;
  std::optional<fb::WeightChecksum> checksumsBy;
  // Weights that no instruction reads, after the table in weights-0.bin,
  // which they then end: F32 vectors "extra0", "extra1", ... of these many
  // elements, each 64-byte aligned, of extraWeight's values (`extraHoles`:
  // zeros, holes of a sparse file).
  std::vector<int64_t> extraWeights;
  bool extraHoles = false;
};

const float kTable[16] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23, 30, 31, 32, 33};

/// A weight's checksum by `algorithm`, in one call (the loader streams it
/// chunk by chunk): checksum64, or libxxhash's own XXH3-64.
uint64_t referenceChecksum(fb::WeightChecksum algorithm, const void *data, size_t bytes) {
  return algorithm == fb::WeightChecksum::XXH3_64 ? XXH3_64bits(data, bytes)
                                                  : checksum64(data, bytes);
}

/// The checksum algorithm `s`'s weights are computed with.
fb::WeightChecksum checksumsBy(const Spec &s) {
  return s.checksumsBy.value_or(s.weightChecksum.value_or(fb::WeightChecksum::Checksum64));
}

/// Extra weight i's values: they differ from weight to weight and along
/// each (or zeros, for holes).
std::vector<float> extraWeight(const Spec &s, size_t i) {
  std::vector<float> v(size_t(s.extraWeights[i]));
  if (!s.extraHoles)
    for (size_t k = 0; k < v.size(); ++k)
      v[k] = float(i * 7919 + k % 104729);
  return v;
}

/// Where extra weight i starts in weights-0.bin: after the table and the
/// extra weights before it, 64-byte aligned; the last entry is the file's end.
std::vector<uint64_t> extraOffsets(const Spec &s) {
  std::vector<uint64_t> at = {sizeof kTable};
  for (int64_t n : s.extraWeights) {
    at.back() = (at.back() + 63) / 64 * 64;
    at.push_back(at.back() + uint64_t(n) * 4);
  }
  return at;
}

/// Tokens 3 and 1 at positions 0 and 1 through a CPU session of `plan`:
/// its [2, 4] output into out.
void runTokensThreeAndOne(const LoadedPlan &plan, float *out) {
  auto device = createCpuDevice();
  auto session = Session::create(plan, *device);
  ASSERT_TRUE(session) << session.status().message();
  int32_t tokens[2] = {3, 1}, positions[2] = {0, 1};
  ASSERT_TRUE((*session)->forward(tokens, positions, 2, out));
}

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
        fb::CreateTensorDirect(b, "table", s.tableType, &s.tableShape, fb::Storage::Weight,
                               s.tableFile, s.tableOffset, s.tableSize,
                               referenceChecksum(checksumsBy(s), kTable, 64), s.scales,
                               s.group, s.rowGroup, 0, 0, 1, s.int8Activations, s.layout),
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
    if (s.dispatchParams) {
      params = fb::CreateDispatchParams(b, 4, 0).Union();
      type = fb::OpParams::DispatchParams;
    }
    auto list = [](const std::vector<uint32_t> &v) { return v.empty() ? nullptr : &v; };
    std::vector<std::vector<flatbuffers::Offset<fb::Instruction>>> insts(size_t(s.ranks));
    insts[0].push_back(fb::CreateInstructionDirect(b, s.op, &s.ins, &s.outs, type, params, 0,
                                                   nullptr, list(s.waits), list(s.records)));
    if (s.second.on) {
      std::vector<uint32_t> outs = {uint32_t(tensors.size())};
      tensors.push_back(fb::CreateTensorDirect(b, "out2", fb::DType::F32, &outShape,
                                               fb::Storage::Arena, 0, s.second.offset,
                                               uint64_t(s.maxTokens * s.outCols) * 4));
      insts[0].push_back(fb::CreateInstructionDirect(
          b, fb::OpCode::Embedding, &s.ins, &outs, fb::OpParams::NONE, 0, s.second.stream,
          nullptr, list(s.second.waits), list(s.second.records)));
      if (s.second.allReduce)
        insts[0].push_back(fb::CreateInstructionDirect(b, fb::OpCode(0), &outs, &outs,
                                                       fb::OpParams::NONE, 0, s.second.stream,
                                                       nullptr, nullptr, nullptr,
                                                       fb::CollectiveOp::AllReduce));
    }
    uint64_t fileBytes = s.weightFileBytes;
    if (!s.extraWeights.empty()) {
      const std::vector<uint64_t> at = extraOffsets(s);
      std::ofstream file(dir_ / "weights-0.bin", std::ios::binary | std::ios::trunc);
      file.write(reinterpret_cast<const char *>(kTable), sizeof kTable);
      for (size_t i = 0; i < s.extraWeights.size(); ++i) {
        const std::vector<float> v = extraWeight(s, i);
        const std::string name = "extra" + std::to_string(i);
        std::vector<int64_t> shape = {s.extraWeights[i]};
        tensors.push_back(fb::CreateTensorDirect(
            b, name.c_str(), fb::DType::F32, &shape, fb::Storage::Weight, 0, at[i],
            v.size() * 4, referenceChecksum(checksumsBy(s), v.data(), v.size() * 4)));
        file.seekp(std::streamoff(at[i]));
        if (!s.extraHoles)
          file.write(reinterpret_cast<const char *>(v.data()), std::streamsize(v.size() * 4));
      }
      fileBytes = at.back();
    }
    std::vector<flatbuffers::Offset<fb::WeightFile>> files = {
        fb::CreateWeightFileDirect(b, s.weightFile.c_str(), fileBytes, 0)};
    if (fileBytes > sizeof kTable) // the table, then a hole or the extra weights
      fs::resize_file(dir_ / "weights-0.bin", fileBytes);
    for (int r = 1; r < s.ranks; ++r) {
      std::string name = "weights-" + std::to_string(r) + ".bin";
      std::ofstream(dir_ / name, std::ios::binary)
          .write(reinterpret_cast<const char *>(kTable), sizeof kTable);
      files.push_back(fb::CreateWeightFileDirect(b, name.c_str(), sizeof kTable,
                                                 r == 1 ? s.fileRank1 : r));
      std::vector<uint32_t> ins = {0, uint32_t(tensors.size())};
      tensors.push_back(fb::CreateTensorDirect(b, "table", s.tableType, &s.tableShape,
                                               fb::Storage::Weight, uint32_t(r), 0, 64,
                                               referenceChecksum(checksumsBy(s), kTable, 64)));
      insts[size_t(r)].push_back(fb::CreateInstructionDirect(
          b, fb::OpCode::Embedding, &ins, &s.outs, fb::OpParams::NONE, 0));
    }
    for (int r = 0; r < s.ranks; ++r)
      if (s.collective != fb::CollectiveOp::None && r != s.skipCollectiveOn)
        insts[size_t(r)].push_back(fb::CreateInstructionDirect(
            b, fb::OpCode(0), &s.outs, &s.outs, fb::OpParams::NONE, 0,
            s.collectiveStreams.empty() ? 0 : s.collectiveStreams[size_t(r)], nullptr, nullptr,
            nullptr, s.collective));
    std::vector<uint32_t> inputs = {0, 1};
    uint64_t tableBytes = s.tableSize;
    if (s.group)
      tableBytes += 16; // the scales
    std::vector<flatbuffers::Offset<fb::Program>> programs;
    for (int r = 0; r < s.ranks; ++r)
      programs.push_back(fb::CreateProgramDirect(
          b, s.programRanks.empty() ? r : s.programRanks[size_t(r)], &insts[size_t(r)], &inputs,
          &s.planOutputs, s.arenaBytes, r == 0 ? s.weightBytes.value_or(tableBytes) : 64));
    std::vector<flatbuffers::Offset<fb::LayerPlacement>> placement;
    for (int l = 0; l < s.placementLayers; ++l) {
      std::vector<fb::ExpertSlot> slots = {fb::ExpertSlot(0, 0)};
      std::vector<flatbuffers::Offset<fb::ExpertSlots>> experts = {
          fb::CreateExpertSlotsDirect(b, &slots)};
      placement.push_back(fb::CreateLayerPlacementDirect(b, l, &experts));
    }
    std::vector<flatbuffers::Offset<fb::KvLayer>> layers;
    auto config = fb::CreateModelConfigDirect(b, "mixtral", s.vocab, 4, 1, 1, 1, 8);
    auto kv = fb::CreateKvCacheSpecDirect(b, fb::DType::F32, 8, &layers);
    if (!s.weightChecksum)
      b.ForceDefaults(false); // Plan.weight_checksum left out, as before format 2.10
    auto plan = fb::CreatePlanDirect(
        b, kFormatMajor, s.weightChecksum ? kFormatMinor : 9, config, &tensors, &files,
        &programs, s.maxTokens, kv, 0, &placement, 0,
        s.weightChecksum.value_or(fb::WeightChecksum::Checksum64));
    fb::FinishPlanBuffer(b, plan);
    std::ofstream out(dir_ / kPlanFileName, std::ios::binary);
    out.write(reinterpret_cast<const char *>(b.GetBufferPointer()), b.GetSize());
    out << planTrailer(b.GetBufferPointer(), b.GetSize());
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

// A plan destroyed while its background prefault runs stops and joins the
// thread before unmapping (ASan and the kernel would see a use after unmap);
// one that runs meanwhile computes what it computes without it.
TEST_F(PlanLoaderTest, ClosedWhileBackgroundPrefaultRuns) {
  Spec s;
  s.weightFileBytes = uint64_t(256) << 20; // a sparse file: 256 MiB to populate
  write(s);
  LoadOptions o;
  o.prefault = Prefault::Background;
  int closedRunning = 0;
  for (int i = 0; i < 5; ++i) {
    auto loaded = LoadedPlan::open(dir_.string(), o);
    ASSERT_TRUE(loaded) << loaded.status().message();
    const PrefaultProgress p = (*loaded)->prefault();
    EXPECT_EQ(p.mode, Prefault::Background);
    EXPECT_EQ(p.bytes, s.weightFileBytes);
    closedRunning += p.state == PrefaultProgress::State::Running;
    // destroyed here, the prefault most likely not done
  }
  EXPECT_GT(closedRunning, 0) << "the prefault always ended before the plan closed";

  auto loaded = LoadedPlan::open(dir_.string(), o);
  ASSERT_TRUE(loaded) << loaded.status().message();
  float out[8];
  ASSERT_NO_FATAL_FAILURE(runTokensThreeAndOne(**loaded, out));
  EXPECT_EQ(std::vector<float>(out, out + 8),
            (std::vector<float>{30, 31, 32, 33, 10, 11, 12, 13}));
  (*loaded)->waitForPrefault();
  EXPECT_EQ((*loaded)->prefault().state, PrefaultProgress::State::Done);
  EXPECT_EQ((*loaded)->prefault().populated, s.weightFileBytes);
}

// Format 2.10: a plan names its weights' checksum algorithm; one that names
// none (before 2.10) is checked with checksum64. Checksums of another
// algorithm than the one named are a mismatch, named.
TEST_F(PlanLoaderTest, WeightsAreCheckedWithTheAlgorithmThePlanNames) {
  using C = fb::WeightChecksum;
  for (std::optional<C> named : {std::optional<C>(), std::optional<C>(C::Checksum64),
                                 std::optional<C>(C::XXH3_64)}) {
    SCOPED_TRACE(named ? weightChecksumName(*named) : "absent");
    const C algorithm = named.value_or(C::Checksum64);
    Spec s;
    s.weightChecksum = named;
    s.extraWeights = {1000};
    write(s);
    std::ifstream in(dir_ / kPlanFileName, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    const auto *table = reinterpret_cast<const flatbuffers::Table *>(fb::GetPlan(bytes.data()));
    EXPECT_EQ(table->CheckField(fb::Plan::VT_WEIGHT_CHECKSUM), named.has_value());
    LoadOptions o;
    o.verifyWeights = true;
    auto loaded = LoadedPlan::open(dir_.string(), o);
    ASSERT_TRUE(loaded) << loaded.status().message();
    const PrefaultProgress p = (*loaded)->prefault();
    EXPECT_TRUE(p.weightsVerified());
    EXPECT_EQ(p.checksum, algorithm);
    EXPECT_EQ(p.verified, 64u + 4000u);

    s.checksumsBy = algorithm == C::XXH3_64 ? C::Checksum64 : C::XXH3_64;
    write(s);
    auto wrong = LoadedPlan::open(dir_.string(), o);
    ASSERT_FALSE(wrong);
    // Both weights mismatch; the two checking threads may find either first.
    const std::string &m = wrong.status().message();
    EXPECT_TRUE(m.find("checksum mismatch in weight 'table'") != std::string::npos ||
                m.find("checksum mismatch in weight 'extra0'") != std::string::npos)
        << m;
  }
}

TEST_F(PlanLoaderTest, RejectsAnUnknownWeightChecksum) {
  Spec s;
  s.weightChecksum = fb::WeightChecksum(7);
  EXPECT_ERROR(s, "weight checksum algorithm 7 is not one this runtime knows (0: checksum64, "
                  "1: xxh3-64)");
}

/// A table and four weights no instruction reads, in weights-0.bin of 33
/// MiB: extra0 spans three prefault chunks (8 MiB), the last ends the file
/// 12 bytes past a page.
Spec verifiedWeights() {
  Spec s;
  s.weightChecksum = fb::WeightChecksum::XXH3_64;
  s.extraWeights = {(20 << 20) / 4 + 5, 1000, (12 << 20) / 4, 1027};
  return s;
}

/// The sum of `s`'s weights' sizes: the table's and the extra ones'.
uint64_t weightTotal(const Spec &s) {
  uint64_t total = sizeof kTable;
  for (int64_t n : s.extraWeights)
    total += uint64_t(n) * 4;
  return total;
}

// A verifying prefault, in the background or before open returns, checks
// every weight as it populates its pages: every byte of every weight.
TEST_F(PlanLoaderTest, VerifiesWhilePrefaulting) {
  const Spec s = verifiedWeights();
  write(s);
  const uint64_t fileBytes = extraOffsets(s).back();
  for (Prefault mode : {Prefault::Background, Prefault::Sync}) {
    SCOPED_TRACE(prefaultName(mode));
    LoadOptions o;
    o.prefault = mode;
    o.verifyWhilePrefaulting = true;
    auto loaded = LoadedPlan::open(dir_.string(), o);
    ASSERT_TRUE(loaded) << loaded.status().message();
    (*loaded)->waitForPrefault();
    const PrefaultProgress p = (*loaded)->prefault();
    EXPECT_EQ(p.mode, mode);
    EXPECT_EQ(p.state, PrefaultProgress::State::Done);
    EXPECT_TRUE(p.weightsVerified());
    EXPECT_EQ(p.checksum, fb::WeightChecksum::XXH3_64);
    EXPECT_EQ(p.weightBytes, weightTotal(s));
    EXPECT_EQ(p.verified, weightTotal(s));
    EXPECT_EQ(p.bytes, fileBytes);
    EXPECT_EQ(p.populated, fileBytes);
    EXPECT_EQ(p.error, "");
  }
  // A plain prefault checks nothing.
  auto plain = LoadedPlan::open(dir_.string(), LoadOptions{});
  ASSERT_TRUE(plain) << plain.status().message();
  (*plain)->waitForPrefault();
  EXPECT_FALSE((*plain)->prefault().verifying);
  EXPECT_FALSE((*plain)->prefault().weightsVerified());
  EXPECT_EQ((*plain)->prefault().verified, 0u);
}

// One flipped byte, first or last of each weight or in the middle of one
// that spans several chunks, is reported naming that weight and its bytes:
// by a background verifying prefault (Failed), and by open for a sync one
// and for verifyWeights.
TEST_F(PlanLoaderTest, NamesTheWeightWhoseByteFlipped) {
  const Spec s = verifiedWeights();
  const std::vector<uint64_t> at = extraOffsets(s);
  struct Flip {
    uint64_t byte;
    std::string weight;
    uint64_t begin, end;
  };
  std::vector<Flip> flips = {{0, "table", 0, 64}, {63, "table", 0, 64}};
  for (size_t i = 0; i < s.extraWeights.size(); ++i) {
    const std::string name = "extra" + std::to_string(i);
    const uint64_t end = at[i] + uint64_t(s.extraWeights[i]) * 4;
    flips.push_back({at[i], name, at[i], end});
    flips.push_back({end - 1, name, at[i], end});
  }
  const uint64_t end0 = at[0] + uint64_t(s.extraWeights[0]) * 4;
  flips.push_back({at[0] + (11 << 20) + 3, "extra0", at[0], end0}); // in chunk 2 of 3
  for (const Flip &f : flips) {
    SCOPED_TRACE("byte " + std::to_string(f.byte));
    write(s);
    {
      std::fstream file(dir_ / "weights-0.bin", std::ios::in | std::ios::out | std::ios::binary);
      file.seekg(std::streamoff(f.byte));
      const char c = char(file.get() ^ 0x10);
      file.seekp(std::streamoff(f.byte));
      file.put(c);
    }
    const std::string want = dir_.string() + "/weights-0.bin: checksum mismatch in weight '" +
                             f.weight + "' (bytes " + std::to_string(f.begin) + ".." +
                             std::to_string(f.end) +
                             "): the weight file is corrupt or belongs to another plan";
    LoadOptions o;
    o.verifyWhilePrefaulting = true;
    auto background = LoadedPlan::open(dir_.string(), o);
    ASSERT_TRUE(background) << background.status().message();
    (*background)->waitForPrefault();
    const PrefaultProgress p = (*background)->prefault();
    EXPECT_EQ(p.state, PrefaultProgress::State::Failed);
    EXPECT_FALSE(p.weightsVerified());
    EXPECT_EQ(p.error, want);
    EXPECT_LT(p.verified, p.weightBytes);
    o.prefault = Prefault::Sync;
    auto sync = LoadedPlan::open(dir_.string(), o);
    ASSERT_FALSE(sync);
    EXPECT_EQ(sync.status().message(), want);
    LoadOptions before;
    before.verifyWeights = true;
    auto verified = LoadedPlan::open(dir_.string(), before);
    ASSERT_FALSE(verified);
    EXPECT_EQ(verified.status().message(), want);
  }
}

// A rank verifies its own weight files only; a tool that maps every rank's
// (rank unset) verifies them all.
TEST_F(PlanLoaderTest, VerifiesTheRanksOwnWeightFiles) {
  Spec s;
  s.ranks = 2;
  s.collective = fb::CollectiveOp::AllReduce;
  write(s);
  {
    std::fstream file(dir_ / "weights-1.bin", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(5);
    file.put(char(0x7f));
  }
  LoadOptions o;
  o.prefault = Prefault::Sync;
  o.verifyWhilePrefaulting = true;
  o.rank = 0;
  auto rank0 = LoadedPlan::open(dir_.string(), o);
  ASSERT_TRUE(rank0) << rank0.status().message();
  EXPECT_TRUE((*rank0)->prefault().weightsVerified());
  EXPECT_EQ((*rank0)->prefault().verified, sizeof kTable);
  const std::string want = dir_.string() + "/weights-1.bin: checksum mismatch in weight 'table' "
                           "(bytes 0..64): the weight file is corrupt or belongs to another plan";
  for (std::optional<int> rank : {std::optional<int>(1), std::optional<int>()}) {
    o.rank = rank;
    auto other = LoadedPlan::open(dir_.string(), o);
    ASSERT_FALSE(other);
    EXPECT_EQ(other.status().message(), want);
  }
}

TEST_F(PlanLoaderTest, VerifyingRefusesNoPrefaultOrNoMapping) {
  write(Spec());
  LoadOptions o;
  o.verifyWhilePrefaulting = true;
  o.prefault = Prefault::Off;
  auto off = LoadedPlan::open(dir_.string(), o);
  ASSERT_FALSE(off);
  EXPECT_EQ(off.status().message(),
            (dir_ / kPlanFileName).string() +
                ": the weights cannot be verified while they are prefaulted with the prefault "
                "off: prefault them (background or sync), or do not verify them");
  o.verifyWeights = true; // checked before open returns: no prefault needed
  auto before = LoadedPlan::open(dir_.string(), o);
  ASSERT_TRUE(before) << before.status().message();
  EXPECT_TRUE((*before)->prefault().weightsVerified());
  o.mapWeights = false;
  auto unmapped = LoadedPlan::open(dir_.string(), o);
  ASSERT_FALSE(unmapped);
  EXPECT_NE(unmapped.status().message().find("cannot be verified without mapping them"),
            std::string::npos);
}

// A plan destroyed while its verifying prefault runs stops both workers
// within a chunk and joins them before unmapping (ASan would see a use
// after unmap), as a plain prefault does.
TEST_F(PlanLoaderTest, ClosedWhileVerifying) {
  Spec s;
  s.weightChecksum = fb::WeightChecksum::XXH3_64;
  s.extraWeights = {(256 << 20) / 4}; // 256 MiB of zeros in a sparse file
  s.extraHoles = true;
  write(s);
  LoadOptions o;
  o.verifyWhilePrefaulting = true;
  int closedRunning = 0;
  for (int i = 0; i < 5; ++i) {
    auto loaded = LoadedPlan::open(dir_.string(), o);
    ASSERT_TRUE(loaded) << loaded.status().message();
    const PrefaultProgress p = (*loaded)->prefault();
    EXPECT_TRUE(p.verifying);
    closedRunning += p.state == PrefaultProgress::State::Running;
    // destroyed here, most likely before the 256 MiB are checked
  }
  EXPECT_GT(closedRunning, 0) << "the check always ended before the plan closed";
  auto loaded = LoadedPlan::open(dir_.string(), o);
  ASSERT_TRUE(loaded) << loaded.status().message();
  (*loaded)->waitForPrefault();
  EXPECT_TRUE((*loaded)->prefault().weightsVerified());
  EXPECT_EQ((*loaded)->prefault().verified, weightTotal(s));
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

// Rows of an int8 table are its values times their scales; a W8A8 table
// (tied to a W8A8 LM head) looks up the same rows: a lookup multiplies
// nothing.
TEST_F(PlanLoaderTest, QuantizedTableRuns) {
  for (bool int8Activations : {false, true}) {
    SCOPED_TRACE(int8Activations ? "W8A8 table" : "int8 table");
    Spec s = int8Table();
    s.int8Activations = int8Activations;
    write(s);
    auto loaded = LoadedPlan::open(dir_.string());
    ASSERT_TRUE(loaded) << loaded.status().message();
    float out[8];
    ASSERT_NO_FATAL_FAILURE(runTokensThreeAndOne(**loaded, out));
    const int32_t tokens[2] = {3, 1};
    const auto *q = reinterpret_cast<const int8_t *>(kTable);
    for (int t = 0; t < 2; ++t)
      for (int c = 0; c < 4; ++c)
        EXPECT_EQ(out[t * 4 + c], float(q[tokens[t] * 4 + c]) * kTable[tokens[t]]);
  }
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

// int8_activations: only on I8 weights with one scale per row (W8A8) and
// I4 weights whose groups start at multiples of 128 (W4A8), and only where
// every kernel that reads the weight quantizes its activations or has none
// (the embedding lookup).
TEST_F(PlanLoaderTest, RejectsInt8ActivationsWhereTheyDoNotApply) {
  const std::string needs =
      "tensor 2 ('table') has int8_activations, which needs an I8 weight with one scale per row "
      "(W8A8: group = its row length) or an I4 weight whose group is a multiple of 128 or its "
      "row length (W4A8), row_group 1; it is ";
  Spec s;
  s.int8Activations = true; // on an F32 table
  EXPECT_ERROR(s, needs + "F32 with group 0 and row_group 1");
  s = int8Table();
  s.int8Activations = true;
  s.group = 2; // grouped int8
  s.scalesShape = {4, 2};
  EXPECT_ERROR(s, needs + "I8 with group 2 and row_group 1");
  s = int8Table();
  s.int8Activations = true;
  s.tableType = fb::DType::I4; // groups of 64 in rows of 256
  s.tableShape = {4, 256};
  s.tableSize = 512;
  s.weightFileBytes = 1024;
  s.group = 64;
  s.scalesShape = {4, 4};
  EXPECT_ERROR(s, needs + "I4 with group 64 and row_group 1");
  // A valid W8A8 weight as a shared expert's gate vector, which
  // sigmoidGate multiplies without quantizing anything: refused.
  s = int8Table();
  s.int8Activations = true;
  s.op = fb::OpCode::SigmoidGate;
  s.ins = {3, 2, 3};
  s.tableShape = {1, 4};
  s.tableSize = 4;
  s.scalesShape = {1, 1};
  s.weightBytes = 8; // the row and its scale
  EXPECT_ERROR(s, "instruction 0 (sigmoid_gate): its gate 'table' is W8A8 (int8_activations), "
                  "which this kernel does not take (only linear, router, experts, expert_rows "
                  "and embedding do)");
}

TEST_F(PlanLoaderTest, Int8ActivationsOnALinearWeightLoad) {
  // out = out x table^T: a linear that reads the W8A8 table.
  Spec s = int8Table();
  s.int8Activations = true;
  s.op = fb::OpCode::Linear;
  s.ins = {3, 2};
  write(s);
  auto loaded = LoadedPlan::open(dir_.string());
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_TRUE((*loaded)->plan().tensors()->Get(2)->int8_activations());
  EXPECT_FALSE((*loaded)->plan().tensors()->Get(4)->int8_activations()); // its scales
}

TEST_F(PlanLoaderTest, Int8ActivationsOnAnInt4LinearWeightLoad) {
  // W4A8: an I4 table with one group a row (its rows shorter than 128);
  // groups of a multiple of 128 load too (e2e/w4a8.test).
  Spec s = int8Table();
  s.int8Activations = true;
  s.tableType = fb::DType::I4;
  s.tableSize = 8;
  s.op = fb::OpCode::Linear;
  s.ins = {3, 2};
  write(s);
  auto loaded = LoadedPlan::open(dir_.string());
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_TRUE((*loaded)->plan().tensors()->Get(2)->int8_activations());
}

// Panels8: only on F32, BF16 or F16 weights of whole panels of 8 rows, and
// only where every kernel that reads the weight multiplies through
// linear() or linearGroup().
TEST_F(PlanLoaderTest, RejectsPanelsWhereTheyDoNotApply) {
  Spec s;
  s.layout = fb::Layout(9);
  EXPECT_ERROR(s, "tensor 2 ('table') has unknown layout 9 (this build reads Rows and Panels8)");
  s.layout = fb::Layout::Panels8; // 4 rows
  EXPECT_ERROR(s, "tensor 2 ('table') is in panels (Panels8), which needs an F32, BF16 or F16 "
                  "weight of at least 2 dimensions whose matrices have a multiple of 8 rows; it "
                  "is F32 [4, 4]");
  s = int8Table();
  s.tableShape = {8, 2};
  s.scalesShape = {8, 1};
  s.group = 2;
  s.layout = fb::Layout::Panels8;
  EXPECT_ERROR(s, "which needs an F32, BF16 or F16 weight of at least 2 dimensions whose "
                  "matrices have a multiple of 8 rows; it is I8 [8, 2]");
  s = Spec();
  s.tableShape = {16};
  s.layout = fb::Layout::Panels8;
  EXPECT_ERROR(s, "it is F32 [16]");
}

/// An embedding of an [8, 8] table of `type` in panels; the weight file is
/// kTable, then zeros.
Spec panelTable(fb::DType type) {
  Spec s;
  s.tableType = type;
  s.tableShape = {8, 8};
  s.tableSize = type == fb::DType::F32 ? 256 : 128;
  s.weightFileBytes = s.tableSize;
  s.outCols = 8;
  s.vocab = 8;
  s.arenaBytes = 64;
  s.layout = fb::Layout::Panels8;
  return s;
}

// A table in panels (tied to an LM head in panels) is looked up by
// gathering each row from its panel: element (r, c) at panelIndex(r, c, 8)
// of the file (kTable, then zeros), where rows would read (r * 8 + c).
TEST_F(PlanLoaderTest, PanelTableRuns) {
  write(panelTable(fb::DType::F32));
  auto loaded = LoadedPlan::open(dir_.string());
  ASSERT_TRUE(loaded) << loaded.status().message();
  float out[16];
  ASSERT_NO_FATAL_FAILURE(runTokensThreeAndOne(**loaded, out));
  std::vector<float> file(64, 0.0f);
  std::copy(std::begin(kTable), std::end(kTable), file.begin());
  const int32_t tokens[2] = {3, 1};
  for (int t = 0; t < 2; ++t)
    for (int c = 0; c < 8; ++c)
      EXPECT_EQ(out[t * 8 + c], file[panelIndex(tokens[t], c, 8)]) << t << ", " << c;
  EXPECT_EQ(out[1], 23.0f); // row 3, column 1: element 11 of the file
}

/// out = out x table^T: a linear that reads an [8, 8] BF16 table in panels.
Spec panelLinear() {
  Spec s = panelTable(fb::DType::BF16);
  s.op = fb::OpCode::Linear;
  s.ins = {3, 2};
  return s;
}

TEST_F(PlanLoaderTest, PanelsOnALinearWeightLoad) {
  write(panelLinear());
  auto loaded = LoadedPlan::open(dir_.string());
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_EQ((*loaded)->plan().tensors()->Get(2)->layout(), fb::Layout::Panels8);
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

TEST_F(PlanLoaderTest, RejectsParametersOfAKernelThatTakesNone) {
  Spec s;
  s.dispatchParams = true;
  EXPECT_ERROR(s, "instruction 0 (embedding) takes no parameters");
}

// Expert ids index buckets: they must be a router's output.
TEST_F(PlanLoaderTest, RejectsDispatchOfIdsNoRouterWrote) {
  Spec s;
  s.op = fb::OpCode::Dispatch;
  s.dispatchParams = true;
  s.ins = {3, 2};
  s.outs = {3, 3, 3};
  EXPECT_ERROR(s, "instruction 0 (dispatch): its expert indices must come from a router over 4 "
                  "experts");
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
  EXPECT_ERROR(s, "instruction 0 (embedding) writes tensor 2 ('table'), which is not an arena "
                  "tensor");
}

TEST_F(PlanLoaderTest, RejectsOutputThatIsAnInput) {
  Spec s;
  s.planOutputs = {0};
  EXPECT_ERROR(s, "output tensor 0 ('tokens'), which is not an arena tensor");
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

// Format 2.0: a program per rank, each with its own weight file.
TEST_F(PlanLoaderTest, EachRankMapsOnlyItsOwnWeights) {
  Spec s;
  s.ranks = 2;
  write(s);
  fs::remove(dir_ / "weights-1.bin"); // rank 0 never opens it
  LoadOptions rank0;
  rank0.rank = 0;
  auto loaded = LoadedPlan::open(dir_.string(), rank0);
  ASSERT_TRUE(loaded) << loaded.status().message();
  EXPECT_EQ((*loaded)->ranks(), 2);
  EXPECT_EQ((*loaded)->program().rank(), 0);
  EXPECT_EQ((*loaded)->weightData(4), nullptr); // rank 1's table
  LoadOptions rank1;
  rank1.rank = 1;
  auto missing = LoadedPlan::open(dir_.string(), rank1);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("weights-1.bin"), std::string::npos)
      << missing.status().message();
  LoadOptions rank2;
  rank2.rank = 2;
  auto none = LoadedPlan::open(dir_.string(), rank2);
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("rank 2 cannot run it: the plan is compiled for 2 rank(s); "
                                          "launch 2 (mpirun -np 2) or recompile the plan"),
            std::string::npos)
      << none.status().message();
}

TEST_F(PlanLoaderTest, RejectsProgramsOutOfRankOrder) {
  Spec s;
  s.ranks = 2;
  s.programRanks = {1, 0};
  EXPECT_ERROR(s, "program 0 says it is rank 1; programs are stored in rank order");
}

TEST_F(PlanLoaderTest, RejectsReadingAnotherRanksWeights) {
  Spec s;
  s.ranks = 2;
  s.tableFile = 1;
  EXPECT_ERROR(s, "rank 0: weight 'table' is in weights-1.bin, a file of rank 1");
}

TEST_F(PlanLoaderTest, RejectsWeightFileOfNoRank) {
  Spec s;
  s.ranks = 2;
  s.fileRank1 = 2;
  EXPECT_ERROR(s, "weight file weights-1.bin belongs to rank 2, but the plan has 2 rank "
                  "program(s)");
}

TEST_F(PlanLoaderTest, RejectsWrongStatedWeightBytes) {
  Spec s;
  s.weightBytes = 60;
  EXPECT_ERROR(s, "program 0 states 60 weight bytes, but its weights take 64");
}

TEST_F(PlanLoaderTest, LoadsMatchingCollectives) {
  Spec s;
  s.ranks = 2;
  s.collective = fb::CollectiveOp::AllReduce;
  EXPECT_EQ(error(s), "");
}

TEST_F(PlanLoaderTest, RejectsCollectivesTheRanksDoNotShare) {
  Spec s;
  s.ranks = 2;
  s.collective = fb::CollectiveOp::AllReduce;
  s.skipCollectiveOn = 1;
  EXPECT_ERROR(s, "collective 0 of rank 1 is nothing, but rank 0's is all_reduce of F32 [Tx4] "
                  "among every rank: "
                  "the ranks would wait for each other forever");
}

TEST_F(PlanLoaderTest, RejectsAGatherOfTheWrongShape) {
  Spec s;
  s.collective = fb::CollectiveOp::AllGather; // out = in: not [ranks, T, 4]
  EXPECT_ERROR(s, "instruction 1 (all_gather): its output 'out' is F32 [T, 4] in Arena; "
                  "expected F32 [1, T, 4] in Arena");
}

TEST_F(PlanLoaderTest, RejectsAPlacementForLayersNobodyRoutes) {
  Spec s;
  s.placementLayers = 1;
  EXPECT_ERROR(s, "the expert placement covers 1 layer(s), but the plan routes 0");
}

TEST_F(PlanLoaderTest, SessionRefusesAJobOfAnotherSize) {
  Spec s;
  s.ranks = 2;
  write(s);
  LoadOptions rank0;
  rank0.rank = 0;
  auto loaded = LoadedPlan::open(dir_.string(), rank0);
  ASSERT_TRUE(loaded) << loaded.status().message();
  auto device = createCpuDevice();
  auto session = Session::create(**loaded, *device); // a local, one-rank job
  ASSERT_FALSE(session);
  EXPECT_EQ(session.status().message(),
            "the plan was loaded for rank 0 of 2, but this process is rank 0 of 1");
}

TEST_F(PlanLoaderTest, RejectsZeroBatch) {
  Spec s;
  s.maxTokens = 0;
  EXPECT_ERROR(s, "max_batch_tokens 0 out of range [1, 16777216]");
}

} // namespace

// Streams and events (format 1.7): two streams may touch the same bytes,
// one writing, only in an order events give.

/// Two embeddings, the second on stream 1 into 512 bytes at `offset` (out
/// takes [0, 512)).
Spec twoStreams(uint64_t offset) {
  Spec s;
  s.maxTokens = 32;
  s.arenaBytes = 1024;
  s.second.on = true;
  s.second.offset = offset;
  return s;
}

TEST_F(PlanLoaderTest, RejectsStreamsWritingOverlappingBytesUnordered) {
  Spec s = twoStreams(256); // [256, 768) overlaps out's [0, 512)
  EXPECT_ERROR(s, "instruction 1 (embedding on stream 1) writes tensor 4 'out2', whose arena "
                  "bytes overlap tensor 3 'out', which instruction 0 (embedding on stream 0) "
                  "writes, with no event ordering them");
}

TEST_F(PlanLoaderTest, LoadsStreamsOrderedByAnEvent) {
  Spec s = twoStreams(256);
  s.records = {0};
  s.second.waits = {0};
  EXPECT_EQ(error(s), "");
}

TEST_F(PlanLoaderTest, LoadsStreamsOnDisjointBytes) {
  Spec s = twoStreams(512);
  EXPECT_EQ(error(s), "");
}

TEST_F(PlanLoaderTest, RejectsWaitingForAnEventNobodyRecords) {
  Spec s = twoStreams(512);
  s.second.waits = {0};
  EXPECT_ERROR(s, "instruction 1 (embedding on stream 1) uses event 0, but the program records 0 "
                  "(numbered from 0)");
}

TEST_F(PlanLoaderTest, RejectsWaitingBeforeTheRecord) {
  Spec s = twoStreams(512);
  s.waits = {0};
  s.second.records = {0};
  EXPECT_ERROR(s, "instruction 0 (embedding on stream 0) waits for event 0, which nothing "
                  "recorded before it");
}

TEST_F(PlanLoaderTest, RejectsCollectivesOnTwoStreams) {
  Spec s = twoStreams(512);
  s.second.allReduce = true; // on stream 1
  s.collective = fb::CollectiveOp::AllReduce; // of out, on stream 0, last
  EXPECT_ERROR(s, "instruction 3 is a collective on stream 0, but earlier ones run on stream 1: "
                  "collectives run on one stream");
}

TEST_F(PlanLoaderTest, RejectsAnEventRecordedTwice) {
  Spec s = twoStreams(512);
  s.records = {0};
  s.second.records = {0, 1};
  EXPECT_ERROR(s, "event 0 is recorded twice (again by instruction 1 (embedding on stream 1))");
}

/// A CPU device that logs what the session asks of its streams and events.
class LoggingDevice final : public Device {
public:
  std::vector<std::string> log;
  std::vector<Kernel> refused;    ///< kernels it says it does not run
  std::vector<WeightForm> unread; ///< weight forms it says it does not read
  bool onGpu = false;             ///< its memory is not the host's (as CUDA's)

  std::string name() const override { return "logging"; }
  uint64_t memoryBytes() const override { return cpu_->memoryBytes(); }
  bool supports(Kernel k, DType t) const override {
    return std::find(refused.begin(), refused.end(), k) == refused.end() && cpu_->supports(k, t);
  }
  bool readsWeights(WeightForm f) const override {
    return std::find(unread.begin(), unread.end(), f) == unread.end() && cpu_->readsWeights(f);
  }
  bool supportsKvCache(DType t) const override { return cpu_->supportsKvCache(t); }
  bool hostAddressable() const override { return !onGpu; }
  Expected<std::unique_ptr<Buffer>> allocate(size_t bytes, MemoryKind kind) override {
    return cpu_->allocate(bytes, kind);
  }
  Expected<std::unique_ptr<Buffer>> importHost(const void *data, size_t bytes) override {
    return cpu_->importHost(data, bytes);
  }
  Stream &stream(int index) override {
    while (streams_.size() <= size_t(index))
      streams_.push_back(std::make_unique<LoggingStream>(*this, int(streams_.size())));
    return *streams_[size_t(index)];
  }
  std::unique_ptr<Event> createEvent() override {
    return std::make_unique<LoggingEvent>(events_++);
  }

private:
  struct LoggingEvent final : Event {
    explicit LoggingEvent(int id) : id(id) {}
    Status synchronize() override { return Status::ok(); }
    int id;
  };
  struct LoggingStream final : Stream {
    LoggingStream(LoggingDevice &d, int index) : d(d), s("s" + std::to_string(index)) {}
    Status launch(const KernelCall &call) override {
      d.log.push_back(s + " launch " + kernelInfo(call.kernel)->name);
      return d.cpu_->stream(0).launch(call);
    }
    Status enqueueHost(std::function<Status()> work) override {
      d.log.push_back(s + " host work");
      return work();
    }
    Status record(Event &e) override { return note("record", e); }
    Status wait(Event &e) override { return note("wait", e); }
    Status note(const char *what, Event &e) {
      d.log.push_back(s + " " + what + " e" + std::to_string(static_cast<LoggingEvent &>(e).id));
      return Status::ok();
    }
    Status synchronize() override {
      d.log.push_back(s + " synchronize");
      return Status::ok();
    }
    Status doCopy(Buffer &dst, size_t dstOffset, Buffer &src, size_t srcOffset,
                  size_t bytes) override {
      d.log.push_back(s + " copy " + std::to_string(bytes) + " bytes" +
                      (src.host() ? " in" : dst.host() ? " out" : ""));
      return d.cpu_->stream(0).copy(dst, dstOffset, src, srcOffset, bytes);
    }
    LoggingDevice &d;
    std::string s;
  };
  std::unique_ptr<Device> cpu_ = createCpuDevice();
  std::vector<std::unique_ptr<LoggingStream>> streams_;
  int events_ = 0;
};

// A kernel the device does not run is refused by name before anything runs:
// with its weights' dtype, or alone when it has no weights (asked as F32).
TEST_F(PlanLoaderTest, SessionRefusesAKernelTheDeviceDoesNotRun) {
  Spec embedding;
  write(embedding);
  auto loaded = LoadedPlan::open(dir_.string());
  ASSERT_TRUE(loaded) << loaded.status().message();
  LoggingDevice device;
  device.refused = {Kernel::Embedding};
  auto session = Session::create(**loaded, device);
  ASSERT_FALSE(session);
  EXPECT_EQ(session.status().message().rfind(
                "embedding with F32 weights is not supported by the logging backend (at ", 0),
            0u)
      << session.status().message();

  Spec add; // out = out + out: no weights
  add.op = fb::OpCode::Add;
  add.ins = {3, 3};
  add.weightBytes = 0; // the table is in no program
  write(add);
  loaded = LoadedPlan::open(dir_.string());
  ASSERT_TRUE(loaded) << loaded.status().message();
  device.refused = {Kernel::Add};
  session = Session::create(**loaded, device);
  ASSERT_FALSE(session);
  EXPECT_EQ(session.status().message().rfind("add is not supported by the logging backend (at ", 0),
            0u)
      << session.status().message();
  device.refused = {};
  EXPECT_TRUE(Session::create(**loaded, device));
  EXPECT_TRUE(device.log.empty()); // nothing ran
}

/// Rank 0 of two, as a host collective (MPI) is; it moves nothing.
class TwoHostRanks final : public Collective {
public:
  std::string name() const override { return "two-host-ranks"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }

protected:
  Status doAllReduce(Stream &, DeviceArray) override { return Status::ok(); }
  Status doAllGather(Stream &, DeviceArray, DeviceArray) override { return Status::ok(); }
  Status doAllToAllV(Stream &, DeviceArray, const std::vector<size_t> &, DeviceArray,
                     std::vector<size_t> &) override {
    return Status::ok();
  }
};

// A host collective cannot move a GPU's memory: a multi-rank session on
// such a device is refused by name before anything runs.
TEST_F(PlanLoaderTest, SessionRefusesAHostCollectiveWithDeviceMemory) {
  Spec s;
  s.ranks = 2;
  s.collective = fb::CollectiveOp::AllReduce;
  write(s);
  LoadOptions options;
  options.rank = 0;
  auto loaded = LoadedPlan::open(dir_.string(), options);
  ASSERT_TRUE(loaded) << loaded.status().message();
  LoggingDevice device;
  device.onGpu = true;
  TwoHostRanks ranks;
  SessionOptions so;
  so.ranks = &ranks;
  auto session = Session::create(**loaded, device, so);
  ASSERT_FALSE(session);
  EXPECT_EQ(session.status().message(),
            "the two-host-ranks collective moves host memory, but the logging backend's memory "
            "is on the device: run multi-rank plans on the cpu backend (no device collective, "
            "such as NCCL, is built)");
  EXPECT_TRUE(device.log.empty());
  device.onGpu = false;
  EXPECT_TRUE(Session::create(**loaded, device, so));
}

// A weight form the device does not read (the CUDA backend reads neither)
// is refused by name before anything runs, with the flag that compiles the
// plan without it; the other form is no obstacle.
TEST_F(PlanLoaderTest, SessionRefusesWeightFormsTheDeviceDoesNotRead) {
  Spec w8a8 = int8Table(); // out = out x table^T, the table W8A8
  w8a8.int8Activations = true;
  w8a8.op = fb::OpCode::Linear;
  w8a8.ins = {3, 2};
  struct Case {
    Spec spec;
    WeightForm form, other;
    std::string refusal, instead;
  };
  for (const Case &c :
       {Case{panelLinear(), WeightForm::Panels8, WeightForm::Int8Activations,
             "linear with weights in panels ('table')", "--weight-layout=rows"},
        Case{w8a8, WeightForm::Int8Activations, WeightForm::Panels8,
             "linear with W8A8 weights (int8 activations) ('table')", "--precision=int8"}}) {
    SCOPED_TRACE(c.refusal);
    write(c.spec);
    auto loaded = LoadedPlan::open(dir_.string());
    ASSERT_TRUE(loaded) << loaded.status().message();
    LoggingDevice device;
    device.unread = {c.form};
    auto session = Session::create(**loaded, device);
    ASSERT_FALSE(session);
    const std::string &message = session.status().message();
    EXPECT_EQ(message.rfind(c.refusal + " is not supported by the logging backend (at ", 0), 0u)
        << message;
    EXPECT_NE(message.find("; compile the plan with " + c.instead), std::string::npos) << message;
    device.unread = {c.other};
    EXPECT_TRUE(Session::create(**loaded, device));
    EXPECT_TRUE(device.log.empty()); // nothing ran
  }
}

// An embedding lookup of a W8A8 table (a tied LM head's) multiplies
// nothing: a device without W8A8 runs it.
TEST_F(PlanLoaderTest, SessionLooksAW8A8TableUpWithoutW8A8) {
  Spec s = int8Table();
  s.int8Activations = true;
  write(s);
  auto loaded = LoadedPlan::open(dir_.string());
  ASSERT_TRUE(loaded) << loaded.status().message();
  LoggingDevice device;
  device.unread = {WeightForm::Int8Activations};
  EXPECT_TRUE(Session::create(**loaded, device));
}

TEST_F(PlanLoaderTest, SessionOrdersStreamsByThePlansEvents) {
  Spec s = twoStreams(256);
  s.records = {0};
  s.second.waits = {0};
  write(s);
  auto loaded = LoadedPlan::open(dir_.string());
  ASSERT_TRUE(loaded) << loaded.status().message();
  LoggingDevice device;
  auto session = Session::create(**loaded, device);
  ASSERT_TRUE(session) << session.status().message();
  int32_t tokens[2] = {2, 1}, positions[2] = {0, 1};
  float out[8];
  ASSERT_TRUE((*session)->forward(tokens, positions, 2, out));
  EXPECT_EQ(std::vector<float>(out, out + 8),
            (std::vector<float>{20, 21, 22, 23, 10, 11, 12, 13}));
  // The inputs are staged through the HAL (tokens, positions, the block
  // tables of 2 tokens of an 8-token context in blocks of 16: 1 entry
  // each), every other stream waits for them (e0, the session's event), the
  // plan's event (e1) orders the launches, both streams are waited for
  // before the logits come back through a copy.
  EXPECT_EQ(device.log,
            (std::vector<std::string>{
                "s0 copy 8 bytes in", "s0 copy 8 bytes in", "s0 copy 8 bytes in",
                "s0 record e0", "s1 wait e0", "s0 launch embedding", "s0 record e1",
                "s1 wait e1", "s1 launch embedding", "s0 synchronize", "s1 synchronize",
                "s0 copy 32 bytes out", "s0 synchronize"}));
}
