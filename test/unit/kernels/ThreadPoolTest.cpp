// The kernels' thread pool: every chunk runs exactly once, whatever the
// thread count, the chunk count and the regions running at the same time.
#include "kernels/cpu/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace {

using namespace moe::cpu;

/// Runs a region of `count` chunks; returns how often each ran and how many
/// threads took part.
std::pair<std::vector<int>, int> runRegion(int64_t count) {
  std::vector<std::atomic<int>> runs(static_cast<size_t>(count));
  std::atomic<int> bodies{0};
  parallelChunks(count, [&](Chunks &chunks) {
    ++bodies;
    for (int64_t c; chunks.next(c);)
      ++runs[size_t(c)];
  });
  std::vector<int> out;
  for (auto &r : runs)
    out.push_back(r.load());
  return {out, bodies.load()};
}

class ThreadPoolTest : public ::testing::Test {
protected:
  void TearDown() override { setKernelThreads(saved_); }
  int saved_ = kernelThreads();
};

TEST_F(ThreadPoolTest, EveryChunkRunsOnce) {
  for (int threads : {1, 2, 3, 5}) {
    setKernelThreads(threads);
    ASSERT_EQ(kernelThreads(), threads);
    for (int64_t count : {0, 1, 2, 3, 7, 64, 1000}) {
      auto [runs, bodies] = runRegion(count);
      EXPECT_EQ(runs, std::vector<int>(size_t(count), 1)) << threads << " threads, " << count;
      EXPECT_LE(bodies, std::max<int64_t>(1, std::min<int64_t>(threads, count)));
    }
  }
}

TEST_F(ThreadPoolTest, ManySmallRegionsInARow) {
  // Helpers that wake late find the region done and claim nothing from the
  // next one by mistake.
  setKernelThreads(3);
  for (int i = 0; i < 20000; ++i) {
    auto [runs, bodies] = runRegion(1 + i % 5);
    ASSERT_EQ(runs, std::vector<int>(size_t(1 + i % 5), 1)) << "region " << i;
  }
}

TEST_F(ThreadPoolTest, RegionsFromTwoThreadsBothFinish) {
  // Two streams: one region has the helpers, the other runs on its own thread.
  setKernelThreads(2);
  std::atomic<bool> bad{false};
  auto stream = [&] {
    for (int i = 0; i < 3000; ++i)
      if (runRegion(1 + i % 9).first != std::vector<int>(size_t(1 + i % 9), 1))
        bad = true;
  };
  std::thread a(stream), b(stream);
  a.join();
  b.join();
  EXPECT_FALSE(bad);
}

TEST_F(ThreadPoolTest, ResizingBetweenRegions) {
  for (int i = 0; i < 50; ++i) {
    setKernelThreads(1 + i % 4);
    ASSERT_EQ(runRegion(17).first, std::vector<int>(17, 1));
  }
  setKernelThreads(0); // one per core
  EXPECT_GE(kernelThreads(), 1);
}

TEST_F(ThreadPoolTest, ForClaimedCoversTheRangeInGrains) {
  setKernelThreads(3);
  for (int64_t n : {1, 5, 100, 101}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    parallelChunks(chunksOf(n, 4), [&](Chunks &chunks) {
      forClaimed(chunks, n, 4, [&](int64_t i) { ++seen[size_t(i)]; });
    });
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(seen[size_t(i)].load(), 1) << n << " " << i;
  }
}

} // namespace
