//===- HttpDriver.cpp - feed a workload to moe-serve over HTTP ------------===//
#include "tools/moe-bench/HttpDriver.h"
#include "tools/common/EngineCounters.h"

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
  for (const tools::EngineCounter &c : tools::kEngineCounters)
    tools::setCounter(s, c, at(tools::engineMetric(c)) - value(a, tools::engineMetric(c)));
  s.peakBlocks = int64_t(at("moe_kv_blocks_peak"));
  s.peakHostBlocks = int64_t(at("moe_host_kv_blocks_peak"));
  out.kvBytesPerBlock = int64_t(at("moe_kv_block_bytes"));
  out.hostBlocks = int64_t(at("moe_host_kv_blocks_total"));
  out.kvBlocks = int64_t(at("moe_kv_blocks_total"));
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

/// What one request came to.
struct Answer {
  std::optional<rt::GenerationResult> result;
  int status = 0;
  std::string error;
};

Answer send(const HttpTarget &t, const rt::GenerationRequest &r, Clock::time_point start) {
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  Answer a;
  rt::GenerationResult result;
  result.submitted = now();
  std::string buffer, finish;
  int64_t completion = -1;
  httplib::Client client(t.url);
  client.set_read_timeout(3600);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = headers(t);
  req.set_header("Content-Type", "application/json");
  req.body = requestBody(t, r).dump();
  req.content_receiver = [&](const char *data, size_t size, uint64_t, uint64_t) {
    buffer.append(data, size);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]")
        continue;
      json chunk = json::parse(event.substr(6), nullptr, false);
      if (chunk.contains("error")) {
        a.error = chunk["error"].value("message", "error");
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
  a.status = res->status;
  if (res->status != 200) {
    json body = json::parse(res->body, nullptr, false);
    a.error = body.is_object() && body.contains("error")
                  ? body["error"].value("message", res->body)
                  : res->body;
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

rt::Status connect(HttpTarget &target) {
  if (target.url.rfind("http://", 0) != 0)
    return rt::Status::error("--url " + target.url + ": give http://HOST:PORT");
  httplib::Client client(target.url);
  auto res = client.Get("/v1/models", headers(target));
  if (!res)
    return rt::Status::error("--url " + target.url + ": " + httplib::to_string(res.error()) +
                             "; is moe-serve running there?");
  if (res->status != 200)
    return rt::Status::error("--url " + target.url + "/v1/models: HTTP " +
                             std::to_string(res->status) + " " + res->body);
  json models = json::parse(res->body, nullptr, false);
  if (!models.is_object() || !models.contains("data") || !models["data"].is_array() ||
      models["data"].empty() || !models["data"][0].contains("id"))
    return rt::Status::error("--url " + target.url + "/v1/models: no model listed");
  if (target.model.empty())
    target.model = models["data"][0]["id"].get<std::string>();
  return rt::Status::ok();
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
  std::optional<std::string> failure;
  const auto start = Clock::now();
  auto record = [&](size_t i, Answer a) {
    std::lock_guard<std::mutex> lock(mutex);
    if (a.result) {
      a.result->id = int64_t(i);
      if (!load.arrivals.empty()) // latency counts from arrival
        a.result->submitted = load.arrivals[i];
      out.results.push_back(std::move(*a.result));
    } else if (a.status == 429) {
      ++out.queueFull;
    } else if (a.status != 0) {
      out.invalid.push_back({i, "HTTP " + std::to_string(a.status) + ": " + a.error});
    } else if (!failure) {
      failure = a.error;
    }
    if (progress)
      std::fprintf(stderr, "\r  %zu/%zu requests answered   ",
                   out.results.size() + out.queueFull + out.invalid.size(), requests.size());
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
  if (failure)
    return rt::Status::error("--url " + target.url + ": " + *failure);
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  auto after = scrape(target);
  if (!after)
    return after.status();
  engineDelta(*before, *after, out);
  std::sort(out.results.begin(), out.results.end(),
            [](const auto &a, const auto &b) { return a.id < b.id; });
  return out;
}

} // namespace moe::bench
