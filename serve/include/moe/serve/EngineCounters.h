//===- EngineCounters.h - the engine's counters by name ---------*- C++ -*-===//
//
// moe-serve writes EngineStats' counters to /metrics as
// moe_engine_<name>_total, and moe-bench --url reads them back: one list,
// so that the two never disagree on a name.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_SERVE_ENGINECOUNTERS_H
#define MOE_SERVE_ENGINECOUNTERS_H

#include "moe/runtime/Engine.h"

#include <string>

namespace moe::serve {

struct EngineCounter {
  const char *name;
  uint64_t rt::EngineStats::*count; ///< one of these two is set
  double rt::EngineStats::*seconds;
};

inline constexpr EngineCounter kEngineCounters[] = {
    {"steps", &rt::EngineStats::steps, nullptr},
    {"prefill_tokens", &rt::EngineStats::prefillTokens, nullptr},
    {"decode_tokens", &rt::EngineStats::decodeTokens, nullptr},
    {"prefill_seconds", nullptr, &rt::EngineStats::prefillSeconds},
    {"decode_seconds", nullptr, &rt::EngineStats::decodeSeconds},
    {"preemptions", &rt::EngineStats::preemptions, nullptr},
    {"recomputed_tokens", &rt::EngineStats::recomputedTokens, nullptr},
    {"cached_tokens", &rt::EngineStats::cachedTokens, nullptr},
    {"swap_outs", &rt::EngineStats::swapOuts, nullptr},
    {"swap_ins", &rt::EngineStats::swapIns, nullptr},
    {"swap_out_bytes", &rt::EngineStats::swapOutBytes, nullptr},
    {"swap_in_bytes", &rt::EngineStats::swapInBytes, nullptr},
    {"swap_seconds", nullptr, &rt::EngineStats::swapSeconds},
    {"rejected", &rt::EngineStats::rejected, nullptr},
    {"cancelled", &rt::EngineStats::cancelled, nullptr},
};

/// The metric's name in /metrics.
inline std::string engineMetric(const EngineCounter &c) {
  return std::string("moe_engine_") + c.name + "_total";
}

inline double counterValue(const rt::EngineStats &s, const EngineCounter &c) {
  return c.count ? double(s.*c.count) : s.*c.seconds;
}

inline void setCounter(rt::EngineStats &s, const EngineCounter &c, double v) {
  if (c.count)
    s.*c.count = uint64_t(v);
  else
    s.*c.seconds = v;
}

} // namespace moe::serve

#endif
