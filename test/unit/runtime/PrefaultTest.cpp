// The weights' prefault after load (LoadOptions::prefault): every mode runs
// the trained example to the same logits, and after a sync prefault every
// page of the weight file is resident and mapped; a verifying one checks
// every weight byte. (A plan closed while its background prefault runs:
// PlanLoaderTest.ClosedWhileBackgroundPrefaultRuns, ClosedWhileVerifying;
// flipped bytes: PlanLoaderTest.NamesTheWeightWhoseByteFlipped.)
// And the CPU device's makeResident brings in the pages of a range of a
// buffer; a session uses it for each KV block a step writes (unless told
// not to), so that blocks no sequence reached take no memory.
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/Session.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>
#include <vector>

using namespace moe::rt;

namespace {

std::unique_ptr<LoadedPlan> open(Prefault mode) {
  LoadOptions o;
  o.prefault = mode;
  auto p = LoadedPlan::open(MOE_KJV_PLAN, o);
  EXPECT_TRUE(p) << p.status().message();
  return p ? p.take() : nullptr;
}

/// The logits of one prefill of 16 tokens.
std::vector<float> logits(const LoadedPlan &plan) {
  auto device = createCpuDevice();
  auto session = Session::create(plan, *device);
  EXPECT_TRUE(session) << session.status().message();
  if (!session)
    return {};
  Session &s = **session;
  const int64_t n = std::min<int64_t>(16, s.maxBatchTokens());
  std::vector<int32_t> tokens, positions;
  for (int64_t i = 0; i < n; ++i) {
    tokens.push_back(int32_t(3 + (11 * i) % 250));
    positions.push_back(int32_t(i));
  }
  std::vector<float> out(size_t(n * s.vocabSize()));
  EXPECT_TRUE(s.forward(tokens.data(), positions.data(), n, out.data()));
  return out;
}

/// Pages of [p, p + n) resident in the page cache (mincore).
size_t residentPages(const void *p, size_t n) {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((n + page - 1) / page);
  if (::mincore(const_cast<void *>(p), n, v.data()) != 0)
    return 0;
  size_t resident = 0;
  for (unsigned char c : v)
    resident += c & 1;
  return resident;
}

/// The Rss of the mapping that starts at `p` (/proc/self/smaps): bytes
/// mapped by this process's page tables. -1 when not found.
long long mappedBytes(const void *p) {
  std::ifstream smaps("/proc/self/smaps");
  char start[32];
  std::snprintf(start, sizeof start, "%lx-", (unsigned long)(uintptr_t)p);
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(start, 0) == 0)
      in = true;
    else if (in && line.rfind("Rss:", 0) == 0)
      return std::stoll(line.substr(4)) * 1024;
  }
  return -1;
}

TEST(PrefaultTest, EveryModeRunsToTheSameLogits) {
  auto off = open(Prefault::Off);
  ASSERT_TRUE(off);
  EXPECT_EQ(off->prefault().state, PrefaultProgress::State::Off);
  const std::vector<float> want = logits(*off);
  ASSERT_FALSE(want.empty());
  for (Prefault mode : {Prefault::Background, Prefault::Sync}) {
    SCOPED_TRACE(prefaultName(mode));
    auto plan = open(mode);
    ASSERT_TRUE(plan);
    // Right after open, or while the background thread still works.
    EXPECT_EQ(logits(*plan), want);
    plan->waitForPrefault();
    const PrefaultProgress p = plan->prefault();
    EXPECT_EQ(p.mode, mode);
    EXPECT_EQ(p.state, PrefaultProgress::State::Done);
    EXPECT_GT(p.bytes, 0u);
    EXPECT_EQ(p.populated, p.bytes);
    EXPECT_GE(p.seconds, 0.0);
    EXPECT_EQ(logits(*plan), want);
  }
}

TEST(PrefaultTest, SyncLeavesEveryPageResidentAndMapped) {
  auto plan = open(Prefault::Sync);
  ASSERT_TRUE(plan);
  // Done before open returned.
  EXPECT_EQ(plan->prefault().state, PrefaultProgress::State::Done);
  const uint64_t size = plan->plan().weight_files()->Get(0)->size();
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const void *data = plan->fileData(0);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(residentPages(data, size), (size + page - 1) / page);
  // In this process's page tables, not just the page cache.
  EXPECT_GE(mappedBytes(data), (long long)(size / page * page));
}

/// The bytes of the plan's weights, their sizes summed.
uint64_t weightBytes(const LoadedPlan &plan) {
  uint64_t bytes = 0;
  for (const auto *t : *plan.plan().tensors())
    if (t->storage() == moe::plan::Storage::Weight)
      bytes += t->size();
  return bytes;
}

// verifyWeights checks every weight before open returns, as a sync
// prefault that verifies, whatever the prefault mode; an Off prefault maps
// nothing in.
TEST(PrefaultTest, OffMapsNothingAndVerifyingReadsEverything) {
  auto off = open(Prefault::Off);
  ASSERT_TRUE(off);
  EXPECT_EQ(mappedBytes(off->fileData(0)), 0);
  off->waitForPrefault(); // returns at once
  for (Prefault mode : {Prefault::Off, Prefault::Background}) {
    SCOPED_TRACE(prefaultName(mode));
    LoadOptions o;
    o.prefault = mode;
    o.verifyWeights = true;
    auto verified = LoadedPlan::open(MOE_KJV_PLAN, o);
    ASSERT_TRUE(verified) << verified.status().message();
    const PrefaultProgress p = (*verified)->prefault();
    EXPECT_EQ(p.mode, Prefault::Sync);
    EXPECT_TRUE(p.weightsVerified());
    EXPECT_EQ(p.checksum, moe::plan::WeightChecksum::XXH3_64); // a plan compiled here
    EXPECT_EQ(p.verified, weightBytes(**verified));
    const uint64_t size = (*verified)->plan().weight_files()->Get(0)->size();
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    EXPECT_GE(mappedBytes((*verified)->fileData(0)), (long long)(size / page * page));
  }
}

