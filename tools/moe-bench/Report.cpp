//===- Report.cpp - moe-bench's figures, as text and as JSON --------------===//
#include "tools/moe-bench/Report.h"
#include "tools/common/Output.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <tuple>

namespace moe::bench {
namespace {

/// One completed request's latencies, in seconds (Report.h defines them).
struct RequestTimes {
  double ttft = 0, e2el = 0;
  std::optional<double> tpot; ///< of a request with more than one token
  std::vector<double> itl;
};

RequestTimes timesOf(const rt::GenerationResult &r) {
  RequestTimes t;
  t.ttft = r.firstToken - r.submitted;
  t.e2el = r.finished - r.submitted;
  if (r.tokens.size() > 1)
    t.tpot = (t.e2el - t.ttft) / double(r.tokens.size() - 1);
  for (size_t i = 1; i < r.tokenTimes.size(); ++i)
    t.itl.push_back(r.tokenTimes[i] - r.tokenTimes[i - 1]);
  return t;
}

/// The level's latencies, each ascending, and its tokens and finishes.
struct Latencies {
  std::vector<double> ttft, tpot, itl, e2el;
  uint64_t generated = 0;
  std::map<std::string, uint64_t> finished; ///< finish reason -> requests
};

Latencies latencies(const Outcome &o) {
  Latencies l;
  for (const rt::GenerationResult &r : o.results) {
    RequestTimes t = timesOf(r);
    l.ttft.push_back(t.ttft);
    l.e2el.push_back(t.e2el);
    if (t.tpot)
      l.tpot.push_back(*t.tpot);
    l.itl.insert(l.itl.end(), t.itl.begin(), t.itl.end());
    l.generated += r.tokens.size();
    ++l.finished[rt::finishReasonName(r.finishReason)];
  }
  for (std::vector<double> *v : {&l.ttft, &l.tpot, &l.itl, &l.e2el})
    std::sort(v->begin(), v->end());
  return l;
}

/// What a latency is summarised by; the names are the JSON keys.
struct Statistic {
  const char *name;
  double (*of)(const std::vector<double> &sorted);
};
double mean(const std::vector<double> &v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}
constexpr Statistic kStatistics[] = {
    {"mean", mean},
    {"median", [](const std::vector<double> &v) { return tools::percentile(v, 50); }},
    {"p90", [](const std::vector<double> &v) { return tools::percentile(v, 90); }},
    {"p99", [](const std::vector<double> &v) { return tools::percentile(v, 99); }},
};

/// The latencies of a level by name: text label, JSON key, values.
std::array<std::tuple<const char *, const char *, const std::vector<double> *>, 4>
named(const Latencies &l) {
  return {{{"TTFT", "ttft_ms", &l.ttft},
           {"TPOT", "tpot_ms", &l.tpot},
           {"ITL", "itl_ms", &l.itl},
           {"E2EL", "e2el_ms", &l.e2el}}};
}

nlohmann::json millisecondsJson(const std::vector<double> &sorted) {
  nlohmann::json j;
  for (const Statistic &s : kStatistics)
    j[s.name] = 1e3 * s.of(sorted);
  return j;
}

double rate(double count, double seconds) { return seconds > 0 ? count / seconds : 0; }
double mib(double bytes) { return bytes / 1048576.0; }

std::string label(const Level &level) {
  std::ostringstream s;
  s << level.loadKey << " " << level.load << (level.loadKey == "rate" ? " req/s" : "");
  return s.str();
}

} // namespace

void printLevel(std::FILE *out, const Level &level) {
  const Outcome &o = *level.outcome;
  const rt::EngineStats &st = o.stats;
  Latencies l = latencies(o);
  std::string unserved;
  for (Unserved kind : kUnservedKinds)
    if (size_t n = o.of(kind).size())
      unserved += (unserved.empty() ? " (" : ", ") + std::to_string(n) + " " +
                  unservedWords(kind);
  if (!unserved.empty())
    unserved += ")";
  std::fprintf(out, "%s: %zu/%zu requests completed in %.2f s%s: %.2f req/s, decode %.0f tok/s, "
                    "prefill %.0f tok/s\n",
               label(level).c_str(), o.results.size(), level.requests, o.seconds,
               unserved.c_str(), rate(double(o.results.size()), o.seconds),
               rate(double(st.decodeTokens), st.decodeSeconds),
               rate(double(st.prefillTokens), st.prefillSeconds));
  std::fprintf(out, "  finished: %llu at the length limit, %llu at end of sequence, %llu at a "
                    "stop string\n",
               (unsigned long long)l.finished["length"], (unsigned long long)l.finished["eos"],
               (unsigned long long)l.finished["stop"]);
  std::fprintf(out, "  %-12s", "latency ms");
  for (const Statistic &s : kStatistics)
    std::fprintf(out, " %9s", s.name);
  std::fprintf(out, "\n");
  for (auto [name, key, values] : named(l)) {
    std::fprintf(out, "  %-12s", name);
    for (const Statistic &s : kStatistics)
      std::fprintf(out, " %9.2f", 1e3 * s.of(*values));
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "  KV peak %lld of %lld blocks (%.2f MiB, %lld bytes per block); preemptions "
              "%llu (%llu swapped to host, %llu recomputed: %llu tokens); %llu generated "
              "tokens\n",
              (long long)st.peakBlocks, (long long)o.kvBlocks,
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

void printUnserved(const Outcome &o) {
  constexpr size_t kShown = 5;
  for (Unserved kind : kUnservedKinds) {
    const std::vector<Rejection> &r = o.of(kind);
    if (r.empty())
      continue;
    if (kind == Unserved::Busy || kind == Unserved::Unavailable) { // for load: alike
      std::fprintf(stderr, "moe-bench: %zu %s; the first, request %zu: %s\n", r.size(),
                   unservedWords(kind), r[0].request, r[0].reason.c_str());
      continue;
    }
    for (size_t i = 0; i < r.size() && i < kShown; ++i)
      std::fprintf(stderr, "moe-bench: request %zu %s: %s\n", r[i].request, unservedWords(kind),
                   r[i].reason.c_str());
    if (r.size() > kShown)
      std::fprintf(stderr, "moe-bench: ... and %zu more %s\n", r.size() - kShown,
                   unservedWords(kind));
  }
}

nlohmann::json levelJson(const Level &level, bool perRequest) {
  const Outcome &o = *level.outcome;
  const rt::EngineStats &st = o.stats;
  Latencies l = latencies(o);
  nlohmann::json j = {
      {level.loadKey, level.load},
      {"requests", level.requests},
      {"completed", o.results.size()},
      {"rejected", st.rejected},
      {"seconds", o.seconds},
      {"requests_per_second", rate(double(o.results.size()), o.seconds)},
      {"generated_tokens", l.generated},
      {"output_tokens_per_second", rate(double(l.generated), o.seconds)},
      {"decode_tokens", st.decodeTokens},
      {"prefill_tokens", st.prefillTokens},
      {"decode_seconds", st.decodeSeconds},
      {"prefill_seconds", st.prefillSeconds},
      {"kv_blocks", o.kvBlocks},
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
  for (Unserved kind : kUnservedKinds)
    j[unservedKey(kind)] = o.of(kind).size();
  for (auto [name, key, values] : named(l))
    j[key] = millisecondsJson(*values);
  if (perRequest) {
    nlohmann::json list = nlohmann::json::array();
    for (const rt::GenerationResult &r : o.results) {
      RequestTimes t = timesOf(r);
      nlohmann::json itl = nlohmann::json::array();
      for (double gap : t.itl)
        itl.push_back(1e3 * gap);
      list.push_back({{"request", r.id},
                      {"output_tokens", r.tokens.size()},
                      {"ttft_ms", 1e3 * t.ttft},
                      {"tpot_ms", t.tpot ? nlohmann::json(1e3 * *t.tpot) : nlohmann::json()},
                      {"e2el_ms", 1e3 * t.e2el},
                      {"itl_ms", itl}});
    }
    j["per_request"] = list;
  }
  return j;
}

} // namespace moe::bench
