//===- Workload.cpp - the requests moe-bench sends, and when --------------===//
#include "tools/moe-bench/Workload.h"

#include "moe/abi/File.h"
#include "moe/runtime/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <optional>
#include <random>

namespace moe::bench {
namespace {

/// Random token ids that avoid the first (special) ids when the vocabulary
/// allows it.
struct TokenSource {
  std::mt19937_64 rng;
  int64_t vocab;
  int32_t operator()() {
    return int32_t(
        std::uniform_int_distribution<int64_t>(std::min<int64_t>(3, vocab - 1), vocab - 1)(rng));
  }
};

int64_t uniform(std::mt19937_64 &rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

} // namespace

std::vector<rt::GenerationRequest> syntheticWorkload(const SyntheticSpec &spec, int64_t vocab) {
  TokenSource token{std::mt19937_64(spec.seed), vocab};
  std::vector<int32_t> prefix;
  for (int64_t i = 0; i < spec.sharedPrefix; ++i)
    prefix.push_back(token());
  std::vector<rt::GenerationRequest> requests(static_cast<size_t>(spec.requests));
  for (rt::GenerationRequest &r : requests) {
    int64_t len = spec.sharedPrefix + uniform(token.rng, spec.promptLo, spec.promptHi);
    r.prompt = prefix;
    while (int64_t(r.prompt.size()) < len)
      r.prompt.push_back(token());
    r.maxNewTokens = uniform(token.rng, spec.outputLo, spec.outputHi);
    r.stop = spec.stop;
  }
  return requests;
}

rt::Expected<std::vector<rt::GenerationRequest>>
readWorkload(const std::string &path, const plan::Plan &plan, uint64_t seed,
             const rt::StopOptions &defaults, std::shared_ptr<const rt::Tokenizer> &tokenizer) {
  auto text = rt::readFile(path);
  if (!text)
    return text.status();
  std::istringstream in(*text);
  TokenSource token{std::mt19937_64(seed), int64_t(plan.config()->vocab_size())};
  std::vector<rt::GenerationRequest> requests;
  std::string line;
  for (int lineNo = 1; std::getline(in, line); ++lineNo) {
    auto bad = [&](const std::string &what) {
      return rt::Status::error(path + ":" + std::to_string(lineNo) + ": " + what +
                               " (each line: {\"output_len\": N, one of \"prompt\", "
                               "\"prompt_tokens\" or \"prompt_len\", and optionally "
                               "\"stop\": [strings] and \"ignore_eos\": bool})");
    };
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded())
      return bad("not JSON");
    if (!j.is_object())
      return bad("not a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "output_len" && it.key() != "prompt" && it.key() != "prompt_tokens" &&
          it.key() != "prompt_len" && it.key() != "stop" && it.key() != "ignore_eos")
        return bad("unknown key \"" + it.key() + "\"");
    auto positive = [&](const char *key) -> std::optional<int64_t> {
      if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 1)
        return std::nullopt;
      return j[key].get<int64_t>();
    };
    rt::GenerationRequest r;
    std::optional<int64_t> out = positive("output_len");
    if (!out)
      return bad("\"output_len\" must be a positive integer");
    r.maxNewTokens = *out;
    r.stop = defaults;
    if (j.contains("ignore_eos")) {
      if (!j["ignore_eos"].is_boolean())
        return bad("\"ignore_eos\" must be true or false");
      r.stop.ignoreEos = j["ignore_eos"].get<bool>();
    }
    if (j.contains("stop")) {
      const nlohmann::json &stop = j["stop"];
      if (!stop.is_array() ||
          !std::all_of(stop.begin(), stop.end(), [](const auto &s) { return s.is_string(); }))
        return bad("\"stop\" must be a list of strings");
      r.stop.strings = stop.get<std::vector<std::string>>();
    }
    int prompts = int(j.contains("prompt")) + int(j.contains("prompt_tokens")) +
                  int(j.contains("prompt_len"));
    if (prompts != 1)
      return bad("needs exactly one prompt key, got " + std::to_string(prompts));
    if (j.contains("prompt")) {
      if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty())
        return bad("\"prompt\" must be a non-empty string");
      if (!tokenizer) {
        auto t = rt::Tokenizer::forPlan(plan);
        if (!t)
          return bad("\"prompt\" text needs a tokenizer: " + t.status().message() +
                     "; give \"prompt_tokens\" instead");
        tokenizer = t.take();
      }
      // As moe-run --prompt: with the tokens the tokenizer adds (a start id).
      r.prompt = tokenizer->encode(j["prompt"].get<std::string>(), /*addSpecial=*/true);
    } else if (j.contains("prompt_tokens")) {
      const nlohmann::json &ids = j["prompt_tokens"];
      if (!ids.is_array() || ids.empty())
        return bad("\"prompt_tokens\" must be a non-empty array of token ids");
      for (const nlohmann::json &id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN ||
            id.get<int64_t>() > INT32_MAX)
          return bad("\"prompt_tokens\" holds a non-integer or out-of-range id");
        r.prompt.push_back(int32_t(id.get<int64_t>()));
      }
    } else {
      std::optional<int64_t> len = positive("prompt_len");
      if (!len || *len > (int64_t(1) << 20))
        return bad("\"prompt_len\" must be an integer in [1, 2^20]");
      while (int64_t(r.prompt.size()) < *len)
        r.prompt.push_back(token());
    }
    requests.push_back(std::move(r));
  }
  if (requests.empty())
    return rt::Status::error(path + ": the workload holds no requests");
  return requests;
}

std::vector<double> poissonArrivals(size_t n, double rate, uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x5851f42d4c957f2dull);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> at;
  double t = 0;
  for (size_t i = 0; i < n; ++i)
    at.push_back(t += gap(rng));
  return at;
}

} // namespace moe::bench
