//===- Simulate.h - a plan's step on a hardware profile ---------*- C++ -*-===//
//
// A list schedule of one rank's program: each instruction takes the time
// its cost (PlanCost.h) needs on the hardware (Hardware.h), the longer of
// its FLOPs at the matmul rate and its bytes at the memory bandwidth, plus
// the launch overhead; a collective, the link's latency + wire bytes /
// bandwidth. It starts when its stream is free, the events it waits for
// are recorded, and (on a CPU, whose host thread runs stream 0) when the
// host has issued it. The ranks are taken to be alike: one rank's
// timeline is the job's.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_PLANCOST_SIMULATE_H
#define MOE_TOOLS_PLANCOST_SIMULATE_H

#include "tools/plan-cost/Hardware.h"

#include <map>
#include <string>
#include <vector>

namespace moe::cost {

struct SimulatedInstruction {
  uint32_t index = 0; ///< in the program
  int stream = 0;
  double start = 0, end = 0; ///< seconds from the step's start
};

struct Simulation {
  std::vector<SimulatedInstruction> instructions; ///< in program order
  double step = 0;   ///< seconds until every stream is done
  double serial = 0; ///< the same instructions one after another
  std::vector<double> busy; ///< per stream: seconds of work
  /// The chain of instructions (indices into `instructions`) that ends
  /// last, each started by the one before (its stream or an event).
  std::vector<size_t> criticalPath;
};

/// Times measured on a run (a trace of moe-run or moe-bench --trace) of the
/// plan without micro-batches: per (kernel or collective, plan location),
/// the seconds of each of that key in program order, in each rank's first
/// step of a given number of tokens. A launch takes the longest over the
/// ranks (a collective waits for the slowest rank), a micro-batch's scaled
/// by the cost model's ratio of part to whole; a collective takes the
/// shortest (the run's own transfer, which the last rank to arrive waits
/// for least), scaled by its part of the wire bytes, plus the link's time.
struct MeasuredLaunches {
  int64_t tokens = 0;
  std::map<std::pair<std::string, std::string>, std::vector<double>> seconds;
  /// From trace-event JSON; an error when the trace has no step of
  /// `tokens` tokens.
  static rt::Expected<MeasuredLaunches> fromTrace(const std::string &path, int64_t tokens);
};

/// Rank `rank`'s program of `plan` in a step of `tokens` tokens on `hw`
/// over `link`; launches timed by `measured` where it has them (an error
/// names a launch it lacks), else by the cost model.
rt::Expected<Simulation> simulate(const plan::Plan &plan, int rank, const Hardware &hw,
                                  const rt::LinkModel &link, int64_t tokens,
                                  const MeasuredLaunches *measured = nullptr);

} // namespace moe::cost

#endif
