//===- EventFolding.h - plan.record / plan.wait onto instructions -*- C++ -*-===//
//
// In the plan dialect, `plan.record` and `plan.wait` are ops of their own;
// in the plan format an instruction carries the events its stream waits for
// before it runs and those it records after (what a GPU stream does around
// a kernel). This folds one into the other, in program order, keeping the
// order between launches exactly:
//
// - a wait attaches to the next launch of its stream (with none, it orders
//   nothing on that stream and is dropped, but a later record of that
//   stream still passes it on, see below);
// - a record becomes an event recorded after the last launch of its stream,
//   plus the waits its stream made since that launch (a record after a wait
//   and no launch relays the waited events). Waiting for the record is
//   waiting for all of these. A stream without launches or waits records
//   nothing: waiting for it orders nothing.
//
// Plain C++ over integer ids, so that it is unit tested by itself.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_TARGET_EVENTFOLDING_H
#define MOE_COMPILER_TARGET_EVENTFOLDING_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace moe {

class EventFolding {
public:
  /// The next launch, on `stream`, becomes the next instruction (numbered
  /// from 0). Returns the events it waits for.
  std::vector<uint32_t> launch(int stream);
  /// `plan.record` of dialect event `event` on `stream`.
  void record(int64_t event, int stream);
  /// `plan.wait` for dialect event `event` (recorded earlier) on `stream`.
  void wait(int64_t event, int stream);

  /// The events instruction `index` records after it runs.
  std::vector<uint32_t> records(size_t index) const;
  /// How many format events there are (numbered 0..n-1).
  uint32_t events() const { return next_; }

private:
  /// The format event recorded after instruction `index`, made on first use.
  uint32_t eventAfter(size_t index);

  uint32_t next_ = 0;
  size_t instructions_ = 0;
  std::map<size_t, uint32_t> after_;               ///< instruction -> its event
  std::map<int, size_t> lastLaunch_;               ///< stream -> instruction
  std::map<int, std::set<uint32_t>> pending_;      ///< stream -> waits since its last launch
  std::map<int64_t, std::set<uint32_t>> meaning_;  ///< dialect event -> format events
};

} // namespace moe

#endif
