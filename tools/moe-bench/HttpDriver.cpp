//===- HttpDriver.cpp - feed a workload to moe-serve over HTTP ------------===//
#include "tools/moe-bench/HttpDriver.h"
#include "moe/serve/EngineCounters.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

namespace moe::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

/// moe-serve's KV pool in /metrics: the pool every figure is of.
constexpr const char *kPoolMetric = "moe_kv_blocks_total";

httplib::Headers headers(const HttpTarget &t) {
  httplib::Headers h;
  if (!t.apiKey.empty())
    h.emplace("Authorization", "Bearer " + t.apiKey);
  return h;
}

/// The server's /metrics as name{labels} -> value.
rt::Expected<std::map<std::string, double>> scrape(const HttpTarget &t) {
  httplib::Client client(t.url);
  auto res = client.Get("/metrics", headers(t));
  if (!res)
    return rt::Status::error(t.url + "/metrics: " + httplib::to_string(res.error()));
  if (res->status != 200)
    return rt::Status::error(t.url + "/metrics: HTTP " + std::to_string(res->status));
  std::map<std::string, double> m;
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#')
      continue;
    size_t space = line.rfind(' ');
    if (space != std::string::npos)
      m[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return m;
}

/// The engine's counters between two scrapes.
void engineDelta(const std::map<std::string, double> &a, const std::map<std::string, double> &b,
                 Outcome &out) {
  auto value = [](const std::map<std::string, double> &m, const std::string &key) {
    auto it = m.find(key);
    return it == m.end() ? 0.0 : it->second;
  };
  auto at = [&](const std::string &key) { return value(b, key); };
  rt::EngineStats &s = out.stats;
  for (const serve::EngineCounter &c : serve::kEngineCounters)
    serve::setCounter(s, c, at(serve::engineMetric(c)) - value(a, serve::engineMetric(c)));
  s.peakBlocks = int64_t(at("moe_kv_blocks_peak"));
  s.peakHostBlocks = int64_t(at("moe_host_kv_blocks_peak"));
  out.kvBytesPerBlock = int64_t(at("moe_kv_block_bytes"));
  out.hostBlocks = int64_t(at("moe_host_kv_blocks_total"));
  out.kvBlocks = int64_t(at(kPoolMetric));
  static const std::regex expert(R"re(moe_expert_tokens_total\{layer="(-?\d+)",expert="(\d+)"\})re");
  std::map<int, std::vector<uint64_t>> layers;
  for (auto &[key, value] : b) {
    std::smatch m;
    if (!std::regex_match(key, m, expert))
      continue;
    auto &counts = layers[std::stoi(m[1])];
    size_t e = std::stoul(m[2]);
    counts.resize(std::max(counts.size(), e + 1));
    auto before = a.find(key);
    counts[e] = uint64_t(value - (before == a.end() ? 0 : before->second));
  }
  for (auto &[layer, counts] : layers)
    out.expertLoad.push_back({layer, counts});
}

/// The server's words for a request it did not answer with a stream: an
/// OpenAI error body's error.message; for any other body its first bytes,
/// on one line (a proxy's HTML page, a plain-text error).
std::string errorMessage(const std::string &body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string())
    return j["error"]["message"].get<std::string>();
  if (body.empty())
    return "(an empty body)";
  constexpr size_t kShown = 200;
  std::string shown = body.substr(0, kShown);
  for (char &c : shown)
    if (static_cast<unsigned char>(c) < 0x20)
      c = ' ';
  return shown + (body.size() > kShown ? "..." : "");
}

/// What an HTTP status other than 200 says of the request.
Unserved unservedKind(int status) {
  if (status == 429)
    return Unserved::Busy;
  if (status == 503)
    return Unserved::Unavailable;
  if (status >= 400 && status < 500)
    return Unserved::Invalid;
  return Unserved::Failed;
}

