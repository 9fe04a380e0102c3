//===- moe-place.cpp - plan expert placement from a routing profile -------===//
//
// Places each MoE layer's experts on ranks from a routing profile (the
// counts moe-run/moe-bench --routing-profile recorded) and reports each
// rank's predicted load and max/mean; with --trace, replays a per-step
// routing trace (tools/make-routing-trace.py) over the placement: per step
// the most loaded rank over the mean, and over the whole window. The same
// library plans for the moe-place-experts pass (docs/parallelism.md).
//
//===----------------------------------------------------------------------===//
#include "compiler/placement/ExpertPlacement.h"
#include "moe/runtime/File.h"
#include "moe/runtime/RoutingProfile.h"
#include "tools/common/Cli.h"
#include "tools/common/Output.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <sstream>

namespace pl = moe::placement;
namespace rt = moe::rt;
using nlohmann::json;

namespace {

struct Flags {
  std::string profile, trace, json, strategy = "balanced", days;
  int ranks = 0, ranksPerNode = 0, redundant = 0;
};

/// Per layer id: rank loads of every step of the trace's chosen days.
struct Replay {
  std::map<int64_t, std::vector<std::vector<double>>> stepLoads;
  size_t steps = 0;
};

/// Replays `path` over `placements` (per layer id), steps of days [first,
/// last] (all when last is 0).
rt::Expected<Replay> replay(const std::string &path, const rt::RoutingProfile &profile,
                            const std::map<int64_t, pl::Placement> &placements, int first,
                            int last) {
  auto text = rt::readFile(path);
  if (!text)
    return text.status();
  std::istringstream lines(*text);
  std::string line;
  auto bad = [&](const std::string &why) {
    return rt::Status::error(path + ": " + why);
  };
  if (!std::getline(lines, line))
    return bad("empty; expected a routing trace (tools/make-routing-trace.py)");
  json head = json::parse(line, nullptr, false);
  if (head.is_discarded() || !head.is_object() || head.value("format", "") != "moe-routing-trace")
    return bad("not a routing trace (its first line has no \"format\": \"moe-routing-trace\")");
  std::vector<int64_t> layers, profileLayers;
  try {
    layers = head.at("layers").get<std::vector<int64_t>>();
    if (head.at("num_experts").get<int64_t>() != profile.numExperts)
      return bad("a trace of " + head.at("num_experts").dump() + " experts; the profile has " +
                 std::to_string(profile.numExperts));
  } catch (const json::exception &) {
    return bad("its header lacks \"layers\" or \"num_experts\"");
  }
  for (const rt::RoutingProfile::Layer &l : profile.layers)
    profileLayers.push_back(l.layer);
  if (layers != profileLayers)
    return bad("its MoE layers differ from the profile's");
  Replay r;
  for (size_t n = 2; std::getline(lines, line); ++n) {
    json step = json::parse(line, nullptr, false);
    try {
      const int day = step.at("day").get<int>();
      if (day < first || (last > 0 && day > last))
        continue;
      const auto counts = step.at("counts").get<std::vector<std::vector<double>>>();
      if (counts.size() != layers.size())
        return bad("line " + std::to_string(n) + " has counts of " +
                   std::to_string(counts.size()) + " layers, not " +
                   std::to_string(layers.size()));
      for (size_t l = 0; l < layers.size(); ++l) {
        if (int64_t(counts[l].size()) != profile.numExperts)
          return bad("line " + std::to_string(n) + " has " + std::to_string(counts[l].size()) +
                     " counts for " + std::to_string(profile.numExperts) + " experts");
        r.stepLoads[layers[l]].push_back(pl::rankLoads(placements.at(layers[l]), counts[l]));
      }
      ++r.steps;
    } catch (const json::exception &) {
      return bad("line " + std::to_string(n) + " is not a step {\"day\", \"counts\"}");
    }
  }
  if (r.steps == 0)
    return bad("no step of the chosen days");
  return r;
}

std::vector<double> sumOf(const std::vector<std::vector<double>> &rows) {
  std::vector<double> sum(rows.empty() ? 0 : rows.front().size(), 0.0);
  for (const std::vector<double> &row : rows)
    for (size_t i = 0; i < row.size(); ++i)
      sum[i] += row[i];
  return sum;
}

int run(const Flags &f, moe::tools::Cli &cli) {
  auto fail = [&](const std::string &m) { return cli.fail(m); };
  moe::tools::Output out(f.json);
  if (rt::Status st = out.open(); !st)
    return fail(st.message());
  auto text = rt::readFile(f.profile);
  if (!text)
    return fail(text.status().message());
  auto profile = rt::parseRoutingProfile(*text);
  if (!profile)
    return fail(f.profile + " is not a routing profile: " + profile.status().message());
  const int experts = int(profile->numExperts);
  const pl::Options options{f.ranks, f.ranksPerNode, f.redundant};
  if (f.strategy == "round-robin" && (f.redundant != 0 || experts % f.ranks != 0))
    return fail("round-robin places each expert once: it needs --redundant 0 and a rank count "
                "that divides " + std::to_string(experts) + " experts");
  if (std::string why = pl::checkOptions(experts, options); !why.empty())
    return fail(why);
  int first = 1, last = 0;
  if (!f.days.empty() && f.trace.empty())
    return fail("--days chooses days of a --trace; give the trace");
  char end = 0;
  if (!f.days.empty() &&
      (std::sscanf(f.days.c_str(), "%d:%d%c", &first, &last, &end) != 2 || first < 1 ||
       last < first))
    return fail("--days takes FIRST:LAST with 1 <= FIRST <= LAST, e.g. 8:8, got '" + f.days +
                "'");

  std::map<int64_t, pl::Placement> placements;
  for (const rt::RoutingProfile::Layer &l : profile->layers) {
    pl::Placement p = f.strategy == "round-robin" ? pl::roundRobin(experts, f.ranks)
                                                  : pl::balanced(l.counts, options);
    if (std::string why = pl::verify(p, experts); !why.empty())
      return fail("internal: the placement of layer " + std::to_string(l.layer) +
                  " is not valid: " + why);
    placements[l.layer] = std::move(p);
  }
  std::optional<Replay> traced;
  if (!f.trace.empty()) {
    auto r = replay(f.trace, *profile, placements, first, last);
    if (!r)
      return fail(r.status().message());
    traced = r.take();
  }

  std::FILE *txt = out.text();
  std::fprintf(txt, "%s placement of %d experts on %d rank(s)%s, %d redundant slot(s), %d a rank\n",
               f.strategy.c_str(), experts, f.ranks,
               f.ranksPerNode ? (" (" + std::to_string(f.ranks / f.ranksPerNode) + " nodes)").c_str()
                              : "",
               f.redundant, (experts + f.redundant) / f.ranks);
  json layers = json::array();
  double predicted = 0, window = 0, perStep = 0;
  for (const rt::RoutingProfile::Layer &l : profile->layers) {
    const pl::Placement &p = placements.at(l.layer);
    const std::vector<double> loads = pl::rankLoads(p, l.counts);
    json slots = json::array(), onRank = json::array();
    for (const std::vector<pl::Slot> &e : p.experts) {
      json s = json::array();
      for (const pl::Slot &slot : e)
        s.push_back({slot.rank, slot.slot});
      slots.push_back(s);
    }
    std::vector<std::vector<int>> held(size_t(f.ranks));
    for (int e = 0; e < experts; ++e)
      for (const pl::Slot &slot : p.experts[size_t(e)])
        held[size_t(slot.rank)].push_back(e);
    json doc = {{"layer", l.layer},
                {"experts", slots},
                {"rank_experts", held},
                {"rank_loads", loads},
                {"max_over_mean", pl::imbalance(loads)}};
    predicted += pl::imbalance(loads);
    std::fprintf(txt, "layer %-3lld predicted max/mean %.3f", (long long)l.layer,
                 pl::imbalance(loads));
    if (traced) {
      const auto &steps = traced->stepLoads.at(l.layer);
      double meanStep = 0;
      for (const std::vector<double> &s : steps)
        meanStep += pl::imbalance(s) / double(steps.size());
      const double whole = pl::imbalance(sumOf(steps));
      doc["trace"] = {{"max_over_mean", whole}, {"step_max_over_mean", meanStep},
                      {"rank_loads", sumOf(steps)}};
      window += whole;
      perStep += meanStep;
      std::fprintf(txt, "; trace max/mean %.3f over the window, %.3f a step (mean)", whole,
                   meanStep);
    }
    std::fprintf(txt, "\n");
    layers.push_back(doc);
  }
  const double n = double(profile->layers.size());
  json summary = {{"predicted_max_over_mean", predicted / n}};
  std::fprintf(txt, "mean over %zu layer(s): predicted max/mean %.3f", profile->layers.size(),
               predicted / n);
  if (traced) {
    summary["trace_max_over_mean"] = window / n;
    summary["trace_step_max_over_mean"] = perStep / n;
    summary["trace_steps"] = traced->steps;
    std::fprintf(txt, "; trace (%zu steps) %.3f over the window, %.3f a step", traced->steps,
                 window / n, perStep / n);
  }
  std::fprintf(txt, "\n");
  if (out.wantsJson()) {
    json document = {{"strategy", f.strategy},   {"ranks", f.ranks},
                     {"ranks_per_node", f.ranksPerNode}, {"redundant", f.redundant},
                     {"num_experts", experts},   {"layers", layers},
                     {"summary", summary}};
    if (rt::Status st = out.writeJson(document); !st)
      return fail(st.message());
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  moe::tools::Cli cli("moe-place", "moe-place: place experts on ranks from a routing profile, "
                                   "and replay a routing trace over the placement");
  Flags f;
  CLI::App &app = cli.app;
  app.add_option("--profile", f.profile, "the routing profile (moe-run --routing-profile)")
      ->required()
      ->type_name("FILE");
  app.add_option("--ranks", f.ranks, "expert-parallel ranks")
      ->required()
      ->check(moe::tools::integerIn(1, 1 << 16))
      ->type_name("N");
  app.add_option("--ranks-per-node", f.ranksPerNode,
                 "ranks of one node: experts are balanced over nodes first (default: one node)")
      ->check(moe::tools::integerIn(0, 1 << 16))
      ->type_name("K");
  app.add_option("--redundant", f.redundant,
                 "slots beyond one per expert, for replicas of the hottest (default 0)")
      ->check(moe::tools::integerIn(0, 1 << 20))
      ->type_name("R");
  app.add_option("--strategy", f.strategy,
                 "balanced (replicas, then nodes and ranks packed heaviest first; default) or "
                 "round-robin (expert e on rank e mod N)")
      ->check(moe::tools::oneOf({"balanced", "round-robin"}))
      ->type_name("S");
  app.add_option("--trace", f.trace, "a routing trace to replay (tools/make-routing-trace.py)")
      ->type_name("FILE");
  app.add_option("--days", f.days, "the trace's days to replay, FIRST:LAST (default: all)")
      ->type_name("A:B");
  cli.addJson(f.json);
  if (auto code = cli.parse(argc, argv))
    return *code;
  return run(f, cli);
}
