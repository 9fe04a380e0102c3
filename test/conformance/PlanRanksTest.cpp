// A plan's rank programs run by the job's ranks: each rank loads its own
// program and maps only its own weight file; the all_reduce instruction
// sums across the ranks. Alone, under mpirun -np 2 and -np 4 (the plan is
// built here for the job's size), against the closed form.
#include "Ranks.h"
#include "moe/abi/Checksum.h"
#include "moe/runtime/Plan.h"
#include "moe/abi/PlanFormat.h"
#include "moe/runtime/Session.h"

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <gtest/gtest.h>

namespace fs = std::filesystem;
namespace fb = moe::plan;
using namespace moe;

namespace {

constexpr int kVocab = 4, kCols = 4, kMaxTokens = 2;

/// Rank r's embedding table: row v is 10 v + c + 100 r.
float tableValue(int rank, int v, int c) { return float(10 * v + c + 100 * rank); }

/// Process groups of a plan: the groups' ranks, and the group rank r's
/// all_reduce runs among (-1: every rank).
struct Groups {
  std::vector<std::vector<int32_t>> ranks;
  std::function<int(int)> of = [](int) { return -1; };
};

/// Per rank: embedding of the tokens from its own table into `rows`, then
/// all_reduce of `rows` into `sum` (the logits).
void writePlan(const fs::path &dir, int ranks, const Groups &groups = {}) {
  fs::create_directories(dir);
  flatbuffers::FlatBufferBuilder b;
  b.ForceDefaults(true);
  std::vector<int64_t> tokenShape = {-1}, rowShape = {-1, kCols}, tableShape = {kVocab, kCols};
  const uint64_t rowBytes = uint64_t(kMaxTokens * kCols) * 4;
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors = {
      fb::CreateTensorDirect(b, "tokens", fb::DType::I32, &tokenShape, fb::Storage::Input),
      fb::CreateTensorDirect(b, "positions", fb::DType::I32, &tokenShape, fb::Storage::Input),
      fb::CreateTensorDirect(b, "rows", fb::DType::F32, &rowShape, fb::Storage::Arena, 0, 0,
                             rowBytes),
      fb::CreateTensorDirect(b, "sum", fb::DType::F32, &rowShape, fb::Storage::Arena, 0, 64,
                             rowBytes)};
  std::vector<flatbuffers::Offset<fb::WeightFile>> files;
  std::vector<flatbuffers::Offset<fb::Program>> programs;
  const std::vector<uint32_t> inputs = {0, 1}, outputs = {3}, rows = {2};
  for (int r = 0; r < ranks; ++r) {
    float table[kVocab * kCols];
    for (int v = 0; v < kVocab; ++v)
      for (int c = 0; c < kCols; ++c)
        table[v * kCols + c] = tableValue(r, v, c);
    std::string file = std::string(rt::kWeightFilePrefix) + std::to_string(r) + ".bin";
    std::ofstream(dir / file, std::ios::binary)
        .write(reinterpret_cast<const char *>(table), sizeof table);
    files.push_back(fb::CreateWeightFileDirect(b, file.c_str(), sizeof table, r));
    const uint32_t id = uint32_t(tensors.size());
    tensors.push_back(fb::CreateTensorDirect(b, "table", fb::DType::F32, &tableShape,
                                             fb::Storage::Weight, uint32_t(r), 0, sizeof table,
                                             rt::checksum64(table, sizeof table)));
    const std::vector<uint32_t> embedIns = {0, id};
    std::vector<flatbuffers::Offset<fb::Instruction>> insts = {
        fb::CreateInstructionDirect(b, fb::OpCode::Embedding, &embedIns, &rows),
        fb::CreateInstructionDirect(b, fb::OpCode(0), &rows, &outputs, fb::OpParams::NONE, 0, 0,
                                    nullptr, nullptr, nullptr, fb::CollectiveOp::AllReduce,
                                    groups.of(r))};
    programs.push_back(fb::CreateProgramDirect(b, r, &insts, &inputs, &outputs, 64 + rowBytes,
                                               sizeof table));
  }
  std::vector<flatbuffers::Offset<fb::KvLayer>> layers;
  auto config = fb::CreateModelConfigDirect(b, "mixtral", kVocab, kCols, 1, 1, 1, 8);
  auto kv = fb::CreateKvCacheSpecDirect(b, fb::DType::F32, 8, &layers);
  std::vector<flatbuffers::Offset<fb::Group>> table;
  for (const std::vector<int32_t> &g : groups.ranks)
    table.push_back(fb::CreateGroupDirect(b, fb::GroupKind::Tensor, &g));
  fb::FinishPlanBuffer(
      b, fb::CreatePlanDirect(b, rt::kFormatMajor, rt::kFormatMinor, config, &tensors, &files,
                              &programs, kMaxTokens, kv, 0, nullptr, 0, fb::WeightChecksum::Checksum64,
                              table.empty() ? nullptr : &table));
  std::ofstream out(dir / rt::kPlanFileName, std::ios::binary);
  out.write(reinterpret_cast<const char *>(b.GetBufferPointer()), b.GetSize());
  out << rt::planTrailer(b.GetBufferPointer(), b.GetSize());
}

/// The logits of one step of `tokens` on the plan in `dir`, run by this rank
/// of the job; an error for the test to report.
rt::Expected<std::vector<float>> step(const fs::path &dir, const int32_t (&tokens)[kMaxTokens]) {
  rt::LoadOptions options;
  options.rank = conformance::ranks().rank();
  auto loaded = rt::LoadedPlan::open(dir.string(), options);
  if (!loaded)
    return loaded.status();
  rt::SessionOptions so;
  so.ranks = &conformance::ranks();
  auto session = rt::Session::create(**loaded, conformance::device(), so);
  if (!session)
    return session.status();
  const int32_t positions[kMaxTokens] = {0, 1};
  std::vector<float> logits(kMaxTokens * kCols);
  if (rt::Status st = (*session)->forward(tokens, positions, kMaxTokens, logits.data()); !st)
    return st;
  return logits;
}

TEST(PlanRanks, GroupsSumAmongTheirMembers) {
  // Pairs of ranks ({0, 1}, {2, 3}, ...); in a job of odd size every rank
  // alone (the groups of one kind have one size).
  rt::Collective &job = conformance::ranks();
  const int ranks = job.size(), rank = job.rank(), size = ranks % 2 ? 1 : 2;
  Groups pairs;
  for (int first = 0; first < ranks; first += size) {
    pairs.ranks.push_back({first});
    if (size == 2)
      pairs.ranks.back().push_back(first + 1);
  }
  pairs.of = [size](int r) { return r / size; };
  fs::path dir = fs::temp_directory_path() / ("moe-plan-groups-" + std::to_string(::getpid()));
  writePlan(dir, ranks, pairs);
  const int32_t tokens[kMaxTokens] = {2, 0};
  auto logits = step(dir, tokens);
  ASSERT_TRUE(logits) << logits.status().message();
  for (int t = 0; t < kMaxTokens; ++t)
    for (int c = 0; c < kCols; ++c) {
      float want = 0;
      for (int32_t r : pairs.ranks[size_t(rank / size)])
        want += tableValue(r, tokens[t], c);
      EXPECT_EQ((*logits)[size_t(t * kCols + c)], want) << "token " << t << " column " << c;
    }
  fs::remove_all(dir);
}

/// The loader's refusal of a 4-rank plan with `groups`, or "" if it loads.
std::string refusal(const Groups &groups) {
  fs::path dir = fs::temp_directory_path() /
                 ("moe-plan-bad-groups-" + std::to_string(::getpid()) + "-" +
                  std::to_string(conformance::ranks().rank()));
  writePlan(dir, 4, groups);
  rt::LoadOptions options;
  options.rank = 0;
  auto loaded = rt::LoadedPlan::open(dir.string(), options);
  fs::remove_all(dir);
  if (loaded)
    return "";
  const std::string m = loaded.status().message(), file = rt::kPlanFileName + std::string(": ");
  return m.substr(m.find(file) == std::string::npos ? 0 : m.find(file) + file.size());
}

TEST(PlanRanks, LoaderRefusesGroupsThatCannotMeet) {
  auto pairs = [](int r) { return r / 2; };
  EXPECT_EQ(refusal({{{0, 1}, {2, 3}}, pairs}), "");
  EXPECT_EQ(refusal({{{0, 1}, {3, 2}}, pairs}),
            "group 1 lists rank 2 at position 1; a group's ranks are ascending, distinct, and "
            "below the plan's 4 rank(s)");
  EXPECT_EQ(refusal({{{0, 1}, {2, 4}}, pairs}),
            "group 1 lists rank 4 at position 1; a group's ranks are ascending, distinct, and "
            "below the plan's 4 rank(s)");
  EXPECT_EQ(refusal({{{0, 1}, {}}, pairs}), "group 1 has no ranks");
  EXPECT_EQ(refusal({{{0, 1}}, pairs}),
            "rank 2: instruction 1 (all_reduce) names group 1; the plan has 1");
  // Rank 2 runs among {0, 1}, which it is not in.
  EXPECT_EQ(refusal({{{0, 1}, {2, 3}}, [](int r) { return r == 2 ? 0 : r / 2; }}),
            "rank 2: instruction 1 (all_reduce) runs among tensor group [0, 1], which does not "
            "include this rank");
  // Rank 1 runs among every rank while rank 0 waits for it among {0, 1}.
  EXPECT_EQ(refusal({{{0, 1}, {2, 3}}, [](int r) { return r == 1 ? -1 : r / 2; }}),
            "collective 0 of rank 1 is all_reduce of F32 [Tx4] among every rank, but rank 0's "
            "is all_reduce of F32 [Tx4] among tensor group of 2: the ranks would wait for each "
            "other forever");
  // Groups of one size that overlap: rank 2 waits among {1, 2} for rank
  // 1, which runs among {0, 1}.
  EXPECT_EQ(refusal({{{0, 1}, {1, 2}, {0, 3}}, [](int r) { return r < 2 ? 0 : r == 2 ? 1 : 2; }}),
            "collective 0 of rank 2 runs among tensor group [1, 2], but rank 1's runs among "
            "tensor group [0, 1]: the ranks would wait for each other forever");
}

TEST(PlanRanks, AllReduceSumsTheRanksEmbeddings) {
  rt::Collective &job = conformance::ranks();
  const int ranks = job.size(), rank = job.rank();
  // Every rank writes the same plan into a directory of its own.
  fs::path dir = fs::temp_directory_path() / ("moe-plan-ranks-" + std::to_string(::getpid()));
  writePlan(dir, ranks);
  if (ranks > 1) // another rank's file: this rank never opens it
    fs::remove(dir / ("weights-" + std::to_string((rank + 1) % ranks) + ".bin"));
  const int32_t tokens[kMaxTokens] = {3, 1};
  auto logits = step(dir, tokens);
  ASSERT_TRUE(logits) << logits.status().message();
  for (int t = 0; t < kMaxTokens; ++t)
    for (int c = 0; c < kCols; ++c) {
      float want = 0; // the sum over ranks, in the same order on every rank
      for (int r = 0; r < ranks; ++r)
        want += tableValue(r, tokens[t], c);
      EXPECT_EQ((*logits)[size_t(t * kCols + c)], want) << "token " << t << " column " << c;
    }
  fs::remove_all(dir);
}

} // namespace