json requestBody(const HttpTarget &t, const rt::GenerationRequest &r) {
  json body = {{"model", t.model},
               {"prompt", r.prompt},
               {"max_tokens", r.maxNewTokens},
               {"temperature", r.sampling.temperature},
               {"top_p", r.sampling.topP},
               {"seed", r.sampling.seed},
               {"ignore_eos", r.stop.ignoreEos},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (r.sampling.topK > 0)
    body["top_k"] = r.sampling.topK;
  if (!r.stop.strings.empty())
    body["stop"] = r.stop.strings;
  return body;
}

/// What one request came to: a result, or why not.
struct Answer {
  std::optional<rt::GenerationResult> result;
  Unserved kind = Unserved::Failed;
  std::string error;
};

Answer send(const HttpTarget &t, const rt::GenerationRequest &r, Clock::time_point start) {
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  Answer a;
  rt::GenerationResult result;
  result.submitted = now();
  std::string buffer, finish;
  int64_t completion = -1;
  int status = 0;
  // A refusal's body (an error, not a stream), kept up to this size: enough
  // for any OpenAI error body, and a hostile one costs no more.
  constexpr size_t kErrorBodyBytes = 64 << 10;
  std::string errorBody;
  httplib::Client client(t.url);
  client.set_read_timeout(3600);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = headers(t);
  req.set_header("Content-Type", "application/json");
  req.body = requestBody(t, r).dump();
  // The body of every status comes to the content receiver (res->body stays
  // empty): the status, known first, says whether it is a stream.
  req.response_handler = [&](const httplib::Response &res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char *data, size_t size, uint64_t, uint64_t) {
    if (status != 200) {
      errorBody.append(data, std::min(size, kErrorBodyBytes - errorBody.size()));
      return true;
    }
    buffer.append(data, size);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]")
        continue;
      json chunk = json::parse(event.substr(6), nullptr, false);
      if (chunk.contains("error")) {
        a.error = "the stream ended with an error: " + errorMessage(event.substr(6));
        continue;
      }
      if (chunk.contains("usage") && chunk["usage"].is_object())
        completion = chunk["usage"].value("completion_tokens", int64_t(-1));
      if (!chunk.contains("choices") || chunk["choices"].empty())
        continue;
      const json &c = chunk["choices"][0];
      if (c.value("text", std::string()).size()) {
        double t1 = now();
        if (result.tokenTimes.empty())
          result.firstToken = t1;
        result.tokenTimes.push_back(t1);
      }
      if (c.contains("finish_reason") && c["finish_reason"].is_string())
        finish = c["finish_reason"].get<std::string>();
    }
    return true;
  };
  auto res = client.send(req);
  if (!res) {
    a.error = "no answer: " + httplib::to_string(res.error());
    return a;
  }
  if (res->status != 200) {
    a.kind = unservedKind(res->status);
    a.error = "HTTP " + std::to_string(res->status) + ": " + errorMessage(errorBody);
    return a;
  }
  if (!a.error.empty() || completion < 0) {
    if (a.error.empty())
      a.error = "the stream ended without its usage";
    return a;
  }
  result.finished = now();
  if (result.tokenTimes.empty())
    result.firstToken = result.finished;
  result.tokens.assign(size_t(completion), -1); // ids are not sent over HTTP
  result.finishReason = finish == "length"        ? rt::FinishReason::Length
                        : r.stop.strings.empty() ? rt::FinishReason::Eos
                                                 : rt::FinishReason::Stop;
  a.result = std::move(result);
  return a;
}

} // namespace

