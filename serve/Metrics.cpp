//===- Metrics.cpp - the server's figures in Prometheus text --------------===//
#include "moe/serve/Metrics.h"
#include "moe/serve/EngineCounters.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace moe::serve {
namespace {

constexpr double kWindowSeconds = 10;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void gauge(std::ostringstream &os, const std::string &name, const std::string &help, double v,
           const char *type = "gauge") {
  os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
     << name << ' ' << number(v) << '\n';
}

/// The process's resident memory, from /proc/self/statm (0 if unread).
double residentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * double(::sysconf(_SC_PAGESIZE));
}

} // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t b = 0;
  while (b < bounds_.size() && v > bounds_[b])
    ++b;
  ++counts_[b];
  sum_ += v;
  ++count_;
}

std::string Histogram::text(const std::string &name, const std::string &help) const {
  std::ostringstream os;
  os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t b = 0; b < bounds_.size(); ++b) {
    cumulative += counts_[b];
    os << name << "_bucket{le=\"" << number(bounds_[b]) << "\"} " << cumulative << '\n';
  }
  os << name << "_bucket{le=\"+Inf\"} " << count_ << '\n'
     << name << "_sum " << number(sum_) << '\n'
     << name << "_count " << count_ << '\n';
  return os.str();
}

Metrics::Metrics(double pricePerHour)
    : pricePerHour_(pricePerHour),
      ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      e2e_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void Metrics::finished(const rt::GenerationResult &r, int64_t promptTokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++outcomes_[r.finishReason == rt::FinishReason::Cancelled ? "cancelled" : "completed"];
  promptTokens_ += uint64_t(promptTokens);
  generatedTokens_ += r.tokens.size();
  recent_.emplace_back(std::chrono::steady_clock::now(), r.tokens.size());
  if (!r.tokenTimes.empty())
    ttft_.observe(r.firstToken - r.submitted);
  for (size_t i = 1; i < r.tokenTimes.size(); ++i)
    itl_.observe(r.tokenTimes[i] - r.tokenTimes[i - 1]);
  e2e_.observe(r.finished - r.submitted);
}

void Metrics::outcome(const std::string &what) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++outcomes_[what];
}

void Metrics::connections(int64_t active) {
  std::lock_guard<std::mutex> lock(mutex_);
  connections_ = active;
}

double Metrics::tokensPerSecond(std::chrono::steady_clock::time_point now) {
  while (!recent_.empty() &&
         std::chrono::duration<double>(now - recent_.front().first).count() > kWindowSeconds)
    recent_.pop_front();
  uint64_t tokens = 0;
  for (auto &[when, n] : recent_)
    tokens += n;
  double up = std::chrono::duration<double>(now - start_).count();
  return double(tokens) / std::min(kWindowSeconds, std::max(up, 1e-3));
}

