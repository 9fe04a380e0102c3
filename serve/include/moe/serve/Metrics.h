//===- Metrics.h - the server's figures in Prometheus text ------*- C++ -*-===//
//
// GET /metrics: the engine's queue, sequences and KV blocks (from the
// service's snapshot), request outcomes, token counters, a tokens/s gauge
// over the last ten seconds, TTFT and inter-token latency histograms,
// per-(layer, expert) token counts, HTTP connections, the process's
// resident memory, and with --price-per-hour the cost per million tokens
// at the current rate. Text exposition format 0.0.4.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_SERVE_METRICS_H
#define MOE_SERVE_METRICS_H

#include "moe/runtime/EngineService.h"
#include "moe/serve/Http.h"

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace moe::serve {

/// Cumulative buckets of a Prometheus histogram.
class Histogram {
public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  /// The series of `name` (with _bucket, _sum and _count).
  std::string text(const std::string &name, const std::string &help) const;

private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_; ///< per bucket, not cumulative; last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
public:
  /// `pricePerHour` 0: no cost gauge.
  explicit Metrics(double pricePerHour);
  /// A request that ended with its result (tokens, times): "completed",
  /// or "cancelled" (a drain).
  void finished(const rt::GenerationResult &r, int64_t promptTokens);
  /// An HTTP answer that is not a finished generation: "rejected" (400,
  /// 404, 413), "busy" (429), "unavailable" (503), "unauthorized" (401),
  /// "timeout", "disconnected".
  void outcome(const std::string &what);
  void connections(int64_t active);
  /// The exposition of the engine's snapshot `s`, the HTTP layer's
  /// connections and what this object counted.
  std::string text(const rt::ServiceSnapshot &s, const http::ConnectionCounts &http);

private:
  double tokensPerSecond(std::chrono::steady_clock::time_point now);

  std::mutex mutex_;
  const double pricePerHour_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::map<std::string, uint64_t> outcomes_;
  uint64_t promptTokens_ = 0, generatedTokens_ = 0;
  int64_t connections_ = 0;
  /// (when, tokens) of recent results, for the rate gauge.
  std::deque<std::pair<std::chrono::steady_clock::time_point, uint64_t>> recent_;
  Histogram ttft_, itl_, e2e_;
};

} // namespace moe::serve

#endif
