//===- Trace.h - timelines of a rank's streams ------------------*- C++ -*-===//
//
// What each stream of a rank ran, and when: one span per launch and
// collective, timed where the stream runs it (host marks enqueued before
// and after the work), written as Chrome / Perfetto trace-event JSON
// ("X" events; pid = rank, tid = stream). Times are microseconds from the
// trace's origin, which every rank sets right after a collective they all
// joined, so that the ranks' tracks line up.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TRACE_H
#define MOE_RUNTIME_TRACE_H

#include "moe/runtime/Hal.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace moe::rt {

class Trace {
public:
  using Clock = std::chrono::steady_clock;
  /// What a span says besides its times.
  struct Label {
    std::string name;     ///< "linear", "all_reduce"
    std::string category; ///< "launch", "collective"
    std::string location; ///< the plan instruction's source location
    int64_t tokens = 0;   ///< of the step
    int64_t step = 0;     ///< the session's steps before this one
  };

  Trace() : origin_(Clock::now()) {}
  /// Times from now on count from here.
  void restart();
  /// Runs `enqueue` (which enqueues work on `stream`, stream number
  /// `streamIndex`) between two host marks on the stream, and adds the span
  /// between them once the stream has run both.
  Status time(Stream &stream, int streamIndex, Label label,
              const std::function<Status()> &enqueue);
  /// A span of `durationUs` from `startUs` (microseconds from the origin)
  /// on stream `stream`: a timeline from elsewhere (the simulator's).
  void add(Label label, int stream, double startUs, double durationUs);
  /// This rank's spans as trace-event objects, comma-separated, with
  /// pid `rank` (and metadata naming the rank and its streams).
  std::string events(int rank) const;
  size_t spans() const;

private:
  struct Span {
    Label label;
    int stream;
    double startUs, durationUs;
  };
  mutable std::mutex m_;
  Clock::time_point origin_;
  std::vector<Span> spans_;
};

/// A trace-event document of the ranks' events (each from Trace::events).
std::string traceDocument(const std::vector<std::string> &rankEvents);

} // namespace moe::rt

#endif
