//===- HttpDriver.h - feed a workload to moe-serve over HTTP ----*- C++ -*-===//
//
// moe-bench --url: the same workloads, sent to a running moe-serve as
// streaming /v1/completions requests with the prompts' token ids, timed at
// the client. The engine's counters (prefill and decode tokens and time,
// preemptions, swaps, expert load) are the differences of the server's
// /metrics before and after; its peak KV blocks are the server's peak since
// it started. Over HTTP the token ids are not returned: a result holds as
// many tokens as the server's usage reports (their ids unknown), and its
// token times are the arrivals of the stream's chunks (one per engine step
// that released text), so inter-token latency is between chunks.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOEBENCH_HTTPDRIVER_H
#define MOE_TOOLS_MOEBENCH_HTTPDRIVER_H

#include "tools/moe-bench/Driver.h"

namespace moe::bench {

struct HttpTarget {
  std::string url;    ///< http://HOST:PORT
  std::string model;  ///< the served model's id (GET /v1/models when empty)
  std::string apiKey; ///< sent as "Authorization: Bearer KEY" when not empty
};

/// Checks the server answers and names its model (filling target.model).
rt::Status connect(HttpTarget &target);

rt::Expected<Outcome> driveHttp(const HttpTarget &target,
                                const std::vector<rt::GenerationRequest> &requests,
                                const Load &load, bool progress);

} // namespace moe::bench

#endif