// The trained example, verified while prefaulted in the background, runs
// meanwhile to the logits of an unverified plan; in the end every byte of
// every weight was checked.
TEST(PrefaultTest, VerifyingInTheBackgroundRunsToTheSameLogits) {
  auto off = open(Prefault::Off);
  ASSERT_TRUE(off);
  const std::vector<float> want = logits(*off);
  ASSERT_FALSE(want.empty());
  LoadOptions o;
  o.verifyWhilePrefaulting = true;
  auto plan = LoadedPlan::open(MOE_KJV_PLAN, o);
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(logits(**plan), want);
  (*plan)->waitForPrefault();
  const PrefaultProgress p = (*plan)->prefault();
  EXPECT_EQ(p.mode, Prefault::Background);
  EXPECT_TRUE(p.weightsVerified());
  EXPECT_EQ(p.weightBytes, weightBytes(**plan));
  EXPECT_EQ(p.verified, p.weightBytes);
  EXPECT_EQ(p.populated, p.bytes);
}

TEST(PrefaultTest, CpuBuffersMadeResidentHaveEveryPage) {
  auto device = createCpuDevice();
  const size_t huge = size_t(2) << 20, page = size_t(::sysconf(_SC_PAGESIZE));
  for (size_t bytes : {huge, 3 * huge + 123}) {
    SCOPED_TRACE(bytes);
    auto b = device->allocate(bytes, MemoryKind::DeviceLocal);
    ASSERT_TRUE(b) << b.status().message();
    const void *data = (*b)->data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % huge, 0u); // huge pages may back it
    // Its pages dropped (the allocator may hand back memory a buffer before
    // used), nothing but makeResident brings them in: a range's pages (a
    // huge page may bring the rest of its 2 MiB), then all.
    ASSERT_EQ(0, ::madvise(const_cast<void *>(data), bytes / page * page, MADV_DONTNEED));
    ASSERT_LE(residentPages(data, bytes), 1u); // the last, partial page may be shared
    ASSERT_TRUE(device->makeResident(**b, page, 2 * page));
    const size_t some = residentPages(data, bytes);
    EXPECT_GE(some, 2u);
    EXPECT_LE(some, huge / page + 1) << some;
    ASSERT_TRUE(device->makeResident(**b, 0, bytes));
    EXPECT_EQ(residentPages(data, bytes), (bytes + page - 1) / page);
    EXPECT_FALSE(device->makeResident(**b, bytes, 1));
  }
}

/// This process's resident memory (/proc/self/statm), in bytes.
long long residentBytes() {
  long long pages = 0, rss = 0;
  std::ifstream("/proc/self/statm") >> pages >> rss;
  return rss * (long long)::sysconf(_SC_PAGESIZE);
}

// A session backs its KV cache at creation unless told not to (moe-run and
// moe-serve --prefault off): a pool of 64 MiB or more, resident or not.
TEST(PrefaultTest, SessionsBackOnlyTheKvBlocksTheyWrite) {
  auto plan = open(Prefault::Off);
  ASSERT_TRUE(plan);
  auto device = createCpuDevice();
  auto probe = Session::create(*plan, *device);
  ASSERT_TRUE(probe) << probe.status().message();
  const int64_t blocks = int64_t((256ull << 20) / (*probe)->kvBlockBytes()) + 1;
  probe->reset();
  for (bool resident : {false, true}) {
    SCOPED_TRACE(resident);
    SessionOptions o;
    o.numBlocks = blocks;
    o.residentKvCache = resident;
    const long long before = residentBytes();
    auto s = Session::create(*plan, *device, o);
    ASSERT_TRUE(s) << s.status().message();
    const long long kv = (long long)(*s)->kvBytes();
    EXPECT_LT(residentBytes() - before, kv / 4);
    // A step of two sequences of one token, in the pool's first and last
    // blocks: those two are backed (huge pages may back up to 2 MiB of each
    // KV array), not the pool.
    const int32_t tokens[2] = {1, 2}, positions[2] = {0, 0};
    const int32_t first = 0, last = int32_t(blocks - 1);
    const int32_t *tables[2] = {&first, &last};
    std::vector<float> logits(size_t(2 * (*s)->vocabSize()));
    ASSERT_TRUE((*s)->forward(Batch{tokens, positions, tables, 2}, logits.data()));
    EXPECT_LT(residentBytes() - before, kv / 4);
    // A block outside the pool is refused, not touched.
    const int32_t outside = int32_t(blocks);
    const int32_t *bad[2] = {&first, &outside};
    Status st = (*s)->forward(Batch{tokens, positions, bad, 2}, logits.data());
    EXPECT_FALSE(st);
    EXPECT_NE(st.message().find("writes KV block " + std::to_string(blocks) + ", outside the pool"),
              std::string::npos)
        << st.message();
  }
}

TEST(PrefaultTest, NamesRoundTrip) {
  for (Prefault m : {Prefault::Off, Prefault::Background, Prefault::Sync})
    EXPECT_EQ(parsePrefault(prefaultName(m)), m);
  EXPECT_FALSE(parsePrefault("populate"));
  EXPECT_STREQ(prefaultStateName(PrefaultProgress::State::Running), "running");
  EXPECT_STREQ(prefaultStateName(PrefaultProgress::State::Failed), "failed");
}

} // namespace
