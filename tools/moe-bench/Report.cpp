//===- Report.cpp - moe-bench's figures, as text and as JSON --------------===//
#include "tools/moe-bench/Report.h"
#include "tools/common/Output.h"

#include <algorithm>
#include <array>
#include <map>
#include <cstdio>
#include <sstream>

namespace moe::bench {
namespace {

/// Times to first token and between tokens, in seconds, ascending.
struct Latencies {
  std::vector<double> ttft, itl;
  uint64_t generated = 0;
  std::map<std::string, uint64_t> finished; ///< finish reason -> requests
};

Latencies latencies(const Outcome &o) {
  Latencies l;
  for (const rt::GenerationResult &r : o.results) {
    l.ttft.push_back(r.firstToken - r.submitted);
    for (size_t i = 1; i < r.tokenTimes.size(); ++i)
      l.itl.push_back(r.tokenTimes[i] - r.tokenTimes[i - 1]);
    l.generated += r.tokens.size();
    ++l.finished[rt::finishReasonName(r.finishReason)];
  }
  std::sort(l.ttft.begin(), l.ttft.end());
  std::sort(l.itl.begin(), l.itl.end());
  return l;
}

double rate(double count, double seconds) { return seconds > 0 ? count / seconds : 0; }
double mib(double bytes) { return bytes / 1048576.0; }

std::string label(const Level &level) {
  std::ostringstream s;
  s << level.loadKey << " " << level.load << (level.loadKey == "rate" ? " req/s" : "");
  return s.str();
}

} // namespace

void printLevel(std::FILE *out, const Level &level, int64_t kvBlocks) {
  const Outcome &o = *level.outcome;
  const rt::EngineStats &st = o.stats;
  Latencies l = latencies(o);
  std::fprintf(out, "%s: %zu/%zu requests completed, %llu rejected (queue full)", label(level).c_str(),
              o.results.size(), level.requests, (unsigned long long)o.queueFull);
  if (!o.invalid.empty())
    std::fprintf(out, ", %zu rejected (invalid)", o.invalid.size());
  std::fprintf(out, " in %.2f s: %.2f req/s, decode %.0f tok/s, prefill %.0f tok/s\n", o.seconds,
              rate(double(o.results.size()), o.seconds),
              rate(double(st.decodeTokens), st.decodeSeconds),
              rate(double(st.prefillTokens), st.prefillSeconds));
  std::fprintf(out, "  finished: %llu at the length limit, %llu at end of sequence, %llu at a "
                    "stop string\n",
               (unsigned long long)l.finished["length"], (unsigned long long)l.finished["eos"],
               (unsigned long long)l.finished["stop"]);
  using tools::percentile;
  std::fprintf(out, "  TTFT ms p50 %.1f p90 %.1f p99 %.1f | ITL ms p50 %.2f p90 %.2f p99 %.2f\n",
               1e3 * percentile(l.ttft, 50), 1e3 * percentile(l.ttft, 90),
               1e3 * percentile(l.ttft, 99), 1e3 * percentile(l.itl, 50),
               1e3 * percentile(l.itl, 90), 1e3 * percentile(l.itl, 99));
  std::fprintf(out, "  KV peak %lld of %lld blocks (%.2f MiB, %lld bytes per block); preemptions "
              "%llu (%llu swapped to host, %llu recomputed: %llu tokens); %llu generated "
              "tokens\n",
              (long long)st.peakBlocks, (long long)kvBlocks,
              mib(double(st.peakBlocks * o.kvBytesPerBlock)), (long long)o.kvBytesPerBlock,
              (unsigned long long)st.preemptions, (unsigned long long)st.swapOuts,
              (unsigned long long)(st.preemptions - st.swapOuts),
              (unsigned long long)st.recomputedTokens, (unsigned long long)l.generated);
  if (o.hostBlocks > 0)
    std::fprintf(out, "  host pool: peak %lld of %lld blocks; swapped out %.2f MiB (%llu), in %.2f "
                "MiB (%llu), %.1f ms copying\n",
                (long long)st.peakHostBlocks, (long long)o.hostBlocks,
                mib(double(st.swapOutBytes)), (unsigned long long)st.swapOuts,
                mib(double(st.swapInBytes)), (unsigned long long)st.swapIns,
                st.swapSeconds * 1e3);
  if (level.identical >= 0)
    std::fprintf(out, "  verify: %lld/%zu outputs token-identical to running alone\n",
                (long long)level.identical, o.results.size());
}

nlohmann::json levelJson(const Level &level) {
  const Outcome &o = *level.outcome;
  const rt::EngineStats &st = o.stats;
  Latencies l = latencies(o);
  return {{level.loadKey, level.load},
          {"requests", level.requests},
          {"completed", o.results.size()},
          {"rejected", st.rejected},
          {"rejected_queue_full", o.queueFull},
          {"rejected_invalid", o.invalid.size()},
          {"seconds", o.seconds},
          {"requests_per_second", rate(double(o.results.size()), o.seconds)},
          {"generated_tokens", l.generated},
          {"output_tokens_per_second", rate(double(l.generated), o.seconds)},
          {"decode_tokens", st.decodeTokens},
          {"prefill_tokens", st.prefillTokens},
          {"decode_seconds", st.decodeSeconds},
          {"prefill_seconds", st.prefillSeconds},
          {"ttft_ms", tools::percentileJson(l.ttft, 1e3)},
          {"itl_ms", tools::percentileJson(l.itl, 1e3)},
          {"peak_kv_blocks", st.peakBlocks},
          {"kv_bytes_per_block", o.kvBytesPerBlock},
          {"preemptions", st.preemptions},
          {"swap_outs", st.swapOuts},
          {"swap_ins", st.swapIns},
          {"swap_out_bytes", st.swapOutBytes},
          {"swap_in_bytes", st.swapInBytes},
          {"swap_seconds", st.swapSeconds},
          {"host_blocks", o.hostBlocks},
          {"peak_host_blocks", st.peakHostBlocks},
          {"recomputed_tokens", st.recomputedTokens},
          {"identical_to_solo", level.identical},
          {"finish_reasons",
           {{"length", l.finished["length"]}, {"eos", l.finished["eos"]},
            {"stop", l.finished["stop"]}}}};
}

} // namespace moe::bench
