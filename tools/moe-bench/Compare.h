//===- Compare.h - two plans timed in turn on one workload ------*- C++ -*-===//
//
// moe-bench --compare-to: the same requests through this plan and another
// (e.g. compiled without --overlap), in rounds whose order alternates (A B,
// B A, ...), so that a noisy moment of a shared machine falls on both: the
// per-round ratios are paired, and their median is the figure.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOEBENCH_COMPARE_H
#define MOE_TOOLS_MOEBENCH_COMPARE_H

#include "tools/moe-bench/Driver.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace moe::bench {

struct Comparison {
  std::vector<double> seconds, otherSeconds; ///< per round: wall time of the workload
  bool sameTokens = true; ///< every round generated the same tokens with both plans
  /// Per round: this plan's time / the other's; and their median.
  std::vector<double> ratios() const;
  double medianRatio() const;
};

/// `rounds` rounds of `requests` through `plan` and `other` in turn.
rt::Expected<Comparison> compare(const rt::LoadedPlan &plan, const rt::LoadedPlan &other,
                                 rt::Device &device, const rt::EngineOptions &options,
                                 const std::vector<rt::GenerationRequest> &requests,
                                 const Load &load, int64_t rounds);

/// "  vs OTHER: ..." with the median, range and the rounds' times.
void printComparison(std::FILE *out, const std::string &other, const Comparison &c);
nlohmann::json comparisonJson(const std::string &other, const Comparison &c);

} // namespace moe::bench

#endif
