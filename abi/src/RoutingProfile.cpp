//===- RoutingProfile.cpp - traffic per (layer, expert), over runs --------===//
#include "moe/abi/RoutingProfile.h"
#include "moe/abi/File.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cmath>
#include <cstring>

namespace moe::rt {

namespace {

constexpr const char *kFormat = "moe-routing-profile";
constexpr int kVersion = 1;

} // namespace

Expected<RoutingProfile> mergeWindow(const RoutingProfile &history, const RoutingProfile &window,
                                     double decay) {
  if (!(decay >= 0 && decay <= 1))
    return Status::error("the profile decay must lie in [0, 1], got " + std::to_string(decay));
  auto differ = [](const std::string &what, const std::string &was, const std::string &is) {
    return Status::error("the profile is of another model (" + what + " " + was + ", this run " +
                         is + "): write a new profile, or remove the old one");
  };
  if (history.modelType != window.modelType)
    return differ("model_type", history.modelType, window.modelType);
  if (history.numExperts != window.numExperts)
    return differ("num_experts", std::to_string(history.numExperts),
                  std::to_string(window.numExperts));
  if (history.topK != window.topK)
    return differ("top_k", std::to_string(history.topK), std::to_string(window.topK));
  auto layerIds = [](const RoutingProfile &p) {
    std::string s;
    for (const RoutingProfile::Layer &l : p.layers)
      s += (s.empty() ? "" : ",") + std::to_string(l.layer);
    return "[" + s + "]";
  };
  if (layerIds(history) != layerIds(window))
    return differ("MoE layers", layerIds(history), layerIds(window));
  RoutingProfile merged = window;
  merged.windows = history.windows + window.windows;
  merged.decay = decay;
  merged.tokens = decay * history.tokens + window.tokens;
  for (size_t l = 0; l < merged.layers.size(); ++l)
    for (size_t e = 0; e < merged.layers[l].counts.size(); ++e)
      merged.layers[l].counts[e] += decay * history.layers[l].counts[e];
  return merged;
}

Expected<RoutingProfile> parseRoutingProfile(const std::string &text) {
  using nlohmann::json;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::error("not JSON, or not an object");
  // value() would throw for a "format" that is not a string.
  if (!j.contains("format") || j["format"] != kFormat)
    return Status::error(std::string("its \"format\" is not \"") + kFormat + "\"");
  if (!j.contains("version") || j["version"] != kVersion)
    return Status::error("version " + (j.contains("version") ? j["version"].dump() : "?") +
                         "; this build reads version " + std::to_string(kVersion));
  try {
    RoutingProfile p;
    p.modelType = j.at("model_type").get<std::string>();
    p.numExperts = j.at("num_experts").get<int64_t>();
    p.topK = j.at("top_k").get<int64_t>();
    p.windows = j.at("windows").get<int64_t>();
    p.decay = j.at("decay").get<double>();
    p.tokens = j.at("tokens").get<double>();
    const json &last = j.at("last_window");
    if (!last.at("tokens").is_number_unsigned())
      return Status::error("last_window.tokens must be a whole number >= 0");
    p.last = {last.at("tokens").get<uint64_t>(), last.at("ranks").get<int64_t>(),
              last.at("ended").get<std::string>()};
    if (p.numExperts < 1 || p.topK < 1 || p.windows < 1 || p.last.ranks < 1 ||
        !(p.tokens >= 0) || !std::isfinite(p.tokens))
      return Status::error("num_experts, top_k, windows and ranks must be positive and tokens "
                           "finite and >= 0");
    if (!(p.decay >= 0 && p.decay <= 1))
      return Status::error("decay must lie in [0, 1]");
    if (!j.at("layers").is_array())
      return Status::error("\"layers\" must be an array");
    for (const json &l : j.at("layers")) {
      RoutingProfile::Layer layer{l.at("layer").get<int64_t>(),
                                  l.at("counts").get<std::vector<double>>()};
      if (int64_t(layer.counts.size()) != p.numExperts)
        return Status::error("layer " + std::to_string(layer.layer) + " has " +
                             std::to_string(layer.counts.size()) + " counts for " +
                             std::to_string(p.numExperts) + " experts");
      for (double c : layer.counts)
        if (!(c >= 0) || !std::isfinite(c))
          return Status::error("layer " + std::to_string(layer.layer) +
                               " has a count that is negative or not finite");
      for (const RoutingProfile::Layer &seen : p.layers)
        if (seen.layer == layer.layer)
          return Status::error("layer " + std::to_string(layer.layer) + " is listed twice");
      p.layers.push_back(std::move(layer));
    }
    return p;
  } catch (const json::exception &e) {
    return Status::error(std::string("a field is missing or of the wrong type (") + e.what() +
                         ")");
  }
}

std::string routingProfileJson(const RoutingProfile &p) {
  // Keys in the documented order.
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const RoutingProfile::Layer &l : p.layers)
    layers.push_back({{"layer", l.layer}, {"counts", l.counts}});
  nlohmann::ordered_json j = {
      {"format", kFormat},
      {"version", kVersion},
      {"model_type", p.modelType},
      {"num_experts", p.numExperts},
      {"top_k", p.topK},
      {"windows", p.windows},
      {"decay", p.decay},
      {"tokens", p.tokens},
      {"last_window", {{"tokens", p.last.tokens}, {"ranks", p.last.ranks}, {"ended", p.last.ended}}},
      {"layers", layers}};
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Expected<RoutingProfile> addToProfileIn(const std::string &path, const RoutingProfile &window,
                                        double decay) {
  struct stat st;
  if (path == "-" || ::lstat(path.c_str(), &st) != 0)
    return window;
  auto text = readFile(path);
  if (!text)
    return text.status();
  auto history = parseRoutingProfile(*text);
  if (!history)
    return Status::error(path + " is not a routing profile: " + history.status().message() +
                         "; name another file, or remove it");
  auto merged = mergeWindow(*history, window, decay);
  if (!merged)
    return Status::error(path + ": " + merged.status().message());
  return merged;
}

Status updateRoutingProfile(const std::string &path, const RoutingProfile &window, double decay) {
  auto profile = addToProfileIn(path, window, decay);
  if (!profile)
    return profile.status();
  return writeRoutingProfile(path, *profile);
}

Status writeRoutingProfile(const std::string &path, const RoutingProfile &profile) {
  // OutputFile stages it beside and renames it into place: an interrupted
  // run leaves the history as it was. It replaces the history it read.
  auto file = OutputFile::create(path, /*updatesInput=*/true);
  if (!file)
    return file.status();
  if (Status s = file->write(routingProfileJson(profile)); !s)
    return s;
  return file->close();
}

} // namespace moe::rt
