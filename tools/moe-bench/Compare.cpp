//===- Compare.cpp - two plans timed in turn on one workload --------------===//
#include "tools/moe-bench/Compare.h"

#include <algorithm>

namespace moe::bench {

std::vector<double> Comparison::ratios() const {
  std::vector<double> r;
  for (size_t i = 0; i < seconds.size(); ++i)
    r.push_back(seconds[i] / std::max(otherSeconds[i], 1e-12));
  return r;
}

double Comparison::medianRatio() const {
  std::vector<double> r = ratios();
  std::sort(r.begin(), r.end());
  if (r.empty())
    return 0;
  return r.size() % 2 ? r[r.size() / 2] : (r[r.size() / 2 - 1] + r[r.size() / 2]) / 2;
}

rt::Expected<Comparison> compare(const rt::LoadedPlan &plan, const rt::LoadedPlan &other,
                                 rt::Device &device, const rt::EngineOptions &options,
                                 const std::vector<rt::GenerationRequest> &requests,
                                 const Load &load, int64_t rounds) {
  Comparison c;
  for (int64_t r = 0; r < rounds; ++r) {
    Outcome outcomes[2];
    // Odd rounds start with the other plan.
    for (int k = 0; k < 2; ++k) {
      const bool mine = (k == 0) == (r % 2 == 0);
      auto o = drive(mine ? plan : other, device, options, requests, load, false);
      if (!o)
        return o.status();
      outcomes[mine ? 0 : 1] = o.take();
    }
    c.seconds.push_back(outcomes[0].seconds);
    c.otherSeconds.push_back(outcomes[1].seconds);
    const auto &a = outcomes[0].results, &b = outcomes[1].results;
    c.sameTokens &= a.size() == b.size() &&
                    std::equal(a.begin(), a.end(), b.begin(), [](const auto &x, const auto &y) {
                      return x.id == y.id && x.tokens == y.tokens;
                    });
  }
  return c;
}

void printComparison(std::FILE *out, const std::string &other, const Comparison &c) {
  std::vector<double> r = c.ratios();
  std::fprintf(out,
               "  vs %s (%zu rounds in turn): time ratio this / other median %.3f (min %.3f, "
               "max %.3f), %.3fx as fast; %s\n",
               other.c_str(), r.size(), c.medianRatio(), *std::min_element(r.begin(), r.end()),
               *std::max_element(r.begin(), r.end()), 1 / c.medianRatio(),
               c.sameTokens ? "the same tokens" : "DIFFERENT tokens");
  std::fprintf(out, "    seconds per round, this / other:");
  for (size_t i = 0; i < r.size(); ++i)
    std::fprintf(out, " %.3f/%.3f", c.seconds[i], c.otherSeconds[i]);
  std::fprintf(out, "\n");
}

nlohmann::json comparisonJson(const std::string &other, const Comparison &c) {
  return {{"other", other},
          {"seconds", c.seconds},
          {"other_seconds", c.otherSeconds},
          {"ratios", c.ratios()},
          {"median_ratio", c.medianRatio()},
          {"same_tokens", c.sameTokens}};
}

} // namespace moe::bench
