//===- TimelineTest.cpp - link emulation and stream traces ----------------===//
//
// The emulated link holds a collective for the closed form (measured
// against the clock, with a tolerance for a busy machine: only a lower
// bound is tight); a trace times work where its stream runs it.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/LinkEmulation.h"
#include "moe/runtime/Trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <thread>

using namespace moe::rt;

namespace {

double secondsOf(const std::function<void()> &f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(LinkModel, ParsesAndRefuses) {
  auto link = LinkModel::parse("250:0.5");
  ASSERT_TRUE(link);
  EXPECT_DOUBLE_EQ(link->latencyUs, 250);
  EXPECT_DOUBLE_EQ(link->gbPerSecond, 0.5);
  // 250 us + 1e6 bytes / 0.5e9 bytes/s = 2.25 ms.
  EXPECT_NEAR(link->seconds(1000000), 0.00225, 1e-12);
  for (const char *bad : {"", "250", "250:", ":2", "-1:2", "1:0", "1:-3", "x:2", "1:2y", "1:inf"})
    EXPECT_FALSE(LinkModel::parse(bad)) << bad;
  EXPECT_NE(LinkModel::parse("1:0").status().message().find("LATENCY_US:GB_PER_S"),
            std::string::npos);
}

TEST(LinkModel, WireBytesAreTheRingClosedForms) {
  EXPECT_EQ(allReduceWireBytes(1000, 1), 0u);
  EXPECT_EQ(allReduceWireBytes(1000, 2), 1000u);   // 2 x 1/2
  EXPECT_EQ(allReduceWireBytes(1000, 4), 1500u);   // 2 x 3/4
  EXPECT_EQ(allGatherWireBytes(1000, 4), 3000u);   // 3 parts sent on
}

TEST(EmulatedLink, HoldsEachCollectiveOnItsStream) {
  auto device = createCpuDevice();
  // One rank: the wire carries nothing, so each collective holds for the
  // latency alone; on a worker stream the caller is not held.
  auto link = emulateLink(createLocalCollective(), *LinkModel::parse("20000:1"));
  EXPECT_EQ(link->size(), 1);
  EXPECT_NE(link->name().find("emulated link"), std::string::npos);
  float x[4] = {1, 2, 3, 4};
  Stream &worker = device->stream(1);
  double enqueue = secondsOf([&] {
    ASSERT_TRUE(link->allReduce(worker, {x, DType::F32, 4}));
    ASSERT_TRUE(link->allReduce(worker, {x, DType::F32, 4}));
  });
  double total = enqueue + secondsOf([&] { ASSERT_TRUE(worker.synchronize()); });
  EXPECT_LT(enqueue, 0.02);  // enqueued, not run by the caller
  EXPECT_GE(total, 0.04);    // two holds of 20 ms
  EXPECT_LT(total, 0.04 + 1.0);
  EXPECT_EQ(x[3], 4);        // one rank's sum is itself
}

TEST(Trace, TimesWorkWhereItsStreamRunsIt) {
  auto device = createCpuDevice();
  Trace trace;
  Stream &worker = device->stream(1);
  // Two spans on a worker stream: the second starts after the first ends,
  // and each lasts as long as its work.
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(trace.time(worker, 1, {"sleep", "launch", "here", 3}, [&] {
      return worker.enqueueHost([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return Status::ok();
      });
    }));
  ASSERT_TRUE(worker.synchronize());
  ASSERT_EQ(trace.spans(), 2u);
  auto events = nlohmann::json::parse("[" + trace.events(7) + "]");
  std::vector<nlohmann::json> spans;
  for (const auto &e : events)
    if (e["ph"] == "X")
      spans.push_back(e);
    else
      EXPECT_EQ(e["ph"], "M");
  ASSERT_EQ(spans.size(), 2u);
  for (const auto &s : spans) {
    EXPECT_EQ(s["pid"], 7);
    EXPECT_EQ(s["tid"], 1);
    EXPECT_EQ(s["name"], "sleep");
    EXPECT_EQ(s["args"]["tokens"], 3);
    EXPECT_GE(s["dur"].get<double>(), 10000.0);
  }
  EXPECT_GE(spans[1]["ts"].get<double>(),
            spans[0]["ts"].get<double>() + spans[0]["dur"].get<double>());
  auto doc = nlohmann::json::parse(traceDocument({trace.events(0), "", trace.events(1)}));
  EXPECT_EQ(doc["traceEvents"].size(), 2 * events.size());
}

} // namespace
