//===- moe-bench.cpp - serving benchmark: continuous batching -------------===//
//
// Closed loop: keeps C requests in flight (C from --concurrency) until N
// requests have completed, on the paged KV pool, and reports throughput,
// time to first token and inter-token latency percentiles, KV usage and
// preemptions. --verify reruns every request alone and checks that the
// batched output is token-identical. No MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Engine.h"
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "tools/common/Args.h"
#include "tools/common/KvDtypeFlag.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

using namespace moe::rt;

namespace {

const char *kHelp = R"(moe-bench: serving benchmark (continuous batching, paged KV cache)

usage: moe-bench <plan-dir> [options]

  --concurrency LIST   requests in flight, e.g. 1,8,32 (default 8)
  --requests N         requests per level (default: 4 x concurrency)
  --prompt-len A:B     prompt lengths, uniform in [A, B] (default 16:64)
  --output-len A:B     new tokens per request (default 16:64)
  --seed S             workload seed (default 0)
  --block-size N       KV tokens per block (default 16)
  --kv-blocks N        KV pool size in blocks (default: 32 full-length sequences)
  --budget N           tokens per step (default: the plan's max batch)
  --max-waiting N      waiting-queue bound (default 1024)
  --kv-dtype T         KV-cache type: f32, bf16, int8, fp8 (default: the plan's)
  --shared-prefix N    every prompt starts with the same N tokens (default 0)
  --prefix-caching     share KV blocks of common prefixes; each level also runs
                       without it and prints the ratios
  --verify             rerun each request alone; require identical outputs
  --json FILE          write the results as JSON
)";

int fail(const std::string &m) {
  std::cerr << "moe-bench: error: " << m << "\n";
  return 1;
}

std::pair<int64_t, int64_t> range(const moe::tools::Args &args, const std::string &name,
                                  int64_t lo, int64_t hi) {
  if (!args.has(name))
    return {lo, hi};
  std::string v = args.str(name);
  size_t colon = v.find(':');
  char *end = nullptr;
  long long a = std::strtoll(v.c_str(), &end, 10);
  long long b = colon == std::string::npos ? a : std::strtoll(v.c_str() + colon + 1, &end, 10);
  if (*end || a < 1 || b < a)
    throw moe::tools::ArgError("--" + name + " takes A:B with 1 <= A <= B, got '" + v + "'");
  return {a, b};
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p / 100.0 * double(v.size())))];
}

/// Runs `requests` through a fresh engine keeping `concurrency` in flight.
Expected<std::vector<GenerationResult>> run(const LoadedPlan &plan, Device &device,
                                            const EngineOptions &options,
                                            const std::vector<GenerationRequest> &requests,
                                            int64_t concurrency, EngineStats &stats,
                                            double &seconds, bool progress,
                                            int64_t *kvBytesPerBlock = nullptr) {
  auto engine = Engine::create(plan, device, options);
  if (!engine)
    return engine.status();
  Engine &e = **engine;
  std::vector<GenerationResult> done;
  size_t next = 0, rejected = 0;
  std::map<int64_t, int64_t> requestOf; // engine id -> index in `requests`
  auto start = std::chrono::steady_clock::now();
  while (done.size() + rejected < requests.size()) {
    while (next < requests.size() && int64_t(next - done.size() - rejected) < concurrency) {
      auto id = e.submit(requests[next]);
      // A full queue rejects the request (counted, reported); a request that
      // can never run means the workload does not fit the plan: stop.
      if (!id && id.status().message().find("queue is full") == std::string::npos)
        return Status::error("request " + std::to_string(next) + ": " + id.status().message());
      rejected += !id;
      if (id)
        requestOf[*id] = int64_t(next);
      ++next;
    }
    if (e.idle())
      continue;
    if (Status st = e.step(); !st)
      return st;
    for (GenerationResult &r : e.takeFinished()) {
      r.id = requestOf.at(r.id); // results name their request
      done.push_back(std::move(r));
    }
    if (progress && e.stats().steps % 20 == 0)
      std::fprintf(stderr, "\r  %zu/%zu requests done, %llu steps, %lld KV blocks in use   ",
                   done.size(), requests.size(), (unsigned long long)e.stats().steps,
                   (long long)e.stats().peakBlocks);
  }
  if (progress)
    std::fprintf(stderr, "\r%80s\r", "");
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stats = e.stats();
  if (kvBytesPerBlock)
    *kvBytesPerBlock = e.kvBytesPerBlock();
  std::sort(done.begin(), done.end(), [](auto &a, auto &b) { return a.id < b.id; });
  return done;
}

} // namespace

