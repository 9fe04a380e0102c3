//===- PlacementReport.cpp - expert placements against traffic ------------===//
#include "tools/common/PlacementReport.h"
#include "moe/abi/File.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace moe::tools {

namespace pl = moe::placement;
using nlohmann::json;

namespace {

/// --days: FIRST:LAST, or "" for every day (last 0).
rt::Status parseDays(const std::string &flag, bool haveTrace, int &first, int &last) {
  first = 1;
  last = 0;
  if (flag.empty())
    return rt::Status::ok();
  if (!haveTrace)
    return rt::Status::error("--days chooses days of a --trace; give the trace");
  char end = 0;
  if (std::sscanf(flag.c_str(), "%d:%d%c", &first, &last, &end) != 2 || first < 1 ||
      last < first)
    return rt::Status::error("--days takes FIRST:LAST with 1 <= FIRST <= LAST, e.g. 8:8, got '" +
                             flag + "'");
  return rt::Status::ok();
}

} // namespace

rt::Expected<rt::RoutingProfile> readProfile(const std::string &path) {
  auto text = rt::readFile(path);
  if (!text)
    return text.status();
  auto profile = rt::parseRoutingProfile(*text);
  if (!profile)
    return rt::Status::error(path + " is not a routing profile: " + profile.status().message());
  return profile;
}

rt::Expected<std::optional<Trace>> readTrace(const std::string &path, const std::string &days,
                                             const std::vector<int64_t> &layers,
                                             int64_t experts) {
  int first = 1, last = 0;
  if (rt::Status st = parseDays(days, !path.empty(), first, last); !st)
    return st;
  if (path.empty())
    return std::optional<Trace>();
  auto text = rt::readFile(path);
  if (!text)
    return text.status();
  auto bad = [&](const std::string &why) { return rt::Status::error(path + ": " + why); };
  std::istringstream lines(*text);
  std::string line;
  if (!std::getline(lines, line))
    return bad("empty; expected a routing trace (tools/make-routing-trace.py)");
  json head = json::parse(line, nullptr, false);
  if (head.is_discarded() || !head.is_object() || head.value("format", "") != "moe-routing-trace")
    return bad("not a routing trace (its first line has no \"format\": \"moe-routing-trace\")");
  try {
    if (head.at("num_experts").get<int64_t>() != experts)
      return bad("a trace of " + head.at("num_experts").dump() + " experts, not " +
                 std::to_string(experts));
    if (head.at("layers").get<std::vector<int64_t>>() != layers)
      return bad("its MoE layers differ from the placement's");
  } catch (const json::exception &) {
    return bad("its header lacks \"layers\" or \"num_experts\"");
  }
  Trace trace;
  int lastDay = 0;
  for (size_t n = 2; std::getline(lines, line); ++n) {
    const std::string where = "line " + std::to_string(n);
    json step = json::parse(line, nullptr, false);
    try {
      const int day = step.at("day").get<int>();
      lastDay = std::max(lastDay, day);
      if (day < first || (last > 0 && day > last))
        continue;
      auto counts = step.at("counts").get<std::vector<std::vector<double>>>();
      if (counts.size() != layers.size())
        return bad(where + " has counts of " + std::to_string(counts.size()) + " layers, not " +
                   std::to_string(layers.size()));
      for (size_t l = 0; l < layers.size(); ++l) {
        if (int64_t(counts[l].size()) != experts)
          return bad(where + " has " + std::to_string(counts[l].size()) + " counts for " +
                     std::to_string(experts) + " experts");
        trace.steps[layers[l]].push_back(std::move(counts[l]));
      }
      ++trace.count;
    } catch (const json::exception &) {
      return bad(where + " is not a step {\"day\", \"counts\"}");
    }
  }
  if (last > lastDay)
    return bad("--days " + days + " goes past its last day, " + std::to_string(lastDay));
  if (trace.count == 0)
    return bad("no step of the chosen days");
  return std::optional<Trace>(std::move(trace));
}

nlohmann::json reportPlacement(std::FILE *text, const std::vector<LayerPlacement> &layers,
                               const Trace *trace) {
  json docs = json::array();
  double predicted = 0, window = 0, perStep = 0;
  for (const LayerPlacement &l : layers) {
    const pl::Placement &p = l.placement;
    json slots = json::array();
    std::vector<std::vector<int>> held(size_t(p.ranks));
    for (size_t e = 0; e < p.experts.size(); ++e) {
      json s = json::array();
      for (const pl::Slot &slot : p.experts[e]) {
        s.push_back({slot.rank, slot.slot});
        held[size_t(slot.rank)].push_back(int(e));
      }
      slots.push_back(s);
    }
    json doc = {{"layer", l.layer}, {"experts", slots}, {"rank_experts", held}};
    std::fprintf(text, "layer %-3lld", (long long)l.layer);
    if (l.load) {
      const std::vector<double> loads = pl::rankLoads(p, *l.load);
      doc["rank_loads"] = loads;
      doc["max_over_mean"] = pl::imbalance(loads);
      predicted += pl::imbalance(loads);
      std::fprintf(text, " predicted max/mean %.3f", pl::imbalance(loads));
    }
    if (trace) {
      std::vector<double> total(size_t(p.ranks), 0.0);
      double meanStep = 0;
      const auto &steps = trace->steps.at(l.layer);
      for (const std::vector<double> &counts : steps) {
        const std::vector<double> loads = pl::rankLoads(p, counts);
        meanStep += pl::imbalance(loads) / double(steps.size());
        for (size_t r = 0; r < loads.size(); ++r)
          total[r] += loads[r];
      }
      doc["trace"] = {{"max_over_mean", pl::imbalance(total)},
                      {"step_max_over_mean", meanStep},
                      {"rank_loads", total}};
      window += pl::imbalance(total);
      perStep += meanStep;
      std::fprintf(text, "%s trace max/mean %.3f over the window, %.3f a step (mean)",
                   l.load ? ";" : "", pl::imbalance(total), meanStep);
    }
    if (!l.load && !trace) {
      std::fprintf(text, " experts by rank:");
      for (size_t r = 0; r < held.size(); ++r)
        std::fprintf(text, " %zu:%zu", r, held[r].size());
    }
    std::fprintf(text, "\n");
    docs.push_back(doc);
  }
  const double n = double(std::max<size_t>(1, layers.size()));
  json summary = json::object();
  if (!layers.empty() && layers.front().load) {
    summary["predicted_max_over_mean"] = predicted / n;
    std::fprintf(text, "mean over %zu layer(s): predicted max/mean %.3f", layers.size(),
                 predicted / n);
  }
  if (trace) {
    summary["trace_max_over_mean"] = window / n;
    summary["trace_step_max_over_mean"] = perStep / n;
    summary["trace_steps"] = trace->count;
    std::fprintf(text, "%strace (%zu steps) max/mean %.3f over the window, %.3f a step",
                 summary.contains("predicted_max_over_mean") ? "; " : "mean over layers: ",
                 trace->count, window / n, perStep / n);
  }
  if (!summary.empty())
    std::fprintf(text, "\n");
  return {{"layers", docs}, {"summary", summary}};
}

} // namespace moe::tools
