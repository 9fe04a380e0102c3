//===- AutoOverlap.h - moe-compile --overlap auto ---------------*- C++ -*-===//
//
// The overlap schedule chosen by prediction: the plan compiled without
// overlap and with two-batch overlap in 2, 3 and 4 micro-batches, each
// written as a candidate and simulated (tools/plan-cost/Simulate.h) on a
// hardware profile at a step of the plan's most tokens; the fastest is
// kept (more micro-batches only when more than 1% faster), no overlap when
// none is faster.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOECOMPILE_AUTOOVERLAP_H
#define MOE_TOOLS_MOECOMPILE_AUTOOVERLAP_H

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <functional>
#include <string>

namespace moe {

/// Compiles with moe-schedule-overlap's `policy` and `microBatches` into
/// `dir`; false with `error` set on failure.
using OverlapCompileFn = std::function<bool(const std::string &policy, int64_t microBatches,
                                            const std::string &dir, std::string &error)>;

struct AutoOverlapOptions {
  std::string hardware; ///< the profile (docs/hardware/*.json)
  std::string link;     ///< LATENCY_US:GB_PER_S instead of the profile's; "" keeps it
  int64_t tokens = 0;   ///< the step simulated
  std::string candidates; ///< where candidates are written (removed after)
};

/// Sets `policy` and `microBatches` to the fastest candidate's, printing
/// each prediction to `log`.
bool chooseOverlap(const OverlapCompileFn &compile, const AutoOverlapOptions &options,
                   std::string &policy, int64_t &microBatches, llvm::raw_ostream &log,
                   std::string &error);

} // namespace moe

#endif