int main(int argc, char **argv) {
  if (moe::tools::wantsHelp(argc, argv)) {
    std::cout << kHelp;
    return 0;
  }
  try {
    moe::tools::Args args(argc, argv,
                          {"concurrency", "requests", "prompt-len", "output-len", "seed",
                           "block-size", "kv-blocks", "budget", "max-waiting", "json",
                           "shared-prefix", "kv-dtype"},
                          {"verify", "prefix-caching"});
    if (args.positional.size() != 1)
      return fail("expected one plan directory (see --help)");
    auto plan = LoadedPlan::open(args.positional[0]);
    if (!plan)
      return fail(plan.status().message());
    auto device = createCpuDevice();
    std::vector<int64_t> levels = args.has("concurrency") ? args.integers("concurrency")
                                                          : std::vector<int64_t>{8};
    auto [pLo, pHi] = range(args, "prompt-len", 16, 64);
    auto [oLo, oHi] = range(args, "output-len", 16, 64);
    const moe::plan::Plan &p = (*plan)->plan();
    int64_t context = p.kv_cache()->max_context(), vocab = p.config()->vocab_size();
    int64_t shared = args.integer("shared-prefix", 0);
    if (shared < 0)
      return fail("--shared-prefix must be >= 0");
    pLo += shared;
    pHi += shared;
    if (pHi + oHi > context)
      return fail("prompt + output lengths up to " + std::to_string(pHi + oHi) +
                  " exceed the plan's context of " + std::to_string(context));
    EngineOptions options;
    options.blockSize = args.integer("block-size", 16);
    int64_t perSequence = (pHi + oHi + options.blockSize - 1) / options.blockSize;
    options.numBlocks = args.integer("kv-blocks", 32 * perSequence);
    options.tokenBudget = args.integer("budget", 0);
    if (args.has("budget") && options.tokenBudget < 1)
      return fail("--budget must be a positive token count, got " +
                  std::to_string(options.tokenBudget));
    options.maxWaiting = args.integer("max-waiting", 1024);
    options.kvDtype = moe::tools::kvDtypeFlag(args);
    bool progress = ::isatty(2);
    std::ostringstream json;
    json << "{\"plan\": \"" << args.positional[0] << "\", \"kv_blocks\": " << options.numBlocks
         << ", \"block_size\": " << options.blockSize << ", \"levels\": [";
    for (size_t li = 0; li < levels.size(); ++li) {
      int64_t c = levels[li];
      if (c < 1)
        return fail("--concurrency values must be positive");
      int64_t n = args.integer("requests", 4 * c);
      std::mt19937_64 rng(uint64_t(args.integer("seed", 0)));
      std::vector<GenerationRequest> requests(static_cast<size_t>(n));
      auto token = [&] {
        return int32_t(std::uniform_int_distribution<int64_t>(std::min<int64_t>(3, vocab - 1),
                                                              vocab - 1)(rng));
      };
      std::vector<int32_t> prefix;
      for (int64_t i = 0; i < shared; ++i)
        prefix.push_back(token());
      for (GenerationRequest &r : requests) {
        int64_t len = std::uniform_int_distribution<int64_t>(pLo, pHi)(rng);
        r.prompt = prefix;
        for (int64_t i = shared; i < len; ++i)
          r.prompt.push_back(token());
        r.maxNewTokens = std::uniform_int_distribution<int64_t>(oLo, oHi)(rng);
      }
      EngineStats stats, baseline;
      double seconds = 0, baselineSeconds = 0;
      if (args.has("prefix-caching")) {
        auto plain = run(**plan, *device, options, requests, c, baseline, baselineSeconds,
                         progress);
        if (!plain)
          return fail(plain.status().message());
        options.prefixCaching = true;
      }
      int64_t kvBytesPerBlock = 0;
      auto results = run(**plan, *device, options, requests, c, stats, seconds, progress,
                         &kvBytesPerBlock);
      if (!results)
        return fail(results.status().message());
      std::vector<double> ttft, itl;
      uint64_t generated = 0;
      for (const GenerationResult &r : *results) {
        ttft.push_back((r.firstToken - r.submitted) * 1e3);
        for (size_t i = 1; i < r.tokenTimes.size(); ++i)
          itl.push_back((r.tokenTimes[i] - r.tokenTimes[i - 1]) * 1e3);
        generated += r.tokens.size();
      }
      int64_t identical = -1;
      if (args.has("verify")) {
        identical = 0;
        for (const GenerationResult &r : *results) {
          EngineStats solo;
          double s = 0;
          auto alone = run(**plan, *device, options, {requests[size_t(r.id)]}, 1, solo, s,
                           false);
          if (!alone)
            return fail(alone.status().message());
          identical += (*alone)[0].tokens == r.tokens;
        }
      }
      std::printf("concurrency %lld: %zu/%lld requests completed, %llu rejected (queue full) "
                  "in %.2f s: %.2f req/s, decode %.0f tok/s, prefill %.0f tok/s\n",
                  (long long)c, results->size(), (long long)n,
                  (unsigned long long)stats.rejected, seconds,
                  double(results->size()) / seconds,
                  stats.decodeSeconds > 0 ? double(stats.decodeTokens) / stats.decodeSeconds : 0,
                  stats.prefillSeconds > 0 ? double(stats.prefillTokens) / stats.prefillSeconds
                                           : 0);
      std::printf("  TTFT ms p50 %.1f p90 %.1f p99 %.1f | ITL ms p50 %.2f p90 %.2f p99 %.2f\n",
                  percentile(ttft, 50), percentile(ttft, 90), percentile(ttft, 99),
                  percentile(itl, 50), percentile(itl, 90), percentile(itl, 99));
      std::printf("  KV peak %lld of %lld blocks (%.2f MiB, %lld bytes per block); preemptions "
                  "%llu (%llu tokens recomputed); %llu generated tokens\n",
                  (long long)stats.peakBlocks, (long long)options.numBlocks,
                  double(stats.peakBlocks * kvBytesPerBlock) / 1048576.0,
                  (long long)kvBytesPerBlock,
                  (unsigned long long)stats.preemptions,
                  (unsigned long long)stats.recomputedTokens, (unsigned long long)generated);
      if (identical >= 0)
        std::printf("  verify: %lld/%zu outputs token-identical to running alone\n",
                    (long long)identical, results->size());
      if (options.prefixCaching) {
        std::printf("  prefix caching: %llu prompt tokens served from cache; vs without: peak KV "
                    "blocks %lld / %lld = %.2f, prefill tokens computed %llu / %llu = %.2f, "
                    "prefill time %.3f / %.3f s = %.2f\n",
                    (unsigned long long)stats.cachedTokens, (long long)stats.peakBlocks,
                    (long long)baseline.peakBlocks,
                    double(stats.peakBlocks) / double(std::max<int64_t>(1, baseline.peakBlocks)),
                    (unsigned long long)stats.prefillTokens,
                    (unsigned long long)baseline.prefillTokens,
                    double(stats.prefillTokens) / double(std::max<uint64_t>(1, baseline.prefillTokens)),
                    stats.prefillSeconds, baseline.prefillSeconds,
                    stats.prefillSeconds / std::max(1e-9, baseline.prefillSeconds));
        options.prefixCaching = false;
      }
      json << (li ? ", " : "") << "{\"concurrency\": " << c << ", \"requests\": " << n
           << ", \"completed\": " << results->size() << ", \"rejected\": " << stats.rejected << ", \"seconds\": " << seconds
           << ", \"requests_per_second\": " << double(results->size()) / seconds
           << ", \"decode_tokens\": " << stats.decodeTokens
           << ", \"prefill_tokens\": " << stats.prefillTokens
           << ", \"decode_seconds\": " << stats.decodeSeconds
           << ", \"prefill_seconds\": " << stats.prefillSeconds
           << ", \"ttft_ms\": [" << percentile(ttft, 50) << ", " << percentile(ttft, 90) << ", "
           << percentile(ttft, 99) << "], \"itl_ms\": [" << percentile(itl, 50) << ", "
           << percentile(itl, 90) << ", " << percentile(itl, 99)
           << "], \"peak_kv_blocks\": " << stats.peakBlocks
           << ", \"kv_bytes_per_block\": " << kvBytesPerBlock
           << ", \"preemptions\": " << stats.preemptions
           << ", \"recomputed_tokens\": " << stats.recomputedTokens
           << ", \"identical_to_solo\": " << identical << "}";
      if (identical >= 0 && identical != int64_t(results->size()))
        return fail("batched outputs differ from solo runs");
      if (int64_t(results->size() + stats.rejected) != n)
        return fail("requests lost: " + std::to_string(n - int64_t(results->size()) -
                                                       int64_t(stats.rejected)));
    }
    json << "]}\n";
    if (args.has("json")) {
      std::ofstream out(args.str("json"));
      out << json.str();
      if (!out)
        return fail(args.str("json") + ": cannot write");
    }
    return 0;
  } catch (const moe::tools::ArgError &e) {
    return fail(e.what());
  }
}
