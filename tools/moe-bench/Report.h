//===- Report.h - moe-bench's figures, as text and as JSON ------*- C++ -*-===//
//
// Latencies as `vllm bench serve` defines them (vllm/benchmarks/serve.py,
// calculate_metrics), per completed request: TTFT from submission (or, open
// loop, arrival) to the first token; E2EL from then to the last (over HTTP:
// to the end of the stream); TPOT = (E2EL - TTFT) / (output tokens - 1), of
// requests with more than one; ITL every gap between consecutive tokens
// (over HTTP, between stream chunks), pooled over the requests. Each is
// summarised by its mean, median, p90 and p99 (numpy's interpolated
// percentiles, as vLLM's).
//
//===----------------------------------------------------------------------===//
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

/// Prints the level's figures: throughput, why requests were not completed,
/// latencies, KV use, preemptions and host-swap traffic.
void printLevel(std::FILE *out, const Level &level);
/// Prints to standard error what the engine or server said of the requests
/// it did not complete: the first of each kind refused for load, with their
/// count, and up to five invalid and five failed ones.
void printUnserved(const Outcome &outcome);
/// The level as a JSON object (latencies in ms as {"mean", "median", "p90",
/// "p99"}); with `perRequest`, also each completed request's own figures.
nlohmann::json levelJson(const Level &level, bool perRequest);

} // namespace moe::bench

#endif
