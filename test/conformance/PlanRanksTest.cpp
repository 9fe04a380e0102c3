// A plan's rank programs run by the job's ranks: each rank loads its own
// program and maps only its own weight file; the all_reduce instruction
// sums across the ranks. Alone, under mpirun -np 2 and -np 4 (the plan is
// built here for the job's size), against the closed form.
#include "Ranks.h"
#include "moe/runtime/Checksum.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/PlanFormat.h"
#include "moe/runtime/Session.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

namespace fs = std::filesystem;
namespace fb = moe::plan;
using namespace moe;

namespace {

constexpr int kVocab = 4, kCols = 4, kMaxTokens = 2;

/// Rank r's embedding table: row v is 10 v + c + 100 r.
float tableValue(int rank, int v, int c) { return float(10 * v + c + 100 * rank); }

/// Per rank: embedding of the tokens from its own table into `rows`, then
/// all_reduce of `rows` into `sum` (the logits).
void writePlan(const fs::path &dir, int ranks) {
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
                                    nullptr, nullptr, nullptr, fb::CollectiveOp::AllReduce)};
    programs.push_back(fb::CreateProgramDirect(b, r, &insts, &inputs, &outputs, 64 + rowBytes,
                                               sizeof table));
  }
  std::vector<flatbuffers::Offset<fb::KvLayer>> layers;
  auto config = fb::CreateModelConfigDirect(b, "mixtral", kVocab, kCols, 1, 1, 1, 8);
  auto kv = fb::CreateKvCacheSpecDirect(b, fb::DType::F32, 8, &layers);
  fb::FinishPlanBuffer(b, fb::CreatePlanDirect(b, rt::kFormatMajor, rt::kFormatMinor, config,
                                               &tensors, &files, &programs, kMaxTokens, kv));
  std::ofstream out(dir / rt::kPlanFileName, std::ios::binary);
  out.write(reinterpret_cast<const char *>(b.GetBufferPointer()), b.GetSize());
  out << rt::planTrailer(b.GetBufferPointer(), b.GetSize());
}

TEST(PlanRanks, AllReduceSumsTheRanksEmbeddings) {
  rt::Collective &job = conformance::ranks();
  const int ranks = job.size(), rank = job.rank();
  // Every rank writes the same plan into a directory of its own.
  fs::path dir = fs::temp_directory_path() / ("moe-plan-ranks-" + std::to_string(::getpid()));
  writePlan(dir, ranks);
  if (ranks > 1) // another rank's file: this rank never opens it
    fs::remove(dir / ("weights-" + std::to_string((rank + 1) % ranks) + ".bin"));
  rt::LoadOptions options;
  options.rank = rank;
  auto loaded = rt::LoadedPlan::open(dir.string(), options);
  ASSERT_TRUE(loaded) << loaded.status().message();
  rt::SessionOptions so;
  so.ranks = &job;
  auto session = rt::Session::create(**loaded, conformance::device(), so);
  ASSERT_TRUE(session) << session.status().message();
  const int32_t tokens[kMaxTokens] = {3, 1}, positions[kMaxTokens] = {0, 1};
  float logits[kMaxTokens * kCols];
  ASSERT_TRUE((*session)->forward(tokens, positions, kMaxTokens, logits));
  for (int t = 0; t < kMaxTokens; ++t)
    for (int c = 0; c < kCols; ++c) {
      float want = 0; // the sum over ranks, in the same order on every rank
      for (int r = 0; r < ranks; ++r)
        want += tableValue(r, tokens[t], c);
      EXPECT_EQ(logits[t * kCols + c], want) << "token " << t << " column " << c;
    }
  fs::remove_all(dir);
}

} // namespace
