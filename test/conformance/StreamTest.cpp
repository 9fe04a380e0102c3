// Streams and events of the device under test: a wait really orders work
// across streams, streams really run at the same time, a failure is
// reported by synchronize and does not leave another stream waiting.
#include "Ranks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace {

using moe::conformance::device;
namespace rt = moe::rt;

/// Host work that sleeps, then stores `value` into `slot`.
std::function<rt::Status()> slowStore(std::atomic<int> &slot, int value) {
  return [&slot, value] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    slot = value;
    return rt::Status::ok();
  };
}

/// What stream `s` sees of `x` when its earlier work has run.
int seenBy(rt::Stream &s, const std::atomic<int> &x) {
  int seen = -1;
  EXPECT_TRUE(s.enqueueHost([&] {
    seen = x.load();
    return rt::Status::ok();
  }));
  EXPECT_TRUE(s.synchronize());
  return seen;
}

TEST(Streams, AWaitOrdersTheCallersStreamAfterAnotherStream) {
  std::atomic<int> x{0};
  auto e = device().createEvent();
  ASSERT_TRUE(device().stream(1).enqueueHost(slowStore(x, 1)));
  ASSERT_TRUE(device().stream(1).record(*e));
  ASSERT_TRUE(device().stream(0).wait(*e));
  EXPECT_EQ(seenBy(device().stream(0), x), 1);
  ASSERT_TRUE(device().stream(1).synchronize());
}

TEST(Streams, AWaitOrdersOneWorkerStreamAfterAnother) {
  std::atomic<int> x{0}, seen{-1};
  auto e = device().createEvent();
  ASSERT_TRUE(device().stream(1).enqueueHost(slowStore(x, 7)));
  ASSERT_TRUE(device().stream(1).record(*e));
  ASSERT_TRUE(device().stream(2).wait(*e));
  ASSERT_TRUE(device().stream(2).enqueueHost([&] {
    seen = x.load();
    return rt::Status::ok();
  }));
  ASSERT_TRUE(device().stream(2).synchronize());
  EXPECT_EQ(seen.load(), 7);
  ASSERT_TRUE(device().stream(1).synchronize());
}

TEST(Streams, StreamsWithoutAnEventRunConcurrently) {
  // Stream 1 sleeps before storing; the caller, not waiting, sees nothing
  // yet: the work of stream 1 is not run inline.
  std::atomic<int> x{0};
  ASSERT_TRUE(device().stream(1).enqueueHost(slowStore(x, 1)));
  EXPECT_EQ(x.load(), 0);
  ASSERT_TRUE(device().stream(1).synchronize());
  EXPECT_EQ(x.load(), 1);
}

TEST(Streams, AWaitTakesTheLatestRecordBeforeIt) {
  // Reused events (one per plan instruction, every step): a wait orders
  // after the record enqueued last before it, not an older one.
  std::atomic<int> x{0};
  auto e = device().createEvent();
  ASSERT_TRUE(device().stream(1).record(*e));
  ASSERT_TRUE(device().stream(1).synchronize());
  ASSERT_TRUE(device().stream(1).enqueueHost(slowStore(x, 2)));
  ASSERT_TRUE(device().stream(1).record(*e));
  ASSERT_TRUE(device().stream(0).wait(*e));
  EXPECT_EQ(seenBy(device().stream(0), x), 2);
  ASSERT_TRUE(device().stream(1).synchronize());
}

TEST(Streams, AFailureIsReportedAndDoesNotStrandAWaiter) {
  auto e = device().createEvent();
  ASSERT_TRUE(device().stream(1).enqueueHost([] { return rt::Status::error("boom"); }));
  ASSERT_TRUE(device().stream(1).record(*e));
  ASSERT_TRUE(device().stream(2).wait(*e)); // must not hang
  ASSERT_TRUE(device().stream(2).synchronize());
  rt::Status st = device().stream(1).synchronize();
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "stream 1: boom");
  EXPECT_TRUE(device().stream(1).synchronize()); // reported once
}

TEST(Streams, EventSynchronizeWaitsForTheRecord) {
  std::atomic<int> x{0};
  auto e = device().createEvent();
  ASSERT_TRUE(device().stream(3).enqueueHost(slowStore(x, 5)));
  ASSERT_TRUE(device().stream(3).record(*e));
  ASSERT_TRUE(e->synchronize());
  EXPECT_EQ(x.load(), 5);
}

} // namespace
