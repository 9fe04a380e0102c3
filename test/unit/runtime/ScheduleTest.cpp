// Happens-before over streams and events, and races, on small schedules
// whose answer is worked out by hand.
#include "moe/abi/Schedule.h"

#include <gtest/gtest.h>

namespace {

using moe::rt::findRace;
using moe::rt::HappensBefore;
using moe::rt::ScheduleStep;

ScheduleStep launch(int stream, std::vector<int64_t> reads, std::vector<int64_t> writes) {
  ScheduleStep s;
  s.stream = stream;
  s.reads = std::move(reads);
  s.writes = std::move(writes);
  return s;
}
ScheduleStep record(int stream, int64_t event) {
  ScheduleStep s;
  s.stream = stream;
  s.record = event;
  return s;
}
ScheduleStep wait(int stream, int64_t event) {
  ScheduleStep s;
  s.stream = stream;
  s.wait = event;
  return s;
}
bool same(int64_t a, int64_t b) { return a == b; }

TEST(Schedule, OneStreamNeverRaces) {
  std::vector<ScheduleStep> steps = {launch(0, {}, {1}), launch(0, {1}, {1})};
  auto hb = HappensBefore::compute(steps);
  ASSERT_TRUE(hb);
  EXPECT_FALSE(hb->multiStream());
  EXPECT_FALSE(findRace(steps, *hb, same));
}

TEST(Schedule, UnorderedWriteThenReadRaces) {
  std::vector<ScheduleStep> steps = {launch(0, {}, {7}), launch(1, {7}, {8})};
  auto hb = HappensBefore::compute(steps);
  ASSERT_TRUE(hb);
  EXPECT_FALSE(hb->ordered(0, 1));
  auto race = findRace(steps, *hb, same);
  ASSERT_TRUE(race);
  EXPECT_EQ(race->first, 0u);
  EXPECT_EQ(race->second, 1u);
  EXPECT_EQ(race->bufferA, 7);
  EXPECT_EQ(race->bufferB, 7);
}

TEST(Schedule, EventOrdersAcrossStreams) {
  std::vector<ScheduleStep> steps = {launch(0, {}, {7}), record(0, 0), wait(1, 0),
                                     launch(1, {7}, {8})};
  auto hb = HappensBefore::compute(steps);
  ASSERT_TRUE(hb);
  EXPECT_TRUE(hb->ordered(0, 3));
  EXPECT_FALSE(findRace(steps, *hb, same));
  // The wait orders only what the record covered: a later write on stream 0
  // still races with the read on stream 1.
  steps.insert(steps.begin() + 2, launch(0, {}, {7}));
  hb = HappensBefore::compute(steps);
  ASSERT_TRUE(hb);
  auto race = findRace(steps, *hb, same);
  ASSERT_TRUE(race);
  EXPECT_EQ(race->first, 2u);
  EXPECT_EQ(race->second, 4u);
}

TEST(Schedule, OrderIsTransitiveThroughAThirdStream) {
  std::vector<ScheduleStep> steps = {launch(0, {}, {1}), record(0, 0), wait(2, 0),
                                     launch(2, {}, {2}), record(2, 1),  wait(1, 1),
                                     launch(1, {1, 2}, {3})};
  auto hb = HappensBefore::compute(steps);
  ASSERT_TRUE(hb);
  EXPECT_TRUE(hb->ordered(0, 6));
  EXPECT_FALSE(findRace(steps, *hb, same));
}

TEST(Schedule, ReadsDoNotRaceWithReads) {
  std::vector<ScheduleStep> steps = {launch(0, {5}, {1}), launch(1, {5}, {2})};
  auto hb = HappensBefore::compute(steps);
  ASSERT_TRUE(hb);
  EXPECT_FALSE(findRace(steps, *hb, same));
}

TEST(Schedule, OverlappingBuffersRace) {
  // Buffers 1 and 2 share bytes (arena aliasing): writing one while the
  // other is read on another stream is a race.
  std::vector<ScheduleStep> steps = {launch(0, {}, {1}), launch(1, {2}, {3})};
  auto hb = HappensBefore::compute(steps);
  ASSERT_TRUE(hb);
  auto race = findRace(steps, *hb, [](int64_t a, int64_t b) {
    return a == b || (std::min(a, b) == 1 && std::max(a, b) == 2);
  });
  ASSERT_TRUE(race);
  EXPECT_EQ(race->bufferA, 1);
  EXPECT_EQ(race->bufferB, 2);
}

TEST(Schedule, MalformedEvents) {
  auto early = HappensBefore::compute({wait(1, 3), record(0, 3)});
  ASSERT_FALSE(early);
  EXPECT_EQ(early.status().message(), "step 0 waits for event 3, which nothing recorded before it");
  auto twice = HappensBefore::compute({record(0, 1), record(1, 1)},
                                      [](size_t i) { return "op #" + std::to_string(i); });
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.status().message(), "event 1 is recorded twice (again by op #1)");
}

} // namespace
