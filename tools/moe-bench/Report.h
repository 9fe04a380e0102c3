//===- Report.h - moe-bench's figures, as text and as JSON ------*- C++ -*-===//
#ifndef MOE_TOOLS_MOEBENCH_REPORT_H
#define MOE_TOOLS_MOEBENCH_REPORT_H

#include "tools/moe-bench/Driver.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace moe::bench {

/// One level of a sweep: its load, what happened, and (with --verify) how
/// many outputs matched a solo run (-1: not checked).
struct Level {
  std::string loadKey; ///< "concurrency" or "rate"
  double load = 0;
  size_t requests = 0;
  const Outcome *outcome = nullptr;
  int64_t identical = -1;
};

/// Prints the level's figures: throughput, TTFT/ITL percentiles, KV use,
/// preemptions and host-swap traffic.
void printLevel(std::FILE *out, const Level &level, int64_t kvBlocks);
/// The level as a JSON object (percentiles as {"p50", "p90", "p99"}).
nlohmann::json levelJson(const Level &level);

} // namespace moe::bench

#endif