std::string Metrics::text(const rt::ServiceSnapshot &s, const http::ConnectionCounts &http) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto now = std::chrono::steady_clock::now();
  std::ostringstream os;
  gauge(os, "moe_queue_length", "requests waiting for admission", double(s.load.waiting));
  gauge(os, "moe_running_sequences", "sequences in the running batch", double(s.load.running));
  gauge(os, "moe_swapped_sequences", "preempted sequences whose KV is in host memory",
        double(s.load.swapped));
  gauge(os, "moe_kv_blocks_used", "KV-cache blocks held by sequences", double(s.load.usedBlocks));
  gauge(os, "moe_kv_blocks_total", "KV-cache blocks in the pool", double(s.load.totalBlocks));
  gauge(os, "moe_host_kv_blocks_used", "host-pool blocks holding swapped-out KV",
        double(s.load.usedHostBlocks));
  gauge(os, "moe_draining", "1 while the server finishes its requests before exiting",
        s.draining ? 1 : 0);
  gauge(os, "moe_connections_active", "generation requests being answered (--max-connections)",
        double(connections_));
  gauge(os, "moe_http_connections_open", "HTTP connections open", double(http.open));
  gauge(os, "moe_http_connections_idle",
        "HTTP connections waiting for or reading a request (evicted first at "
        "--max-open-connections)",
        double(http.idle));
  gauge(os, "moe_http_connections_accepted_total", "HTTP connections accepted",
        double(http.accepted), "counter");
  gauge(os, "moe_http_connections_evicted_total",
        "idle HTTP connections closed to make room for new ones", double(http.evicted),
        "counter");
  gauge(os, "moe_http_connections_refused_total",
        "HTTP connections refused (503) with every open one busy", double(http.refused),
        "counter");
  gauge(os, "moe_http_timeouts_total",
        "HTTP connections closed for taking too long over their headers or body",
        double(http.timedOut), "counter");
  gauge(os, "process_resident_memory_bytes", "resident memory of the server process",
        residentBytes());
  os << "# HELP moe_requests_total requests by outcome\n# TYPE moe_requests_total counter\n";
  for (auto &[what, n] : outcomes_)
    os << "moe_requests_total{outcome=\"" << what << "\"} " << n << '\n';
  gauge(os, "moe_prompt_tokens_total", "prompt tokens of finished requests",
        double(promptTokens_), "counter");
  gauge(os, "moe_generated_tokens_total", "tokens generated by finished requests",
        double(generatedTokens_), "counter");
  // The engine's own counters (moe-bench --url reads them before and after).
  const rt::EngineStats &st = s.stats;
  for (const EngineCounter &c : kEngineCounters)
    gauge(os, engineMetric(c), std::string("the engine's ") + c.name + " (EngineStats)",
          counterValue(st, c), "counter");
  gauge(os, "moe_kv_blocks_peak", "most KV blocks in use at once since the start",
        double(st.peakBlocks));
  gauge(os, "moe_host_kv_blocks_peak", "most host-pool blocks in use at once since the start",
        double(st.peakHostBlocks));
  gauge(os, "moe_host_kv_blocks_total", "blocks the host pool holds",
        double(s.load.totalHostBlocks));
  gauge(os, "moe_kv_block_bytes", "bytes of one KV block", double(s.kvBytesPerBlock));
  const double rate = tokensPerSecond(now);
  gauge(os, "moe_generated_tokens_per_second",
        "tokens generated by requests that finished in the last 10 s, per second", rate);
  if (pricePerHour_ > 0)
    gauge(os, "moe_cost_per_million_tokens",
          "--price-per-hour over the generated tokens per hour at the current rate, per "
          "million (NaN while idle)",
          rate > 0 ? pricePerHour_ / (rate * 3600.0) * 1e6 : std::nan(""));
  gauge(os, "moe_uptime_seconds", "seconds since the server started",
        std::chrono::duration<double>(now - start_).count());
  os << ttft_.text("moe_time_to_first_token_seconds", "from submission to the first token");
  os << itl_.text("moe_inter_token_latency_seconds", "between consecutive tokens of a request");
  os << e2e_.text("moe_request_duration_seconds", "from submission to the last token");
  if (!s.ranks.empty()) {
    // Per rank, as of the ranks' last report (once a second).
    auto perRank = [&](const char *name, const char *help, const char *type, auto value) {
      os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
      for (size_t r = 0; r < s.ranks.size(); ++r)
        os << name << "{rank=\"" << r << "\"} " << double(value(s.ranks[r])) << '\n';
    };
    perRank("moe_rank_kv_blocks_used", "KV-cache blocks held on each rank", "gauge",
            [](const rt::RankFigures &f) { return f.kvBlocksUsed; });
    perRank("moe_rank_expert_rows_total", "expert rows each rank computed (its routing counts)",
            "counter", [](const rt::RankFigures &f) { return f.expertRows; });
    perRank("moe_rank_collective_bytes_total",
            "bytes each rank handed to the plan's collectives", "counter",
            [](const rt::RankFigures &f) { return f.collectiveBytes; });
    perRank("moe_rank_collective_seconds_total",
            "seconds each rank spent inside collectives, waiting for its peers and moving data "
            "(the service's own exchanges included)",
            "counter", [](const rt::RankFigures &f) { return f.collectiveNanoseconds * 1e-9; });
    perRank("moe_rank_requests_running", "requests each rank's engine is running", "gauge",
            [](const rt::RankFigures &f) { return f.running; });
    perRank("moe_rank_requests_waiting", "requests waiting in each rank's engine", "gauge",
            [](const rt::RankFigures &f) { return f.waiting; });
    perRank("moe_rank_picks_replaced_total",
            "tokens where a rank's own pick differed from rank 0's, which ranks in lockstep take",
            "counter", [](const rt::RankFigures &f) { return f.picksReplaced; });
  }
  os << "# HELP moe_expert_tokens_total tokens routed to each expert\n"
        "# TYPE moe_expert_tokens_total counter\n";
  for (const rt::ExpertLoad &layer : s.experts)
    for (size_t e = 0; e < layer.counts.size(); ++e)
      os << "moe_expert_tokens_total{layer=\"" << layer.layer << "\",expert=\"" << e << "\"} "
         << layer.counts[e] << '\n';
  return os.str();
}

} // namespace moe::serve
