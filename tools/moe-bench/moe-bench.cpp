//===- moe-bench.cpp - serving benchmark: continuous batching -------------===//
//
// Sends a workload (random prompts, or a JSON Lines file) through the
// runtime's Engine, closed loop (--concurrency: keep C requests in flight)
// or open loop (--rate: Poisson arrivals), or over HTTP to a moe-serve
// (--url), and reports throughput, the latencies `vllm bench serve` reports
// (TTFT, TPOT, ITL, E2EL: mean, median, p90, p99), KV use, preemptions and
// host-swap traffic. --verify reruns every request alone and checks that the
// batched output is token-identical. Under mpirun (a plan of several
// ranks) every rank serves the same requests, or with data-parallel
// attention (moe-compile --dp-attention) its share of them, and rank 0
// reports all, with each rank's memory. No MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/Registry.h"
#include "moe/runtime/RoutingWindow.h"
#include "moe/runtime/Stopping.h"
#include "tools/common/Cli.h"
#include "tools/common/Timeline.h"
#include "tools/moe-bench/Compare.h"
#include "tools/common/Output.h"
#include "tools/common/Ranks.h"
#include "tools/common/EngineFlags.h"
#include "tools/moe-bench/Driver.h"
#include "tools/moe-bench/HttpDriver.h"
#include "moe/serve/ApiKeys.h"
#include "tools/common/ModelName.h"
#include "tools/moe-bench/Report.h"
#include "tools/moe-bench/Workload.h"

#include <unistd.h>

#include <algorithm>
#include <optional>

using namespace moe;
using namespace moe::bench;

