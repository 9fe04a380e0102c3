//===- moe-roofline.cpp - how close a plan runs to this machine's limits --===//
//
// Measures the machine (STREAM triad bandwidth; matmul peak through oneDNN)
// and then, for a plan (and optionally a baseline plan, e.g. compiled
// without fusion), decode at batch 1 against the bandwidth roofline (weight
// and KV bytes per token from the plan), prefill against the matmul peak
// (FLOPs from the plan), and decode at batch B as a multiple of batch 1.
// Ratios between the two plans come from this one run.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Engine.h"
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "tools/common/Args.h"
#include "tools/moe-roofline/Machine.h"
#include "tools/moe-roofline/PlanCost.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <vector>

using namespace moe;

namespace {

const char *kHelp = R"(moe-roofline: a plan's speed against this machine's roofline

usage: moe-roofline <plan-dir> [--baseline <plan-dir>] [options]

  --baseline DIR       a second plan (e.g. compiled with fusion off); ratios
                       plan / baseline are printed
  --decode-steps N     decode tokens timed per sequence (default 32)
  --prompt-len N       prompt tokens before decoding (default 16)
  --batch B            sequences decoded together for the batched figure (default 64)
  --prefill-tokens P   tokens of the timed prefill (default: the plan's max batch)
  --triad-mib M        size of each STREAM array (default 256)
  --repeats N          measure the machine and each plan N times, alternating,
                       keep the best of each (default 3)
  --json FILE          write the figures as JSON
)";

int fail(const std::string &m) {
  std::cerr << "moe-roofline: error: " << m << "\n";
  return 1;
}

struct Figures {
  double decode1 = 0, decodeB = 0; ///< tokens/s
  double bytesPerToken = 0, prefillSeconds = 0, prefillFlops = 0;
  int64_t prefillTokens = 0;
};

/// Decode tokens/s of `batch` sequences decoding together (engine clock,
/// decode share of each step).
rt::Expected<double> decodeRate(const rt::LoadedPlan &plan, rt::Device &device, int64_t batch,
                                int64_t prompt, int64_t steps, int64_t vocab) {
  rt::EngineOptions o;
  int64_t perSeq = (prompt + steps + 1 + o.blockSize - 1) / o.blockSize;
  o.numBlocks = batch * perSeq;
  o.maxWaiting = batch;
  auto engine = rt::Engine::create(plan, device, o);
  if (!engine)
    return engine.status();
  std::mt19937 rng(7);
  for (int64_t b = 0; b < batch; ++b) {
    rt::GenerationRequest r;
    for (int64_t i = 0; i < prompt; ++i)
      r.prompt.push_back(int32_t(rng() % uint32_t(vocab)));
    r.maxNewTokens = steps + 1;
    if (auto id = (*engine)->submit(r); !id)
      return id.status();
  }
  while (!(*engine)->idle())
    if (rt::Status st = (*engine)->step(); !st)
      return st;
  const rt::EngineStats &s = (*engine)->stats();
  return double(s.decodeTokens) / s.decodeSeconds;
}

rt::Expected<Figures> measure(const std::string &dir, const tools::Args &args) {
  auto plan = rt::LoadedPlan::open(dir);
  if (!plan)
    return plan.status();
  const plan::Plan &p = (*plan)->plan();
  auto device = rt::createCpuDevice();
  int64_t vocab = p.config()->vocab_size(), steps = args.integer("decode-steps", 32);
  int64_t prompt = args.integer("prompt-len", 16), batch = args.integer("batch", 64);
  if (steps < 1 || prompt < 1 || batch < 1)
    throw tools::ArgError("--decode-steps, --prompt-len and --batch must be positive");
  Figures f;
  std::fprintf(stderr, "  %s: decode batch 1 ...\n", dir.c_str());
  auto d1 = decodeRate(**plan, *device, 1, prompt, steps, vocab);
  if (!d1)
    return d1.status();
  f.decode1 = *d1;
  std::fprintf(stderr, "  %s: decode batch %lld ...\n", dir.c_str(), (long long)batch);
  auto dB = decodeRate(**plan, *device, batch, prompt, steps, vocab);
  if (!dB)
    return dB.status();
  f.decodeB = *dB;

  // Prefill: one sequence, positions 0 .. P-1, best of two.
  std::fprintf(stderr, "  %s: prefill ...\n", dir.c_str());
  f.prefillTokens = args.integer("prefill-tokens", p.max_batch_tokens());
  if (f.prefillTokens < 1 || f.prefillTokens > p.max_batch_tokens() ||
      f.prefillTokens > p.kv_cache()->max_context())
    throw tools::ArgError("--prefill-tokens must lie in [1, " +
                          std::to_string(std::min<int64_t>(p.max_batch_tokens(),
                                                           p.kv_cache()->max_context())) +
                          "] for this plan");
  rt::SessionOptions so;
  so.maxContext = f.prefillTokens;
  auto session = rt::Session::create(**plan, *device, so);
  if (!session)
    return session.status();
  std::vector<int32_t> tokens(size_t(f.prefillTokens)), positions(tokens.size());
  std::mt19937 rng(11);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = int32_t(rng() % uint32_t(vocab));
    positions[i] = int32_t(i);
  }
  std::vector<float> logits(tokens.size() * size_t(vocab));
  f.prefillSeconds = 1e30;
  for (int r = 0; r < 2; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    if (rt::Status st = (*session)->forward(tokens.data(), positions.data(), f.prefillTokens,
                                            logits.data());
        !st)
      return st;
    f.prefillSeconds = std::min(
        f.prefillSeconds,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  f.prefillFlops = roofline::prefillFlops(p, f.prefillTokens);
  // KV read per decode token at the mean timed context.
  double kvPerToken = double((*session)->kvBlockBytes()) / double((*session)->blockSize());
  f.bytesPerToken = double(roofline::decodeWeightBytes(p)) + kvPerToken * double(prompt + steps / 2);
  return f;
}

void report(const std::string &name, const Figures &f, double triad, double peak,
            int64_t batch) {
  double roof = triad * 1e9 / f.bytesPerToken;
  double prefillRate = f.prefillFlops / f.prefillSeconds / 1e9;
  std::printf("%s\n", name.c_str());
  std::printf("  decode batch 1: %.2f tok/s; %.1f MB read per token; roofline %.2f tok/s; "
              "%.2f of roofline (%.2f GB/s)\n",
              f.decode1, f.bytesPerToken / 1e6, roof, f.decode1 / roof,
              f.decode1 * f.bytesPerToken / 1e9);
  std::printf("  prefill %lld tokens: %.3f s, %.1f GFLOP, %.1f GFLOP/s = %.2f of matmul peak\n",
              (long long)f.prefillTokens, f.prefillSeconds, f.prefillFlops / 1e9, prefillRate,
              prefillRate / peak);
  std::printf("  decode batch %lld: %.1f tok/s = %.1fx batch 1\n", (long long)batch, f.decodeB,
              f.decodeB / f.decode1);
}

std::string json(const Figures &f, double triad, double peak) {
  std::ostringstream j;
  double roof = triad * 1e9 / f.bytesPerToken;
  j << "{\"decode1_tokens_per_second\": " << f.decode1
    << ", \"bytes_per_token\": " << f.bytesPerToken << ", \"roofline_tokens_per_second\": " << roof
    << ", \"roofline_fraction\": " << f.decode1 / roof
    << ", \"prefill_tokens\": " << f.prefillTokens << ", \"prefill_seconds\": " << f.prefillSeconds
    << ", \"prefill_gflops\": " << f.prefillFlops / 1e9
    << ", \"prefill_peak_fraction\": " << f.prefillFlops / f.prefillSeconds / 1e9 / peak
    << ", \"decode_batch_tokens_per_second\": " << f.decodeB
    << ", \"batch_speedup\": " << f.decodeB / f.decode1 << "}";
  return j.str();
}

int rooflineMain(const tools::Args &args) {
  if (args.positional.size() != 1)
    return fail("expected one plan directory (see --help)");
  int64_t mib = args.integer("triad-mib", 256);
  if (mib < 1)
    return fail("--triad-mib must be positive");
  int64_t batch = args.integer("batch", 64), repeats = args.integer("repeats", 3);
  if (repeats < 1)
    return fail("--repeats must be positive");
  // The ceilings are measured before every round and the best kept: other
  // tenants of a shared machine only ever lower them, and a low ceiling
  // would flatter the fractions. Plan and baseline alternate, best of
  // `repeats` each, so that a noisy moment does not favour one of them.
  double triad = 0.0;
  roofline::MatmulPeak peak{0.0, ""};
  std::vector<std::string> dirs = {args.positional[0]};
  if (args.has("baseline"))
    dirs.push_back(args.str("baseline"));
  std::vector<Figures> best(dirs.size());
  for (int64_t r = 0; r < repeats; ++r) {
    std::fprintf(stderr, "measuring the machine ...\n");
    triad = std::max(triad, roofline::triadGBps(size_t(mib) << 18, 10));
    roofline::MatmulPeak p = roofline::matmulPeak(2048);
    if (p.gflops > peak.gflops)
      peak = p;
    for (size_t i = 0; i < dirs.size(); ++i) {
      auto f = measure(dirs[i], args);
      if (!f)
        return fail(f.status().message());
      Figures &b = best[i];
      if (r == 0) {
        b = *f;
        continue;
      }
      b.decode1 = std::max(b.decode1, f->decode1);
      b.decodeB = std::max(b.decodeB, f->decodeB);
      b.prefillSeconds = std::min(b.prefillSeconds, f->prefillSeconds);
    }
  }
  double ours = roofline::linearGflops(cpu::WeightType::BF16, 512, 2048, 2048);
  std::printf("machine: %d threads; STREAM triad %.2f GB/s; matmul peak %.1f GFLOP/s (%s); our "
              "linear kernel, bf16 weights, 512 x 2048 x 2048: %.1f GFLOP/s = %.2f of peak "
              "(ceilings: best of %lld measurements between the runs)\n",
              omp_get_max_threads(), triad, peak.gflops, peak.how.c_str(), ours,
              ours / peak.gflops, (long long)repeats);
  report("plan " + dirs[0], best[0], triad, peak.gflops, batch);
  std::ostringstream j;
  j << "{\"triad_gbps\": " << triad << ", \"matmul_peak_gflops\": " << peak.gflops
    << ", \"linear_bf16_gflops\": " << ours << ", \"batch\": " << batch
    << ", \"plan\": " << json(best[0], triad, peak.gflops);
  if (dirs.size() > 1) {
    const Figures &p = best[0], &b = best[1];
    report("baseline " + dirs[1], b, triad, peak.gflops, batch);
    std::printf("plan / baseline: decode batch 1 %.3f, prefill speed %.3f, decode batch %lld "
                "%.3f\n",
                p.decode1 / b.decode1, b.prefillSeconds / p.prefillSeconds, (long long)batch,
                p.decodeB / b.decodeB);
    j << ", \"baseline\": " << json(b, triad, peak.gflops);
  }
  j << "}\n";
  if (args.has("json")) {
    std::ofstream out(args.str("json"));
    out << j.str();
    if (!out)
      return fail(args.str("json") + ": cannot write");
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  return tools::toolMain(argc, argv, "moe-roofline", kHelp,
                         {"baseline", "decode-steps", "prompt-len", "batch", "prefill-tokens",
                          "triad-mib", "repeats", "json"},
                         {}, rooflineMain);
}
