//===- HttpDriver.h - feed a workload to moe-serve over HTTP ----*- C++ -*-===//
//
// moe-bench --url: the same workloads, sent to a running moe-serve as
// streaming /v1/completions requests with the prompts' token ids, timed at
// the client. The engine's counters (prefill and decode tokens and time,
// preemptions, swaps, expert load) are the differences of the server's
// /metrics before and after; its KV pool and peak KV blocks are the
// server's (the peak since it started). Over HTTP the token ids are not
// returned: a result holds as many tokens as the server's usage reports
// (their ids unknown), its token times are the arrivals of the stream's
// chunks (one per engine step that released text), so inter-token latency
// is between chunks, and it finishes when the stream has been read to its
// end.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOEBENCH_HTTPDRIVER_H
#define MOE_TOOLS_MOEBENCH_HTTPDRIVER_H

#include "tools/moe-bench/Driver.h"

namespace moe::bench {

struct HttpTarget {
  std::string url;    ///< http://HOST:PORT
  std::string model;  ///< the model id every request names
  std::string apiKey; ///< sent as "Authorization: Bearer KEY" when not empty
};

/// What the server says of itself before the run.
struct Served {
  std::vector<std::string> models; ///< GET /v1/models
  int64_t kvBlocks = 0;            ///< its KV pool (/metrics moe_kv_blocks_total)
};

/// Waits for the server's /health to be ok (a moe-serve verifies its
/// weights first), then asks it (with the key) which models it serves and
/// how large its KV pool is; an error when it does not answer as moe-serve
/// does, or its weights failed their check.
rt::Expected<Served> connect(const HttpTarget &target);

/// Sends `requests` as `load` says. Every request ends completed or in one
/// of the outcome's Unserved kinds, with the server's words (an OpenAI
/// error's message, or the first bytes of another body); an error only
/// when /metrics cannot be read.
rt::Expected<Outcome> driveHttp(const HttpTarget &target,
                                const std::vector<rt::GenerationRequest> &requests,
                                const Load &load, bool progress);

} // namespace moe::bench

#endif
