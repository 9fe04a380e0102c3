//===- AutoOverlap.cpp - moe-compile --overlap auto -----------------------===//
#include "AutoOverlap.h"
#include "moe/runtime/Plan.h"
#include "tools/plan-cost/Simulate.h"

#include "llvm/Support/Format.h"

#include <filesystem>

namespace moe {

bool chooseOverlap(const OverlapCompileFn &compile, const AutoOverlapOptions &options,
                   std::string &policy, int64_t &microBatches, llvm::raw_ostream &log,
                   std::string &error) {
  auto hw = cost::Hardware::load(options.hardware);
  if (!hw) {
    error = hw.status().message();
    return false;
  }
  std::optional<rt::LinkModel> link = hw->link;
  if (!options.link.empty())
    link = *rt::LinkModel::parse(options.link); // checked by the flag
  if (!link) {
    error = options.hardware + " states no link between ranks: give one with --link";
    return false;
  }
  struct Candidate {
    const char *policy;
    int64_t parts;
    double step = 0;
  };
  std::vector<Candidate> candidates = {{"none", 2}, {"two-batch", 2}, {"two-batch", 3},
                                       {"two-batch", 4}};
  std::error_code ec;
  std::filesystem::create_directories(options.candidates, ec);
  size_t best = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Candidate &c = candidates[i];
    const std::string dir = options.candidates + "/overlap-" + std::to_string(i);
    if (!compile(c.policy, c.parts, dir, error))
      return false;
    rt::LoadOptions plan;
    plan.mapWeights = false;
    auto loaded = rt::LoadedPlan::open(dir, plan);
    if (!loaded) {
      error = loaded.status().message();
      return false;
    }
    const int64_t tokens =
        options.tokens > 0 ? options.tokens : (*loaded)->plan().max_batch_tokens();
    auto sim = cost::simulate((*loaded)->plan(), 0, *hw, *link, tokens);
    if (!sim) {
      error = sim.status().message();
      return false;
    }
    c.step = sim->step;
    log << "moe-compile: --overlap auto: " << c.policy;
    if (std::string(c.policy) != "none")
      log << " in " << c.parts << " micro-batches";
    log << ": " << llvm::format("%.3f", c.step * 1e3) << " ms per step of " << tokens
        << " tokens on " << hw->name << "\n";
    // More parts (or any) only for a step faster by more than 1%: fewer
    // events, less arena.
    if (c.step < candidates[best].step * 0.99)
      best = i;
  }
  std::filesystem::remove_all(options.candidates, ec);
  policy = candidates[best].policy;
  microBatches = candidates[best].parts;
  return true;
}

} // namespace moe
