//===- Workload.h - the requests moe-bench sends, and when ------*- C++ -*-===//
#ifndef MOE_TOOLS_MOEBENCH_WORKLOAD_H
#define MOE_TOOLS_MOEBENCH_WORKLOAD_H

#include "moe/runtime/Engine.h"
#include "moe/runtime/Tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace moe::bench {

/// Random prompts and output lengths, uniform in [lo, hi], every prompt
/// starting with the same `sharedPrefix` tokens.
struct SyntheticSpec {
  int64_t requests = 0, promptLo = 16, promptHi = 64, outputLo = 16, outputHi = 64;
  int64_t sharedPrefix = 0;
  uint64_t seed = 0;
  rt::StopOptions stop; ///< where each generated sequence may end early
};

std::vector<rt::GenerationRequest> syntheticWorkload(const SyntheticSpec &spec, int64_t vocab);

/// Reads a JSON Lines workload: one object per line with "output_len" and
/// exactly one of "prompt" (text, through the plan's tokenizer),
/// "prompt_tokens" (token ids) or "prompt_len" (that many random ids drawn
/// with `seed`); optionally "stop" (strings) and "ignore_eos", which
/// override `defaults`. Blank lines are skipped; errors name the file and
/// line.
/// Requests that parse but cannot run (too long, bad ids) are left for the
/// engine to reject one by one. `tokenizer`: the plan's, loaded into it
/// when a text prompt first needs it (null until then).
rt::Expected<std::vector<rt::GenerationRequest>>
readWorkload(const std::string &path, const plan::Plan &plan, uint64_t seed,
             const rt::StopOptions &defaults, std::shared_ptr<const rt::Tokenizer> &tokenizer);

/// Arrival times (seconds from the start) of `n` requests as a Poisson
/// process of `rate` requests per second.
std::vector<double> poissonArrivals(size_t n, double rate, uint64_t seed);

} // namespace moe::bench

#endif
