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
#include "moe/abi/RoutingProfile.h"
#include "tools/common/Cli.h"
#include "tools/common/Output.h"
#include "tools/common/PlacementReport.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <optional>

namespace pl = moe::placement;
namespace rt = moe::rt;
using nlohmann::json;

namespace {

struct Flags {
  std::string profile, trace, json, strategy = "balanced", days;
  int ranks = 0, ranksPerNode = 0, redundant = 0;
};

int run(const Flags &f, moe::tools::Cli &cli) {
  auto fail = [&](const std::string &m) { return cli.fail(m); };
  moe::tools::Output out(f.json);
  if (rt::Status st = out.open(); !st)
    return fail(st.message());
  auto profile = moe::tools::readProfile(f.profile);
  if (!profile)
    return fail(profile.status().message());
  const int experts = int(profile->numExperts);
  const pl::Options options{f.ranks, f.ranksPerNode, f.redundant};
  if (f.strategy == "round-robin" && (f.redundant != 0 || experts % f.ranks != 0))
    return fail("round-robin places each expert once: it needs --redundant 0 and a rank count "
                "that divides " + std::to_string(experts) + " experts");
  if (std::string why = pl::checkOptions(experts, options); !why.empty())
    return fail(why);
  std::vector<moe::tools::LayerPlacement> layers;
  std::vector<int64_t> ids;
  for (const rt::RoutingProfile::Layer &l : profile->layers) {
    pl::Placement p = f.strategy == "round-robin" ? pl::roundRobin(experts, f.ranks)
                                                  : pl::balanced(l.counts, options);
    if (std::string why = pl::verify(p, experts); !why.empty())
      return fail("internal: the placement of layer " + std::to_string(l.layer) +
                  " is not valid: " + why);
    layers.push_back({l.layer, std::move(p), &l.counts});
    ids.push_back(l.layer);
  }
  auto trace = moe::tools::readTrace(f.trace, f.days, ids, experts);
  if (!trace)
    return fail(trace.status().message());
  std::fprintf(out.text(),
               "%s placement of %d experts on %d rank(s)%s, %d redundant slot(s), %d a rank\n",
               f.strategy.c_str(), experts, f.ranks,
               f.ranksPerNode
                   ? (" (" + std::to_string(f.ranks / f.ranksPerNode) + " nodes)").c_str()
                   : "",
               f.redundant, (experts + f.redundant) / f.ranks);
  json report = moe::tools::reportPlacement(out.text(), layers, *trace ? &**trace : nullptr);
  if (out.wantsJson()) {
    json document = {{"strategy", f.strategy},
                     {"ranks", f.ranks},
                     {"ranks_per_node", f.ranksPerNode},
                     {"redundant", f.redundant},
                     {"num_experts", experts},
                     {"layers", report["layers"]},
                     {"summary", report["summary"]}};
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
      ->check(moe::tools::integerIn(1, pl::kMaxRanks))
      ->type_name("N");
  app.add_option("--ranks-per-node", f.ranksPerNode,
                 "ranks of one node: experts are balanced over nodes first (default: one node)")
      ->check(moe::tools::integerIn(0, pl::kMaxRanks))
      ->type_name("K");
  app.add_option("--redundant", f.redundant,
                 "slots beyond one per expert, for replicas of the hottest (default 0)")
      ->check(moe::tools::integerIn(0, pl::kMaxRedundant))
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