namespace {

/// A flag that does not apply with --url, and why.
struct InProcessOnly {
  const CLI::Option *option;
  std::string why;
};

struct Flags {
  std::string planDir, promptLen, outputLen, workload, json, routingProfile, outputs, compareTo,
      url, apiKeyFile, modelName, device = "cpu";
  int64_t rounds = 5;
  std::vector<int64_t> concurrency;
  std::vector<double> rate;
  int64_t requests = 0, sharedPrefix = 0;
  tools::EngineFlags engine;
  double profileDecay = 1;
  uint64_t seed = 0;
  int threads = 0;
  bool verify = false, prefixCaching = false, ignoreEos = false, perRequest = false;
  std::vector<std::string> stop;
  tools::TimelineFlags timeline;
  std::vector<InProcessOnly> inProcessOnly; ///< refused by name with --url
};

/// The options `add` puts on `app`, in the order it adds them.
template <class Add> std::vector<const CLI::Option *> optionsAddedBy(CLI::App &app, Add add) {
  const size_t before = app.get_options().size();
  add();
  std::vector<CLI::Option *> all = app.get_options();
  return {all.begin() + std::ptrdiff_t(before), all.end()};
}

/// "A:B" (or "A") with 1 <= A <= B; `dflt` when the flag is absent.
std::pair<int64_t, int64_t> range(const std::string &name, const std::string &v,
                                  std::pair<int64_t, int64_t> dflt) {
  if (v.empty())
    return dflt;
  size_t colon = v.find(':');
  char *end = nullptr;
  long long a = std::strtoll(v.c_str(), &end, 10), b = a;
  bool ok = end != v.c_str();
  if (colon != std::string::npos) {
    ok = ok && end == v.c_str() + colon;
    const char *second = v.c_str() + colon + 1;
    b = std::strtoll(second, &end, 10);
    ok = ok && end != second;
  }
  if (!ok || *end || a < 1 || b < a || b > (1 << 24))
    throw std::invalid_argument("--" + name + " takes A:B with 1 <= A <= B, got '" + v + "'");
  return {a, b};
}

/// How many of `o`'s results equal running their request alone.
rt::Expected<int64_t> verify(const rt::LoadedPlan &plan, rt::Device &device,
                             const rt::EngineOptions &options,
                             const std::vector<rt::GenerationRequest> &requests,
                             const Outcome &o) {
  int64_t identical = 0;
  rt::EngineOptions solo = options;
  solo.trace = nullptr; // the trace shows the batched runs
  for (const rt::GenerationResult &r : o.results) {
    auto alone = drive(plan, device, solo, {requests[size_t(r.id)]}, Load{1, {}}, false);
    if (!alone)
      return alone.status();
    identical += alone->results.at(0).tokens == r.tokens;
  }
  return identical;
}

int benchMain(Flags f, tools::Cli &cli) {
  auto job = tools::joinJob("moe-bench", f.timeline);
  if (!job)
    return cli.fail(job.status().message());
  rt::Collective &ranks = **job;
  // From here a failing rank leaves the job without waiting for the others.
  auto fail = [&](const std::string &m) {
    ranks.abandon();
    return cli.fail(m);
  };
  if (rt::Status st = tools::quietUnlessRankZero(ranks); !st)
    return fail(st.message());
  const bool reports = ranks.rank() == 0;
  if (!reports)
    f.json.clear();
  tools::Output out(f.json);
  if (rt::Status st = out.open(); !st)
    return fail(st.message());
  auto created = rt::createDevice(f.device, {f.threads});
  if (!created)
    return fail(created.status().message());
  std::unique_ptr<rt::Device> device = created.take();
  rt::LoadOptions loadOptions;
  loadOptions.rank = ranks.rank();
  // With --url the plan only shapes the requests (vocabulary, context,
  // tokenizer): its weights are not read, and a plan of several ranks
  // describes a server started by mpirun.
  const bool remote = !f.url.empty();
  if (remote)
    loadOptions.prefault = rt::Prefault::Off;
  auto plan = rt::LoadedPlan::open(f.planDir, loadOptions);
  if (!plan)
    return fail(plan.status().message());
  if (!remote)
    if (rt::Status st = tools::agreeOnPlan(ranks, **plan, *device); !st)
      return fail(st.message());
  // The ranks have just agreed: their traces start together.
  auto trace = tools::TraceOutput::open(f.timeline.trace, ranks.rank());
  if (!trace)
    return fail(trace.status().message());
  std::unique_ptr<rt::LoadedPlan> other; // --compare-to
  if (!f.compareTo.empty()) {
    auto o = rt::LoadedPlan::open(f.compareTo, loadOptions);
    if (!o)
      return fail(o.status().message());
    if (rt::Status st = tools::agreeOnPlan(ranks, **o, *device); !st)
      return fail(st.message());
    other = o.take();
    if (other->plan().config()->vocab_size() != (*plan)->plan().config()->vocab_size())
      return fail("--compare-to " + f.compareTo + ": another vocabulary; compare plans of one "
                  "model");
  }
  const plan::Plan &p = (*plan)->plan();
  int64_t context = p.kv_cache()->max_context(), vocab = p.config()->vocab_size();
  std::optional<HttpTarget> server; // --url
  std::optional<Served> served;      // what it said of itself
  if (!f.url.empty()) {
    for (const InProcessOnly &flag : f.inProcessOnly)
      if (flag.option->count() > 0)
        return fail("--url: " + flag.option->get_name() + " " + flag.why);
    if (ranks.size() > 1)
      return fail("--url: several ranks work in process only; run one moe-bench");
    server = HttpTarget{f.url, f.modelName.empty() ? tools::planModelName(f.planDir) : f.modelName,
                        ""};
    if (!f.apiKeyFile.empty()) {
      auto keys = serve::ApiKeys::load(f.apiKeyFile);
      if (!keys)
        return fail(keys.status().message());
      server->apiKey = keys->first();
    }
    auto answer = connect(*server);
    if (!answer)
      return fail(answer.status().message());
    served = answer.take();
    // The requests are made from the plan (its vocabulary, context and
    // tokenizer): a server of another model would refuse or misread them.
    if (std::find(served->models.begin(), served->models.end(), server->model) ==
        served->models.end())
      return fail("--url " + f.url + " serves model '" + served->models[0] + "', not '" +
                  server->model + "' (" +
                  (f.modelName.empty() ? "the plan directory's name" : "--model-name") +
                  "); give --model-name " + served->models[0] +
                  " if it serves this plan under that name, or point --url at a moe-serve of " +
                  f.planDir);
  }
  if (f.verify && tools::ranksHoldDifferentTokens(**plan, ranks.rank()))
    return fail("--verify: the plan's ranks hold different tokens (data-parallel "
                "attention), and solo reruns of its requests are not built yet; drop "
                "--verify");
  if (f.verify)
    for (const plan::Instruction *inst : *p.programs()->Get(uint32_t(ranks.rank()))->instructions())
      if (auto *r = inst->params_as_RouterParams();
          r && r->policy() != plan::RoutingPolicy::TokenChoice)
        return fail(std::string("--verify: the plan routes by ") +
                    plan::EnumNameRoutingPolicy(r->policy()) +
                    ", which depends on the other tokens of a step, so batched outputs need "
                    "not equal solo runs; drop --verify or compile with --routing token_choice");

  const bool open = !f.rate.empty();
  std::vector<double> levels = f.rate;
  if (!open)
    for (int64_t c : f.concurrency.empty() ? std::vector<int64_t>{8} : f.concurrency)
      levels.push_back(double(c));

  std::vector<rt::GenerationRequest> fromFile;
  SyntheticSpec spec;
  spec.seed = f.seed;
  spec.stop = rt::StopOptions{f.ignoreEos, f.stop};
  // Checked once here, as moe-run does: not once per request.
  std::shared_ptr<const rt::Tokenizer> tokenizer;
  if (!spec.stop.strings.empty())
    if (auto t = rt::Tokenizer::forPlan(p))
      tokenizer = t.take();
  if (auto rules = rt::StopRules::create(p, spec.stop, tokenizer); !rules)
    return fail(rules.status().message());
  if (!f.workload.empty()) {
    auto w = readWorkload(f.workload, p, f.seed, spec.stop, tokenizer);
    if (!w)
      return fail(w.status().message());
    fromFile = w.take();
    // Stop strings of the file's own need the tokenizer too.
    if (!tokenizer && std::any_of(fromFile.begin(), fromFile.end(), [](const auto &r) {
          return !r.stop.strings.empty();
        }))
      if (auto t = rt::Tokenizer::forPlan(p))
        tokenizer = t.take();
  } else {
    try {
      std::tie(spec.promptLo, spec.promptHi) = range("prompt-len", f.promptLen, {16, 64});
      std::tie(spec.outputLo, spec.outputHi) = range("output-len", f.outputLen, {16, 64});
    } catch (const std::invalid_argument &e) {
      return fail(e.what());
    }
    spec.sharedPrefix = f.sharedPrefix;
    int64_t longest = spec.sharedPrefix + spec.promptHi + spec.outputHi;
    if (longest > context)
      return fail("prompt + output lengths up to " + std::to_string(longest) +
                  " exceed the plan's context of " + std::to_string(context));
  }

  int64_t longest = spec.sharedPrefix + spec.promptHi + spec.outputHi;
  if (!fromFile.empty()) {
    longest = 0;
    for (const rt::GenerationRequest &r : fromFile)
      longest = std::max(longest, std::min(context, int64_t(r.prompt.size()) + r.maxNewTokens));
  }
  const int64_t blockSize = f.engine.blockSize;
  rt::EngineOptions options =
      tools::engineOptions(f.engine, 32 * ((longest + blockSize - 1) / blockSize));
  options.ranks = &ranks;
  options.tokenizer = tokenizer; // parsed once, not by every engine a level starts
  options.trace = *trace ? &(*trace)->trace : nullptr;

  bool progress = ::isatty(2);
  // The engine measured: this process's, or the server's (whose block size
  // and host pool /metrics does not say).
  nlohmann::json document = {{"plan", f.planDir}};
  if (server) {
    document["url"] = server->url;
    document["model"] = server->model;
    document["kv_blocks"] = served->kvBlocks;
  } else {
    document["kv_blocks"] = options.numBlocks;
    document["block_size"] = options.blockSize;
    document["host_pool_bytes"] = options.hostPoolBytes.value_or(0);
  }
  document["levels"] = nlohmann::json::array();
  size_t invalid = 0, failed = 0, submitted = 0;
  uint64_t collectiveBytes = 0; // of the measured runs
  // Tokens per (MoE layer, expert) of the measured runs of every level; a
  // profile file this run could not add to is refused before the work.
  std::vector<rt::ExpertLoad> traffic;
  for (const plan::LayerPlacement *l : *p.placement())
    traffic.push_back({l->layer(), std::vector<uint64_t>(size_t(p.config()->num_experts()))});
  if (!f.routingProfile.empty() && reports)
    if (auto profile = rt::addToProfileIn(f.routingProfile,
                                          rt::routingWindow(p, traffic, ranks.size()),
                                          f.profileDecay);
        !profile)
      return fail(profile.status().message());
  std::optional<rt::OutputFile> outputs;
  if (!f.outputs.empty() && reports) {
    auto file = rt::OutputFile::create(f.outputs);
    if (!file)
      return fail(file.status().message());
    outputs.emplace(file.take());
  }
  for (double level : levels) {
    Load load{int64_t(level), {}, &ranks};
    std::vector<rt::GenerationRequest> requests = fromFile;
    if (fromFile.empty()) {
      spec.requests = f.requests > 0 ? f.requests : (open ? 64 : 4 * int64_t(level));
      requests = syntheticWorkload(spec, vocab);
    }
    if (open)
      load.arrivals = poissonArrivals(requests.size(), level, f.seed);

    Outcome baseline;
    rt::EngineOptions levelOptions = options;
    if (f.prefixCaching) {
      auto plain = drive(**plan, *device, options, requests, load, progress);
      if (!plain)
        return fail(plain.status().message());
      baseline = plain.take();
      levelOptions.prefixCaching = true;
    }
    auto outcome = server ? driveHttp(*server, requests, load, progress)
                          : drive(**plan, *device, levelOptions, requests, load, progress);
    if (!outcome)
      return fail(outcome.status().message());
    const Outcome &o = *outcome;
    printUnserved(o);
    invalid += o.of(Unserved::Invalid).size();
    failed += o.of(Unserved::Failed).size();
    submitted += requests.size();
    collectiveBytes += o.collectiveBytes;
    for (size_t l = 0; l < traffic.size(); ++l) {
      if (o.expertLoad.size() != traffic.size() || o.expertLoad[l].layer != traffic[l].layer ||
          o.expertLoad[l].counts.size() != traffic[l].counts.size())
        return fail(server ? "--url " + f.url + "/metrics counts the tokens of other MoE "
                                 "layers or experts (moe_expert_tokens_total) than " +
                                 f.planDir + "'s; is it serving another plan?"
                           : "the plan's routers and its placement table name different MoE "
                             "layers; recompile the plan");
      for (size_t e = 0; e < traffic[l].counts.size(); ++e)
        traffic[l].counts[e] += o.expertLoad[l].counts[e];
    }

    std::optional<Comparison> compared;
    if (other) {
      auto c = compare(**plan, *other, *device, levelOptions, requests, load, f.rounds);
      if (!c)
        return fail(c.status().message());
      compared = c.take();
    }
    Level report{open ? "rate" : "concurrency", level, requests.size(), &o, -1};
    if (f.verify) {
      auto identical = verify(**plan, *device, levelOptions, requests, o);
      if (!identical)
        return fail(identical.status().message());
      report.identical = *identical;
    }
    printLevel(out.text(), report);
    nlohmann::json levelDoc = levelJson(report, f.perRequest);
    if (compared) {
      printComparison(out.text(), f.compareTo, *compared);
      levelDoc["compared"] = comparisonJson(f.compareTo, *compared);
      if (!compared->sameTokens)
        return fail("--compare-to " + f.compareTo + ": the two plans generated different tokens");
    }
    if (levelOptions.prefixCaching) {
      const rt::EngineStats &on = o.stats, &off = baseline.stats;
      auto ratio = [](double a, double b) { return a / std::max(b, 1e-9); };
      std::fprintf(out.text(),
                   "  prefix caching: %llu prompt tokens served from cache; vs without: peak KV "
                   "blocks %lld / %lld = %.2f, prefill tokens computed %llu / %llu = %.2f, "
                   "prefill time %.3f / %.3f s = %.2f\n",
                   (unsigned long long)on.cachedTokens, (long long)on.peakBlocks,
                   (long long)off.peakBlocks,
                   ratio(double(on.peakBlocks), double(std::max<int64_t>(1, off.peakBlocks))),
                   (unsigned long long)on.prefillTokens, (unsigned long long)off.prefillTokens,
                   ratio(double(on.prefillTokens), double(std::max<uint64_t>(1, off.prefillTokens))),
                   on.prefillSeconds, off.prefillSeconds,
                   ratio(on.prefillSeconds, off.prefillSeconds));
      levelDoc["prefix_caching"] = {
          {"cached_tokens", on.cachedTokens},
          {"peak_kv_blocks_without", off.peakBlocks},
          {"prefill_tokens_without", off.prefillTokens},
          {"prefill_seconds_without", off.prefillSeconds}};
    }
    document["levels"].push_back(levelDoc);
    for (size_t i = 0; outputs && i < o.results.size(); ++i)
      if (rt::Status st = outputs->write(nlohmann::json{{"level", level},
                                                         {"request", o.results[i].id},
                                                         {"tokens", o.results[i].tokens}}
                                             .dump() +
                                         "\n");
          !st)
        return fail(st.message());
    if (report.identical >= 0 && report.identical != int64_t(o.results.size()))
      return fail("batched outputs differ from solo runs");
    if (o.settled() != o.requests)
      return fail("requests lost: " + std::to_string(o.requests - o.settled()));
  }
  if (*trace)
    if (rt::Status st = (*trace)->write(ranks, *device); !st)
      return fail(st.message());
  if (ranks.size() > 1) {
    const bool rows = tools::countsComputedRows(**plan, ranks.rank());
    auto memory = tools::rankReport(ranks, *device, **plan, collectiveBytes,
                                    rows ? &traffic : nullptr);
    if (!memory)
      return fail(memory.status().message());
    std::fputs(memory->c_str(), out.text());
  }
  if (out.wantsJson())
    if (rt::Status st = out.writeJson(document); !st)
      return fail(st.message());
  if (outputs)
    if (rt::Status st = outputs->close(); !st)
      return fail(st.message());
  if (!f.routingProfile.empty()) {
    // Each rank counted the rows it computed: summed, and rank 0 writes.
    auto sum = rt::sumOverRanks(ranks, *device, traffic);
    if (!sum)
      return fail(sum.status().message());
    if (reports)
      if (rt::Status st = rt::updateRoutingProfile(
              f.routingProfile, rt::routingWindow(p, *sum, ranks.size()), f.profileDecay);
          !st)
        return fail(st.message());
  }
  if (invalid || failed)
    return fail(std::to_string(submitted) + " requests: " +
                (invalid ? std::to_string(invalid) + " invalid" : "") +
                (invalid && failed ? ", " : "") +
                (failed ? std::to_string(failed) + " failed" : "") +
                " (reasons above); the others were served or refused for load");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  tools::Cli cli("moe-bench", "moe-bench: serving benchmark (continuous batching, paged KV "
                              "cache), in process or against moe-serve (--url). Requests "
                              "refused for load (a full queue; over HTTP 429 or 503) are "
                              "counted; invalid ones (too long, bad token ids, more KV blocks "
                              "than the pool; over HTTP another 4xx) and failed ones (over "
                              "HTTP: no answer, another 5xx, an error mid-stream) are reported "
                              "and the rest served, and the exit status is then 1.");
  Flags f;
  CLI::App &app = cli.app;
  cli.addPlan(f.planDir);
  auto *concurrency =
      app.add_option("--concurrency", f.concurrency,
                     "closed loop: requests in flight, a comma-separated list of levels, e.g. "
                     "1,8,32 (default 8)")
          ->delimiter(',')
          ->check(tools::integerIn(1, 1 << 20))
          ->type_name("LIST");
  app.add_option("--rate", f.rate,
                 "open loop: Poisson arrivals, requests per second, a list, e.g. 5,20 (at "
                 "least 0.001: one request in about 17 minutes)")
      ->delimiter(',')
      ->check(tools::finiteIn(1e-3, 1e9))
      ->type_name("LIST")
      ->excludes(concurrency);
  auto *requests = app.add_option("--requests", f.requests,
                                  "requests per level (default: 4 x concurrency; 64 with --rate)")
                       ->check(tools::integerIn(1, 1 << 24))
                       ->type_name("N");
  auto *promptLen = app.add_option("--prompt-len", f.promptLen,
                                   "prompt lengths, uniform in [A, B] (default 16:64)")
                        ->type_name("A:B");
  auto *outputLen =
      app.add_option("--output-len", f.outputLen, "new tokens per request (default 16:64)")
          ->type_name("A:B");
  auto *sharedPrefix = app.add_option("--shared-prefix", f.sharedPrefix,
                                      "every prompt starts with the same N tokens, before its "
                                      "--prompt-len own ones (default 0)")
                           ->check(tools::integerIn(0, 1 << 24))
                           ->type_name("N");
  app.add_option("--workload", f.workload,
                 "JSON Lines, one request per line: {\"output_len\": N} with one of \"prompt\" "
                 "(text), \"prompt_tokens\" ([ids]) or \"prompt_len\" (random ids)")
      ->type_name("FILE")
      ->excludes(requests)
      ->excludes(promptLen)
      ->excludes(outputLen)
      ->excludes(sharedPrefix);
  app.add_option("--seed", f.seed, "seed of prompts and arrivals (default 0)")
      ->check(moe::tools::integerIn(0, INT64_MAX))
      ->type_name("S");
  // The flags that set up this process's engine: with --url the server's is
  // moe-serve's, which takes each of them.
  std::vector<const CLI::Option *> engine = optionsAddedBy(
      app, [&] { tools::addEngineFlags(cli, f.engine, "32 of the longest requests"); });
  tools::addStopFlags(cli, f.ignoreEos, f.stop);
  engine.push_back(app.add_flag("--prefix-caching", f.prefixCaching,
                                "share KV blocks of common prefixes; each level also runs "
                                "without it and prints the ratios"));
  const CLI::Option *verify =
      app.add_flag("--verify", f.verify, "rerun each request alone; require identical outputs");
  auto *url = app.add_option("--url", f.url,
                             "send the requests to a running moe-serve at http://HOST:PORT "
                             "instead of running them in this process; it must serve PLAN "
                             "(see --model-name), and the flags that set up the engine are "
                             "its own")
                  ->type_name("URL");
  app.add_option("--api-key-file", f.apiKeyFile, "with --url: the first key in FILE")
      ->needs(url)
      ->type_name("FILE");
  app.add_option("--model-name", f.modelName,
                 "with --url: the model id the requests name, which the server must serve "
                 "(default: the plan directory's name, as moe-serve names it without its "
                 "--model-name)")
      ->needs(url)
      ->type_name("NAME");
  CLI::Option *compareTo =
      app.add_option("--compare-to", f.compareTo,
                     "also run each level's requests through this plan and this one in turn "
                     "(--rounds rounds, the order alternating) and print the median ratio of "
                     "their times, paired by round; their tokens must be the same")
          ->type_name("PLAN-DIR");
  app.add_option("--rounds", f.rounds, "with --compare-to: rounds (default 5)")
      ->check(tools::integerIn(1, 1000))
      ->needs(compareTo)
      ->type_name("N");
  const CLI::Option *outputs = app.add_option(
      "--outputs", f.outputs,
      "write each completed request's generated tokens to FILE, one JSON line per level and "
      "request: {\"level\", \"request\", \"tokens\"} (to compare runs)")
      ->type_name("FILE");
  CLI::Option *json = cli.addJson(f.json);
  app.add_flag("--per-request", f.perRequest,
               "with --json: each level also lists every completed request's output tokens, "
               "TTFT, TPOT, E2EL and inter-token latencies (ms), as vllm bench serve "
               "--save-detailed does")
      ->needs(json);
  tools::addRoutingProfile(cli, f.routingProfile, f.profileDecay);
  std::vector<const CLI::Option *> timeline =
      optionsAddedBy(app, [&] { tools::addTimelineFlags(cli, f.timeline); });
  engine.push_back(cli.addThreads(f.threads));
  engine.push_back(cli.addDevice(f.device));
  for (const CLI::Option *o : engine)
    f.inProcessOnly.push_back(
        {o, "sets up the engine in this process, not the server's; give it to moe-serve"});
  f.inProcessOnly.push_back({verify, "works in process only (it reruns each request alone)"});
  f.inProcessOnly.push_back({compareTo, "works in process only (it runs two plans here)"});
  f.inProcessOnly.push_back({outputs, "works in process only (token ids do not come back over "
                                      "HTTP)"});
  for (const CLI::Option *o : timeline)
    f.inProcessOnly.push_back({o, "works in process only (it is of this process's ranks)"});
  if (auto code = cli.parse(argc, argv))
    return *code;
  return benchMain(f, cli);
}