/// Waits for the server's /health to be ok: a moe-serve answers 503
/// "loading" while it verifies its weights (up to kReadyWait), "corrupt"
/// when one failed.
rt::Status awaitHealthy(const HttpTarget &target) {
  constexpr auto kReadyWait = std::chrono::minutes(5);
  httplib::Client client(target.url);
  const auto deadline = Clock::now() + kReadyWait;
  for (bool said = false;;) {
    auto res = client.Get("/health");
    if (!res)
      return rt::Status::error("--url " + target.url + "/health: " +
                               httplib::to_string(res.error()));
    if (res->status == 200)
      return rt::Status::ok();
    json health = json::parse(res->body, nullptr, false);
    const std::string status =
        health.is_object() ? health.value("status", std::string()) : std::string();
    if (status != "loading" || Clock::now() > deadline)
      return rt::Status::error("--url " + target.url + "/health: HTTP " +
                               std::to_string(res->status) + ": " +
                               (health.is_object() ? health.dump() : res->body.substr(0, 200)));
    if (!said)
      std::fprintf(stderr, "moe-bench: %s is verifying its weights (%s); waiting\n",
                   target.url.c_str(), health.value("detail", std::string()).c_str());
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

rt::Expected<Served> connect(const HttpTarget &target) {
  if (target.url.rfind("http://", 0) != 0)
    return rt::Status::error("--url " + target.url + ": give http://HOST:PORT");
  if (rt::Status st = awaitHealthy(target); !st)
    return st;
  httplib::Client client(target.url);
  auto res = client.Get("/v1/models", headers(target));
  if (!res)
    return rt::Status::error("--url " + target.url + ": " + httplib::to_string(res.error()) +
                             "; is moe-serve running there?");
  if (res->status != 200)
    return rt::Status::error(
        "--url " + target.url + "/v1/models: HTTP " + std::to_string(res->status) + ": " +
        errorMessage(res->body) +
        (res->status == 401 ? " (give --api-key-file, with a key the server takes)" : ""));
  json models = json::parse(res->body, nullptr, false);
  Served served;
  if (models.is_object() && models.contains("data") && models["data"].is_array())
    for (const json &m : models["data"])
      if (m.is_object() && m.contains("id") && m["id"].is_string())
        served.models.push_back(m["id"].get<std::string>());
  if (served.models.empty())
    return rt::Status::error("--url " + target.url + "/v1/models: no model listed");
  auto metrics = scrape(target);
  if (!metrics)
    return metrics.status();
  auto pool = metrics->find(kPoolMetric);
  if (pool == metrics->end())
    return rt::Status::error("--url " + target.url + "/metrics: no " + kPoolMetric +
                             "; moe-bench --url measures a moe-serve");
  served.kvBlocks = int64_t(pool->second);
  return served;
}

rt::Expected<Outcome> driveHttp(const HttpTarget &target,
                                const std::vector<rt::GenerationRequest> &requests,
                                const Load &load, bool progress) {
  auto before = scrape(target);
  if (!before)
    return before.status();
  Outcome out;
  out.requests = requests.size();
  std::mutex mutex;
  const auto start = Clock::now();
  auto record = [&](size_t i, Answer a) {
    std::lock_guard<std::mutex> lock(mutex);
    if (a.result) {
      a.result->id = int64_t(i);
      if (!load.arrivals.empty()) // latency counts from arrival
        a.result->submitted = load.arrivals[i];
      out.results.push_back(std::move(*a.result));
    } else {
      out.of(a.kind).push_back({i, std::move(a.error)});
    }
    if (progress)
      std::fprintf(stderr, "\r  %zu/%zu requests answered   ", out.settled(), requests.size());
  };
  std::vector<std::thread> threads;
  std::atomic<size_t> next{0}; // closed loop: the next request to send
  if (load.arrivals.empty()) {
    for (int64_t w = 0; w < std::min<int64_t>(load.concurrency, int64_t(requests.size())); ++w)
      threads.emplace_back([&] {
        for (size_t i; (i = next++) < requests.size();)
          record(i, send(target, requests[i], start));
      });
  } else {
    for (size_t i = 0; i < requests.size(); ++i)
      threads.emplace_back([&, i] {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(load.arrivals[i])));
        record(i, send(target, requests[i], start));
      });
  }
  for (std::thread &t : threads)
    t.join();
  if (progress)
    std::fprintf(stderr, "\r%80s\r", "");
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  auto after = scrape(target);
  if (!after)
    return after.status();
  engineDelta(*before, *after, out);
  std::sort(out.results.begin(), out.results.end(),
            [](const auto &a, const auto &b) { return a.id < b.id; });
  for (std::vector<Rejection> &kind : out.unserved)
    std::sort(kind.begin(), kind.end(),
              [](const auto &a, const auto &b) { return a.request < b.request; });
  return out;
}

} // namespace moe::bench
