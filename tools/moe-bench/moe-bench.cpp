//===- moe-bench.cpp - serving benchmark: continuous batching -------------===//
//
// Sends a workload (random prompts, or a JSON Lines file) through the
// runtime's Engine, closed loop (--concurrency: keep C requests in flight)
// or open loop (--rate: Poisson arrivals), and reports throughput, time to
// first token and inter-token latency percentiles, KV use, preemptions and
// host-swap traffic. --verify reruns every request alone and checks that the
// batched output is token-identical. No MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "tools/common/Args.h"
#include "tools/common/RuntimeFlags.h"
#include "tools/moe-bench/Driver.h"
#include "tools/moe-bench/Report.h"
#include "tools/moe-bench/Workload.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>

using namespace moe;
using namespace moe::bench;

namespace {

const char *kHelp = R"(moe-bench: serving benchmark (continuous batching, paged KV cache)

usage: moe-bench <plan-dir> [options]

load (one of; default --concurrency 8):
  --concurrency LIST   closed loop: requests in flight, e.g. 1,8,32
  --rate LIST          open loop: Poisson arrivals, requests per second, e.g. 5,20
  --requests N         requests per level (default: 4 x concurrency; 64 with --rate)
workload (random prompts unless --workload):
  --prompt-len A:B     prompt lengths, uniform in [A, B] (default 16:64)
  --output-len A:B     new tokens per request (default 16:64)
  --shared-prefix N    every prompt starts with the same N tokens (default 0)
  --workload FILE      JSON Lines, one request per line: {"output_len": N} with
                       one of "prompt" (text), "prompt_tokens" ([ids]) or
                       "prompt_len" (random ids)
  --seed S             seed of prompts and arrivals (default 0)
engine:
  --block-size N       KV tokens per block (default 16)
  --kv-blocks N        KV pool size in blocks (default: 32 of the longest requests)
  --budget N           tokens per step (default: the plan's max batch)
  --max-waiting N      waiting-queue bound (default 1024)
  --kv-dtype T         KV-cache type: f32, bf16, int8, fp8 (default: the plan's)
  --memory-limit MIB   refuse to start if weights + activations + KV pool exceed it
  --host-pool MIB      host memory for the KV of preempted requests (swap out,
                       swap back in later); without it preemption recomputes
  --prefix-caching     share KV blocks of common prefixes; each level also runs
                       without it and prints the ratios
checks and output:
  --verify             rerun each request alone; require identical outputs
  --json FILE          write the results as JSON

Requests the engine refuses (too long for the context, bad token ids, more
KV blocks than the pool) are reported and the rest are served; the exit
status is then 1.
)";

int fail(const std::string &m) {
  std::cerr << "moe-bench: error: " << m << "\n";
  return 1;
}

std::pair<int64_t, int64_t> range(const tools::Args &args, const std::string &name,
                                  int64_t lo, int64_t hi) {
  if (!args.has(name))
    return {lo, hi};
  std::string v = args.str(name);
  size_t colon = v.find(':');
  char *end = nullptr;
  long long a = std::strtoll(v.c_str(), &end, 10);
  long long b = colon == std::string::npos ? a : std::strtoll(v.c_str() + colon + 1, &end, 10);
  if (*end || a < 1 || b < a)
    throw tools::ArgError("--" + name + " takes A:B with 1 <= A <= B, got '" + v + "'");
  return {a, b};
}

/// How many of `o`'s results equal running their request alone.
rt::Expected<int64_t> verify(const rt::LoadedPlan &plan, rt::Device &device,
                             const rt::EngineOptions &options,
                             const std::vector<rt::GenerationRequest> &requests,
                             const Outcome &o) {
  int64_t identical = 0;
  for (const rt::GenerationResult &r : o.results) {
    auto alone = drive(plan, device, options, {requests[size_t(r.id)]}, Load{1, {}}, false);
    if (!alone)
      return alone.status();
    identical += alone->results.at(0).tokens == r.tokens;
  }
  return identical;
}

int benchMain(const tools::Args &args) {
  if (args.positional.size() != 1)
    return fail("expected one plan directory (see --help)");
  auto plan = rt::LoadedPlan::open(args.positional[0]);
  if (!plan)
    return fail(plan.status().message());
  auto device = rt::createCpuDevice();
  const plan::Plan &p = (*plan)->plan();
  int64_t context = p.kv_cache()->max_context(), vocab = p.config()->vocab_size();
  uint64_t seed = uint64_t(args.integer("seed", 0));

  bool open = args.has("rate");
  if (open && args.has("concurrency"))
    return fail("--rate (open loop) and --concurrency (closed loop) exclude each other");
  std::vector<double> levels =
      open ? args.numbers("rate")
           : (args.has("concurrency")
                  ? [&] {
                      std::vector<double> c;
                      for (int64_t v : args.integers("concurrency"))
                        c.push_back(double(v));
                      return c;
                    }()
                  : std::vector<double>{8});
  for (double l : levels)
    if (!(l > 0))
      return fail(std::string(open ? "--rate" : "--concurrency") + " values must be positive");

  std::vector<rt::GenerationRequest> fromFile;
  SyntheticSpec spec;
  spec.seed = seed;
  if (args.has("workload")) {
    for (const char *flag : {"prompt-len", "output-len", "shared-prefix", "requests"})
      if (args.has(flag))
        return fail(std::string("--") + flag + " does not apply to --workload");
    auto w = readWorkload(args.str("workload"), p, seed);
    if (!w)
      return fail(w.status().message());
    fromFile = w.take();
  } else {
    std::tie(spec.promptLo, spec.promptHi) = range(args, "prompt-len", 16, 64);
    std::tie(spec.outputLo, spec.outputHi) = range(args, "output-len", 16, 64);
    spec.sharedPrefix = args.integer("shared-prefix", 0);
    if (spec.sharedPrefix < 0)
      return fail("--shared-prefix must be >= 0");
    int64_t longest = spec.sharedPrefix + spec.promptHi + spec.outputHi;
    if (longest > context)
      return fail("prompt + output lengths up to " + std::to_string(longest) +
                  " exceed the plan's context of " + std::to_string(context));
  }

  rt::EngineOptions options;
  options.blockSize = args.integer("block-size", 16);
  if (options.blockSize < 1)
    return fail("--block-size must be positive");
  int64_t longest = spec.sharedPrefix + spec.promptHi + spec.outputHi;
  if (!fromFile.empty()) {
    longest = 0;
    for (const rt::GenerationRequest &r : fromFile)
      longest = std::max(longest, std::min(context, int64_t(r.prompt.size()) + r.maxNewTokens));
  }
  options.numBlocks =
      args.integer("kv-blocks", 32 * ((longest + options.blockSize - 1) / options.blockSize));
  options.tokenBudget = args.integer("budget", 0);
  if (args.has("budget") && options.tokenBudget < 1)
    return fail("--budget must be a positive token count, got " +
                std::to_string(options.tokenBudget));
  options.maxWaiting = args.integer("max-waiting", 1024);
  options.kvDtype = tools::kvDtypeFlag(args);
  options.memoryLimit = tools::memoryLimitFlag(args);
  if (args.has("host-pool")) {
    double mib = args.number("host-pool", 0);
    if (!(mib > 0))
      return fail("--host-pool must be a positive size in MiB, got " + args.str("host-pool") +
                  "; leave it out to preempt by recompute");
    options.hostPoolBytes = uint64_t(mib * 1048576.0);
  }

  bool progress = ::isatty(2);
  std::string json = "{\"plan\": \"" + args.positional[0] +
                     "\", \"kv_blocks\": " + std::to_string(options.numBlocks) +
                     ", \"block_size\": " + std::to_string(options.blockSize) +
                     ", \"host_pool_bytes\": " +
                     std::to_string(options.hostPoolBytes.value_or(0)) + ", \"levels\": [";
  size_t invalid = 0, submitted = 0;
  for (size_t li = 0; li < levels.size(); ++li) {
    double level = levels[li];
    Load load{int64_t(level), {}};
    std::vector<rt::GenerationRequest> requests = fromFile;
    if (fromFile.empty()) {
      spec.requests = args.integer("requests", open ? 64 : 4 * int64_t(level));
      if (spec.requests < 1)
        return fail("--requests must be positive");
      requests = syntheticWorkload(spec, vocab);
    }
    if (open)
      load.arrivals = poissonArrivals(requests.size(), level, seed);

    Outcome baseline;
    rt::EngineOptions levelOptions = options;
    if (args.has("prefix-caching")) {
      auto plain = drive(**plan, *device, options, requests, load, progress);
      if (!plain)
        return fail(plain.status().message());
      baseline = plain.take();
      levelOptions.prefixCaching = true;
    }
    auto outcome = drive(**plan, *device, levelOptions, requests, load, progress);
    if (!outcome)
      return fail(outcome.status().message());
    const Outcome &o = *outcome;
    for (size_t i = 0; i < o.invalid.size() && i < 5; ++i)
      std::cerr << "moe-bench: request " << o.invalid[i].request << ": "
                << o.invalid[i].reason << "\n";
    if (o.invalid.size() > 5)
      std::cerr << "moe-bench: ... and " << o.invalid.size() - 5 << " more rejected\n";
    invalid += o.invalid.size();
    submitted += requests.size();

    Level report{open ? "rate" : "concurrency", level, requests.size(), &o, -1};
    if (args.has("verify")) {
      auto identical = verify(**plan, *device, levelOptions, requests, o);
      if (!identical)
        return fail(identical.status().message());
      report.identical = *identical;
    }
    printLevel(report, options.numBlocks);
    if (levelOptions.prefixCaching) {
      const rt::EngineStats &on = o.stats, &off = baseline.stats;
      std::printf("  prefix caching: %llu prompt tokens served from cache; vs without: peak KV "
                  "blocks %lld / %lld = %.2f, prefill tokens computed %llu / %llu = %.2f, "
                  "prefill time %.3f / %.3f s = %.2f\n",
                  (unsigned long long)on.cachedTokens, (long long)on.peakBlocks,
                  (long long)off.peakBlocks,
                  double(on.peakBlocks) / double(std::max<int64_t>(1, off.peakBlocks)),
                  (unsigned long long)on.prefillTokens, (unsigned long long)off.prefillTokens,
                  double(on.prefillTokens) / double(std::max<uint64_t>(1, off.prefillTokens)),
                  on.prefillSeconds, off.prefillSeconds,
                  on.prefillSeconds / std::max(1e-9, off.prefillSeconds));
    }
    json += (li ? ", " : "") + levelJson(report);
    if (report.identical >= 0 && report.identical != int64_t(o.results.size()))
      return fail("batched outputs differ from solo runs");
    if (o.results.size() + o.queueFull + o.invalid.size() != requests.size())
      return fail("requests lost: " + std::to_string(requests.size() - o.results.size() -
                                                     o.queueFull - o.invalid.size()));
  }
  json += "]}\n";
  if (args.has("json")) {
    std::ofstream out(args.str("json"));
    out << json;
    if (!out)
      return fail(args.str("json") + ": cannot write");
  }
  if (invalid)
    return fail(std::to_string(invalid) + " of " + std::to_string(submitted) +
                " requests rejected as invalid (reasons above); the others were served");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  return tools::toolMain(argc, argv, "moe-bench", kHelp,
                         {"concurrency", "rate", "requests", "prompt-len", "output-len", "seed",
                          "block-size", "kv-blocks", "budget", "max-waiting", "json",
                          "shared-prefix", "kv-dtype", "host-pool", "workload", "memory-limit"},
                         {"verify", "prefix-caching"}, benchMain);
}
