// Folding plan.record / plan.wait into instructions keeps the order between
// launches exactly. Random programs over 2-4 streams: the order of every
// pair of launches in the dialect form, by plain graph reachability, equals
// their order in the folded (format) form by the runtime's vector clocks.
#include "compiler/target/EventFolding.h"
#include "moe/abi/Schedule.h"

#include <gtest/gtest.h>

#include <random>

namespace {

using moe::EventFolding;
using moe::rt::HappensBefore;
using moe::rt::ScheduleStep;

enum class Kind { Launch, Record, Wait };
struct Op {
  Kind kind;
  int stream;
  int64_t event = -1; ///< record: the event it defines; wait: the one it waits for
};

/// a -> b: b follows a on its stream, or b waits for the event a records.
std::vector<std::vector<bool>> reachability(const std::vector<Op> &ops) {
  const size_t n = ops.size();
  std::vector<std::vector<size_t>> next(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      if (ops[j].stream == ops[i].stream) {
        next[i].push_back(j);
        break;
      }
    }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (ops[i].kind == Kind::Record && ops[j].kind == Kind::Wait && ops[j].event == ops[i].event)
        next[i].push_back(j);
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
  for (size_t s = 0; s < n; ++s) {
    std::vector<size_t> todo = {s};
    while (!todo.empty()) {
      size_t i = todo.back();
      todo.pop_back();
      for (size_t j : next[i])
        if (!reach[s][j]) {
          reach[s][j] = true;
          todo.push_back(j);
        }
    }
  }
  return reach;
}

std::vector<Op> randomProgram(std::mt19937 &rng) {
  const int streams = 2 + int(rng() % 3);
  const size_t length = 5 + rng() % 40;
  std::vector<Op> ops;
  std::vector<std::pair<int64_t, int>> recorded; // event, stream
  for (size_t i = 0; i < length; ++i) {
    const int stream = int(rng() % unsigned(streams));
    const unsigned pick = rng() % 10;
    if (pick < 3) {
      recorded.push_back({int64_t(recorded.size()), stream});
      ops.push_back({Kind::Record, stream, recorded.back().first});
    } else if (pick < 6 && !recorded.empty()) {
      auto [event, from] = recorded[rng() % recorded.size()];
      if (from != stream) // the dialect refuses a wait on the recording stream
        ops.push_back({Kind::Wait, stream, event});
    } else {
      ops.push_back({Kind::Launch, stream});
    }
  }
  return ops;
}

TEST(EventFolding, KeepsTheOrderBetweenLaunches) {
  std::mt19937 rng(20261130);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<Op> ops = randomProgram(rng);
    EventFolding fold;
    std::vector<size_t> launchOp;          // instruction -> dialect op
    std::vector<std::vector<uint32_t>> waits; // instruction -> its waits
    std::vector<int> stream;
    for (size_t i = 0; i < ops.size(); ++i) {
      switch (ops[i].kind) {
      case Kind::Launch:
        waits.push_back(fold.launch(ops[i].stream));
        launchOp.push_back(i);
        stream.push_back(ops[i].stream);
        break;
      case Kind::Record:
        fold.record(ops[i].event, ops[i].stream);
        break;
      case Kind::Wait:
        fold.wait(ops[i].event, ops[i].stream);
        break;
      }
    }
    // The format form: per instruction, its waits, itself, its records.
    std::vector<ScheduleStep> steps;
    std::vector<size_t> launchStep;
    std::vector<int> recorded(fold.events(), 0);
    for (size_t k = 0; k < launchOp.size(); ++k) {
      for (uint32_t w : waits[k]) {
        ScheduleStep s;
        s.stream = stream[k];
        s.wait = w;
        steps.push_back(s);
      }
      ScheduleStep launch;
      launch.stream = stream[k];
      launchStep.push_back(steps.size());
      steps.push_back(launch);
      for (uint32_t r : fold.records(k)) {
        ASSERT_LT(r, fold.events());
        ++recorded[r];
        ScheduleStep s;
        s.stream = stream[k];
        s.record = r;
        steps.push_back(s);
      }
    }
    for (uint32_t e = 0; e < fold.events(); ++e)
      EXPECT_EQ(recorded[e], 1) << "event " << e << " (trial " << trial << ")";
    auto order = HappensBefore::compute(steps);
    ASSERT_TRUE(order) << order.status().message() << " (trial " << trial << ")";
    auto reach = reachability(ops);
    for (size_t a = 0; a < launchOp.size(); ++a)
      for (size_t b = a + 1; b < launchOp.size(); ++b)
        ASSERT_EQ(order->ordered(launchStep[a], launchStep[b]), reach[launchOp[a]][launchOp[b]])
            << "launches " << a << " and " << b << " (trial " << trial << ")";
  }
}

TEST(EventFolding, AWaitWithoutALaterLaunchIsDroppedButRelayed) {
  // s0: launch 0; record A. s1: wait A; record B (no launch between).
  // s2: wait B; launch 1. Launch 1 must wait for launch 0's event.
  EventFolding fold;
  EXPECT_TRUE(fold.launch(0).empty());
  fold.record(/*A*/ 0, 0);
  fold.wait(0, 1);
  fold.record(/*B*/ 1, 1);
  fold.wait(1, 2);
  std::vector<uint32_t> waits = fold.launch(2);
  ASSERT_EQ(fold.records(0).size(), 1u);
  EXPECT_EQ(waits, fold.records(0));
  EXPECT_EQ(fold.events(), 1u);
}

TEST(EventFolding, ARecordOnAnIdleStreamOrdersNothing) {
  EventFolding fold;
  fold.record(0, 1); // stream 1 has done nothing
  fold.wait(0, 0);
  EXPECT_TRUE(fold.launch(0).empty());
  EXPECT_EQ(fold.events(), 0u);
}

} // namespace
