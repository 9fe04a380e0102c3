//===- Schedule.h - happens-before over streams and events ------*- C++ -*-===//
//
// A program's steps run on streams: steps of one stream in program order,
// steps of different streams ordered only through events (a `record` on one
// stream, a `wait` for it on another). This computes that order (vector
// clocks) and finds the first race: two steps on different streams that
// touch overlapping buffers, at least one writing, with no order between
// them. The compiler's schedule verifier and memory planner and the plan
// loader share it, over their own buffers. Plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_SCHEDULE_H
#define MOE_RUNTIME_SCHEDULE_H

#include "moe/abi/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace moe::rt {

/// Rows [T part / parts, T (part + 1) / parts) of a token-led buffer of T
/// rows, rounded down: a micro-batch (one part: every row).
struct RowRange {
  int64_t part = 0, parts = 1;
  /// [first, end) of a step of `tokens` rows.
  int64_t first(int64_t tokens) const { return tokens * part / parts; }
  int64_t end(int64_t tokens) const { return tokens * (part + 1) / parts; }
  /// Whether the two ranges can share a row for some T: the real
  /// intervals [part / parts, (part + 1) / parts) intersect.
  bool intersects(const RowRange &o) const {
    return part * o.parts < (o.part + 1) * parts && o.part * parts < (part + 1) * o.parts;
  }
};

struct ScheduleStep {
  int stream = 0;
  std::vector<int64_t> reads, writes; ///< buffer ids
  int64_t record = -1; ///< records this event after the stream's earlier steps
  int64_t wait = -1;   ///< the stream's later steps wait for this event
};

/// Which steps are ordered before which, across streams.
class HappensBefore {
public:
  /// Checks the events (each recorded once, waited for only after it is
  /// recorded in program order) and computes the order. Errors name a step
  /// by `name` ("step <i>" without it).
  static Expected<HappensBefore> compute(const std::vector<ScheduleStep> &steps,
                                         const std::function<std::string(size_t)> &name = {});

  /// Whether step `a` (earlier in program order) finishes before step `b`
  /// starts on every execution: same stream, or an event chain between.
  bool ordered(size_t a, size_t b) const;
  /// Whether more than one stream is used.
  bool multiStream() const { return streams_ > 1; }

private:
  std::vector<int> stream_;
  std::vector<std::vector<uint32_t>> clock_; ///< per step: steps seen of each stream
  int streams_ = 1;
};

/// Two steps that race on buffers `bufferA` (of step `first`) and `bufferB`.
struct Race {
  size_t first, second;
  int64_t bufferA, bufferB;
};

/// The first race of `steps`, whose buffers overlap as `overlap` says (at
/// least every buffer overlaps itself).
std::optional<Race> findRace(const std::vector<ScheduleStep> &steps, const HappensBefore &order,
                             const std::function<bool(int64_t, int64_t)> &overlap);

} // namespace moe::rt

#endif
