//===- moe-run.cpp - run a compiled plan ----------------------------------===//
//
// Prefills a prompt (in chunks of the plan's max batch), then decodes token
// by token with the KV cache, greedy or sampled; or scores a text. No MLIR,
// no LLVM.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Evaluate.h"
#include "moe/abi/File.h"
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/Registry.h"
#include "moe/runtime/RoutingWindow.h"
#include "moe/runtime/Sampler.h"
#include "moe/runtime/Session.h"
#include "moe/runtime/Stopping.h"
#include "moe/runtime/Tokenizer.h"
#include "tools/common/Cli.h"
#include "tools/common/Output.h"
#include "tools/common/Ranks.h"
#include "tools/common/RuntimeFlags.h"
#include "tools/common/Timeline.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

using namespace moe::rt;
using json = nlohmann::json;

namespace {

struct Flags {
  std::string planDir, prompt, evalFile, compareTo, dumpLogits, json, routingProfile, kvDtype,
      prefault;
  std::string device = "cpu";
  std::vector<int64_t> promptTokens, stopTokenIds;
  std::vector<std::string> stop;
  moe::tools::TimelineFlags timeline;
  int64_t maxNewTokens = 16, maxContext = 0, prefillRepeats = 0, topK = 0, minTokens = 0;
  double temperature = 0, topP = 1, minP = 0, repetitionPenalty = 1, presencePenalty = 0,
         frequencyPenalty = 0, memoryLimit = 0, profileDecay = 1;
  uint64_t seed = 0;
  int threads = 0;
  bool expertHistogram = false, verifyWeights = false, recompute = false, ignoreEos = false,
       includeStopString = false;

  SamplingOptions sampling() const {
    SamplingOptions o;
    o.temperature = float(temperature);
    o.topP = float(topP);
    o.topK = int32_t(topK);
    o.seed = seed;
    o.minP = float(minP);
    o.repetitionPenalty = float(repetitionPenalty);
    o.presencePenalty = float(presencePenalty);
    o.frequencyPenalty = float(frequencyPenalty);
    return o;
  }
  StopOptions stopping() const {
    return {ignoreEos, stop, std::vector<int32_t>(stopTokenIds.begin(), stopTokenIds.end()),
            minTokens, includeStopString};
  }
};

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Everything one run needs, opened from the flags.
struct Run {
  const Flags &flags;
  moe::tools::Cli &cli;
  moe::tools::Output out;
  std::unique_ptr<LoadedPlan> plan;
  std::unique_ptr<Device> device;
  std::unique_ptr<Session> session;
  std::shared_ptr<const Tokenizer> tokenizer;
  double loadSeconds = 0; ///< open + verify + map, without a sync prefault
  Collective *ranks = nullptr;
  std::unique_ptr<moe::tools::TraceOutput> trace; ///< --trace

  int fail(const std::string &message) { return cli.fail(message); }

  /// The routing statistics the flags ask for, after the work.
  int finish(json document) {
    Session &s = *session;
    // Ranks holding different tokens step together: this rank's work is
    // done, the others' may not be.
    if (Status st = s.waitForRanks(); !st)
      return fail(st.message());
    if (flags.expertHistogram || !flags.routingProfile.empty()) {
      // Each rank counted the rows it computed: summed over the ranks (all
      // of them take part, every rank asks for the same); rank 0 reports.
      auto sum = sumOverRanks(*ranks, *device, s.expertLoad());
      if (!sum)
        return fail(sum.status().message());
      if (flags.expertHistogram)
        std::fputs(expertLoadHistogram(*sum).c_str(), out.text());
      if (!flags.routingProfile.empty() && ranks->rank() == 0)
        if (Status st = updateRoutingProfile(flags.routingProfile,
                                             routingWindow(plan->plan(), *sum, ranks->size()),
                                             flags.profileDecay);
            !st)
          return fail(st.message());
    }
    if (trace)
      if (Status st = trace->write(*ranks, *device); !st)
        return fail(st.message());
    if (ranks->size() > 1) {
      const bool rows = moe::tools::countsComputedRows(*plan, ranks->rank());
      auto memory = moe::tools::rankReport(*ranks, *device, *plan, s.collectiveBytes(),
                                           rows ? &s.expertLoad() : nullptr);
      if (!memory)
        return fail(memory.status().message());
      std::fputs(memory->c_str(), out.text());
    }
    if (out.wantsJson())
      if (Status st = out.writeJson(document); !st)
        return fail(st.message());
    return 0;
  }

  int evaluate();
  int generate();
};

/// --eval-file (per byte) or --prompt-tokens with --compare-to (per token,
/// each predicted from those before it).
int Run::evaluate() {
  const bool text = !flags.evalFile.empty();
  const std::string source = text ? flags.evalFile : "prompt";
  const char *unit = text ? "byte" : "token";
  std::string bytes;
  if (text) {
    auto read = readFile(flags.evalFile);
    if (!read)
      return fail(read.status().message());
    bytes = read.take();
  }
  std::vector<int32_t> tokens(flags.promptTokens.begin(), flags.promptTokens.end());
  // The reference plan, on windows both plans hold.
  std::unique_ptr<LoadedPlan> refPlan;
  std::unique_ptr<Session> refSession;
  int64_t window = session->maxContext();
  if (!flags.compareTo.empty()) {
    auto rp = LoadedPlan::open(flags.compareTo);
    if (!rp)
      return fail(rp.status().message());
    refPlan = rp.take();
    SessionOptions ro;
    window = std::min<int64_t>(window, refPlan->plan().kv_cache()->max_context());
    ro.maxContext = window;
    ro.memoryLimit = moe::tools::memoryLimitBytes(flags.memoryLimit);
    auto rs = Session::create(*refPlan, *device, ro);
    if (!rs)
      return fail(flags.compareTo + ": " + rs.status().message());
    refSession = rs.take();
  }
  // Minutes of work on a long text: show how far it is on a terminal.
  Progress progress;
  if (::isatty(2))
    progress = [&](uint64_t done, uint64_t total) {
      std::fprintf(stderr, "\rmoe-run: scored %llu of %llu %ss", (unsigned long long)done,
                   (unsigned long long)total, unit);
      if (done == total)
        std::fprintf(stderr, "\r%60s\r", "");
    };
  auto t0 = std::chrono::steady_clock::now();
  auto *byteTokenizer = dynamic_cast<const ByteTokenizer *>(tokenizer.get());
  if (text && !byteTokenizer)
    return fail("scoring text in bits per byte needs a byte-level tokenizer; this plan's "
                "is a tokenizer.json: score token ids (--prompt-tokens with --compare-to)");
  auto score = text ? scoreText(*session, *byteTokenizer, bytes, window, refSession.get(), progress)
                    : scoreTokens(*session, tokens, window, refSession.get(), std::nullopt,
                                  progress);
  if (!score)
    return fail(source + ": " + score.status().message());
  double seconds = since(t0);
  const std::optional<Comparison> &c = score->comparison;
  json document = {{"unit", unit},
                   {"bits_per_byte", score->bitsPerByte},
                   {"perplexity", score->perplexity},
                   {"bytes", score->bytes},
                   {"window", window},
                   {"tokens_per_second", double(score->bytes) / seconds}};
  if (c) {
    document["reference_bits_per_byte"] = c->referenceBitsPerByte;
    document["kl"] = c->kl;
    document["top1"] = c->top1;
  }
  std::fprintf(out.text(),
               "%s: %.4f bits per %s, perplexity %.4f per %s, %llu %ss in windows of %lld "
               "tokens (%.0f tokens/s)\n",
               source.c_str(), score->bitsPerByte, unit, score->perplexity, unit,
               (unsigned long long)score->bytes, unit, (long long)window,
               double(score->bytes) / seconds);
  if (c)
    std::fprintf(out.text(),
                 "vs %s: its %.4f bits per %s (%+.3f%%), KL(reference || this) %.3g nats per "
                 "%s, top-1 agreement %.2f%%\n",
                 flags.compareTo.c_str(), c->referenceBitsPerByte, unit,
                 100.0 * (score->bitsPerByte / c->referenceBitsPerByte - 1.0), c->kl, unit,
                 100.0 * c->top1);
  return finish(document);
}

int Run::generate() {
  Session &s = *session;
  std::vector<int32_t> tokens;
  const bool text = flags.promptTokens.empty();
  if (text) {
    tokens = tokenizer->encode(flags.prompt, /*addSpecial=*/true);
    if (tokens.empty())
      return fail("the prompt encodes to no tokens");
  } else {
    for (int64_t t : flags.promptTokens) {
      if (t < 0 || t >= s.vocabSize())
        return fail("token id " + std::to_string(t) + " out of vocabulary [0, " +
                    std::to_string(s.vocabSize()) + ")");
      tokens.push_back(int32_t(t));
    }
  }
  const int64_t newTokens = flags.maxNewTokens;
  const int64_t total = int64_t(tokens.size()) + newTokens;
  if (total > s.maxContext())
    return fail("prompt (" + std::to_string(tokens.size()) + ") + --max-new-tokens (" +
                std::to_string(newTokens) + ") = " + std::to_string(total) +
                " exceeds the context of " + std::to_string(s.maxContext()) + " tokens");
  std::optional<OutputFile> dump;
  if (!flags.dumpLogits.empty()) {
    auto file = OutputFile::create(flags.dumpLogits);
    if (!file)
      return fail(file.status().message());
    dump.emplace(file.take());
  }
  const int64_t vocab = s.vocabSize(), chunk = s.maxBatchTokens();
  // Uninitialised: only the rows a step writes (the last, or every one
  // dumped) become resident.
  const std::unique_ptr<float[]> logits(new float[size_t(chunk * vocab)]);
  std::vector<int32_t> sequence = tokens, positions;
  // Runs tokens [from, to) of `sequence`; the last row's logits stay in
  // `logits` at row 0. With `dumpRows` every row is dumped, else the last;
  // none without `record` (a repeated prefill).
  auto run = [&](int64_t from, int64_t to, bool dumpRows, bool record = true) -> Status {
    for (int64_t start = from; start < to; start += chunk) {
      int64_t n = std::min(chunk, to - start);
      positions.resize(size_t(n));
      for (int64_t i = 0; i < n; ++i)
        positions[size_t(i)] = int32_t(start + i);
      // Only the last row's logits are read unless every row is dumped.
      const bool everyRow = dump && record && dumpRows;
      if (Status st = s.forward(sequence.data() + start, positions.data(), n, logits.get(),
                                !everyRow);
          !st)
        return st;
      const bool last = start + n == to;
      if (dump && record && (dumpRows || last)) {
        const float *rows = dumpRows ? logits.get() : logits.get() + (n - 1) * vocab;
        if (Status st = dump->write(rows, size_t(dumpRows ? n : 1) * size_t(vocab) * 4); !st)
          return st;
      }
      if (last && n > 1)
        std::copy(logits.get() + (n - 1) * vocab, logits.get() + n * vocab, logits.get());
    }
    return Status::ok();
  };

  auto stop = StopRules::create(plan->plan(), flags.stopping(), tokenizer);
  if (!stop)
    return fail(stop.status().message());
  const SamplingOptions sampling = flags.sampling();
  if (Status st = validate(sampling); !st)
    return fail(st.message());
  // The engine's per-sequence sampler: penalties see this prompt, min
  // tokens mask this plan's end tokens.
  Sampler sampler(sampling, tokens, stop->minTokens());
  auto t1 = std::chrono::steady_clock::now();
  if (Status st = run(0, int64_t(tokens.size()), true); !st)
    return fail(st.message());
  double firstToken = since(t1);
  // Where the weights' prefault stood when the first token came.
  const PrefaultProgress warmup = plan->prefault();
  // --prefill-repeats: the same prefill again (same positions: the KV cache
  // gets the same values again), timed; the logits are the same.
  std::vector<double> prefillSeconds = {firstToken};
  for (int64_t r = 0; r < flags.prefillRepeats; ++r) {
    auto tr = std::chrono::steady_clock::now();
    if (Status st = run(0, int64_t(tokens.size()), false, false); !st)
      return fail(st.message());
    prefillSeconds.push_back(since(tr));
  }
  std::vector<int32_t> generated;
  FinishReason reason = FinishReason::Length;
  int64_t steps = 0; // decode steps run (forward passes after the prefill)
  auto t2 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < newTokens; ++i) {
    auto picked = sampler.next(logits.get(), vocab);
    if (!picked)
      return fail(picked.status().message());
    const int32_t next = *picked;
    generated.push_back(next);
    sequence.push_back(next);
    if (auto ended = stop->check(generated)) {
      reason = *ended;
      break;
    }
    if (i + 1 == newTokens)
      break;
    int64_t end = int64_t(sequence.size());
    if (Status st = run(flags.recompute ? 0 : end - 1, end, false); !st)
      return fail(st.message());
    ++steps;
  }
  double decodeSeconds = since(t2);
  double perSecond = steps > 0 ? double(steps) / decodeSeconds : 0.0;
  if (dump)
    if (Status st = dump->close(); !st)
      return fail(st.message());

  std::string generatedText = text ? tokenizer->decode(generated) : "";
  json document = {{"prompt_tokens", tokens},
                   {"generated_tokens", generated},
                   {"tokens_per_second", perSecond},
                   {"time_to_first_token_ms", firstToken * 1e3},
                   {"plan_load_ms", loadSeconds * 1e3},
                   {"prefault", prefaultName(warmup.mode)},
                   {"warmup", prefaultStateName(warmup.state)},
                   {"warmup_ms", warmup.seconds * 1e3},
                   {"weights_verified", warmup.weightsVerified()},
                   {"finish_reason", finishReasonName(reason)}};
  if (flags.prefillRepeats > 0) {
    json ms = json::array(), perSecond = json::array();
    for (double p : prefillSeconds) {
      ms.push_back(p * 1e3);
      perSecond.push_back(double(tokens.size()) / p);
    }
    document["prefill_ms"] = ms;
    document["prefill_tokens_per_second"] = perSecond;
  }
  if (text)
    document["text"] = generatedText;
  std::FILE *t = out.text();
  if (text) {
    std::fprintf(t, "%s%s\n", flags.prompt.c_str(), generatedText.c_str());
  } else {
    std::fprintf(t, "prompt:    ");
    for (size_t i = 0; i < tokens.size(); ++i)
      std::fprintf(t, "%s%d", i ? "," : "", tokens[i]);
    std::fprintf(t, "\ngenerated: ");
    for (size_t i = 0; i < generated.size(); ++i)
      std::fprintf(t, "%s%d", i ? "," : "", generated[i]);
    std::fprintf(t, "\n");
  }
  if (flags.prefillRepeats > 0) {
    std::fprintf(t, "prefills of the prompt:");
    for (size_t i = 0; i < prefillSeconds.size(); ++i)
      std::fprintf(t, "%s %.1f ms (%.1f tokens/s)", i ? "," : "", prefillSeconds[i] * 1e3,
                   double(tokens.size()) / prefillSeconds[i]);
    std::fprintf(t, "\n");
  }
  // Load, warm-up (the weights' prefault) and first token, each on its own.
  std::string warm;
  char buf[160];
  switch (warmup.state) {
  case PrefaultProgress::State::Off:
    warm = "no prefault";
    break;
  case PrefaultProgress::State::Running:
    std::snprintf(buf, sizeof buf, "warm-up (prefault %s) still running at the first token, "
                  "%.1f ms in", prefaultName(warmup.mode), warmup.seconds * 1e3);
    warm = buf;
    break;
  default:
    std::snprintf(buf, sizeof buf, "warm-up (prefault %s%s) %.1f ms", prefaultName(warmup.mode),
                  warmup.weightsVerified() ? ", every weight's checksum checked" : "",
                  warmup.seconds * 1e3);
    warm = buf;
  }
  std::fprintf(t,
               "%zu prompt tokens in %.1f ms (time to first token), %lld decode steps at %.1f "
               "tokens/s; plan loaded in %.1f ms, %s; finished: %s\n",
               tokens.size(), firstToken * 1e3, (long long)steps, perSecond, loadSeconds * 1e3,
               warm.c_str(), finishReasonName(reason));
  return finish(document);
}

} // namespace

int main(int argc, char **argv) {
  moe::tools::Cli cli("moe-run", "moe-run: run a compiled MoE plan: generate from a prompt, "
                                 "or score a text");
  Flags f;
  CLI::App &app = cli.app;
  cli.addPlan(f.planDir);
  auto *tokensOpt = app.add_option("--prompt-tokens", f.promptTokens,
                                   "comma-separated prompt token ids")
                        ->delimiter(',')
                        ->type_name("IDS")
                        ->check(moe::tools::integerIn(0, INT32_MAX));
  auto *promptOpt =
      app.add_option("--prompt", f.prompt, "a text prompt (byte-level models); prints the text")
          ->type_name("TEXT");
  auto *evalOpt = app.add_option("--eval-file", f.evalFile,
                                 "bits per byte and perplexity of FILE under the model, in "
                                 "windows of the plan's context (byte-level models)")
                      ->type_name("FILE");
  tokensOpt->excludes(promptOpt)->excludes(evalOpt);
  promptOpt->excludes(evalOpt);
  app.add_option("--compare-to", f.compareTo,
                 "with --eval-file or --prompt-tokens: also run PLAN on the same windows and "
                 "report KL(PLAN || this), top-1 agreement and PLAN's bits per byte (token)")
      ->type_name("PLAN");
  app.add_option("--max-new-tokens", f.maxNewTokens,
                 "tokens to generate (default 16; fewer when the sequence ends: an "
                 "end-of-sequence token of the model, or a --stop string)")
      ->check(moe::tools::integerIn(0, int64_t(1) << 24))
      ->type_name("N");
  app.add_option("--temperature", f.temperature, "0 = greedy (default); > 0 samples")
      ->check(moe::tools::finiteIn(0, 1e6))
      ->type_name("T");
  app.add_option("--top-p", f.topP, "nucleus sampling mass, in (0, 1] (default 1)")
      ->check(moe::tools::finiteIn(1e-9, 1))
      ->type_name("P");
  app.add_option("--top-k", f.topK,
                 "sample from the K likeliest tokens only (default 0: all; before top-p)")
      ->check(moe::tools::integerIn(0, INT32_MAX))
      ->type_name("K");
  app.add_option("--min-p", f.minP,
                 "drop tokens less likely than P times the likeliest one, after the "
                 "temperature, in [0, 1] (default 0: off)")
      ->check(moe::tools::finiteIn(0, 1))
      ->type_name("P");
  app.add_option("--repetition-penalty", f.repetitionPenalty,
                 "divide the positive logits (multiply the negative ones) of the tokens of the "
                 "prompt and the output by R, > 0 (default 1: off)")
      ->check(moe::tools::positiveFinite())
      ->type_name("R");
  app.add_option("--presence-penalty", f.presencePenalty,
                 "subtract X from the logit of each token generated so far (once, however "
                 "often it came), in [-2, 2] (default 0)")
      ->check(moe::tools::finiteIn(-2, 2))
      ->type_name("X");
  app.add_option("--frequency-penalty", f.frequencyPenalty,
                 "subtract X times its count from the logit of every token generated so far, "
                 "in [-2, 2] (default 0)")
      ->check(moe::tools::finiteIn(-2, 2))
      ->type_name("X");
  app.add_option("--seed", f.seed, "sampling seed (default 0)")
      ->check(moe::tools::integerIn(0, INT64_MAX))
      ->type_name("S");
  app.add_option("--max-context", f.maxContext, "KV-cache tokens for this run (0: the plan's)")
      ->check(moe::tools::integerIn(0, int64_t(1) << 24))
      ->type_name("N");
  moe::tools::addStopFlags(cli, f.ignoreEos, f.stop);
  app.add_option("--stop-token-ids", f.stopTokenIds,
                 "comma-separated token ids that end a sequence as an end-of-sequence token "
                 "does (kept as the last token; --ignore-eos does not apply to them)")
      ->delimiter(',')
      ->type_name("IDS")
      ->check(moe::tools::integerIn(0, INT32_MAX));
  app.add_option("--min-tokens", f.minTokens,
                 "generate at least N tokens: until then end-of-sequence tokens and "
                 "--stop-token-ids cannot be sampled and --stop strings do not end the sequence "
                 "(default 0; at most --max-new-tokens)")
      ->check(moe::tools::integerIn(0, int64_t(1) << 24))
      ->type_name("N");
  app.add_flag("--include-stop-str", f.includeStopString,
               "keep a --stop string's tokens and text in the output");
  moe::tools::addKvDtype(cli, f.kvDtype);
  moe::tools::addMemoryLimit(cli, f.memoryLimit);
  app.add_option("--dump-logits", f.dumpLogits,
                 "write every computed logits row as little-endian f32: the prompt's rows, then "
                 "one row per decode step")
      ->type_name("FILE");
  cli.addJson(f.json);
  moe::tools::addRoutingProfile(cli, f.routingProfile, f.profileDecay);
  app.add_flag("--expert-histogram", f.expertHistogram,
               "print a per-layer histogram of the expert load (to stderr with --json -)");
  app.add_flag("--verify-weights", f.verifyWeights,
               "check every weight's checksum before running (as a sync prefault: the "
               "warm-up)");
  app.add_flag("--recompute", f.recompute,
               "no KV-cache reuse: recompute the whole sequence at every step (slow; for "
               "checking the cache)");
  moe::tools::addPrefault(cli, f.prefault);
  app.add_option("--prefill-repeats", f.prefillRepeats,
                 "after the first prefill, run the prompt's prefill N more times (same positions, "
                 "same results) and report each one's time: the first prefill of a process "
                 "against later ones")
      ->check(moe::tools::integerIn(0, 1000))
      ->type_name("N");
  moe::tools::addTimelineFlags(cli, f.timeline);
  cli.addThreads(f.threads);
  cli.addDevice(f.device);
  if (auto code = cli.parse(argc, argv))
    return *code;
  const bool evaluating = !f.evalFile.empty() || !f.compareTo.empty();
  if (f.promptTokens.empty() && f.prompt.empty() && f.evalFile.empty())
    return cli.fail("give one of --prompt-tokens, --prompt and --eval-file (see --help)");
  if (!f.json.empty() && f.json == f.dumpLogits)
    return cli.fail("--json and --dump-logits would both write to " +
                    (f.json == "-" ? std::string("standard output") : f.json) +
                    "; give each its own file");
  if (f.minTokens > f.maxNewTokens)
    return cli.fail("--min-tokens " + std::to_string(f.minTokens) + " exceeds --max-new-tokens " +
                    std::to_string(f.maxNewTokens));
  if (!f.compareTo.empty() && f.evalFile.empty() && f.promptTokens.empty())
    return cli.fail("--compare-to needs --eval-file or --prompt-tokens (it compares "
                    "predictions over a text or a token sequence)");

  auto ranks = moe::tools::joinJob("moe-run", f.timeline);
  if (!ranks)
    return cli.fail(ranks.status().message());
  // From here a failing rank leaves the job without waiting for the others.
  auto fail = [&](const std::string &message) {
    (*ranks)->abandon();
    return cli.fail(message);
  };
  // Every rank runs the same requests; rank 0 reports (errors come from all).
  if (Status st = moe::tools::quietUnlessRankZero(**ranks); !st)
    return fail(st.message());
  if ((*ranks)->rank() != 0) {
    f.json.clear();
    f.dumpLogits.clear();
  }
  Run run{f, cli, moe::tools::Output(f.json), {}, {}, {}, {}, 0, ranks->get(), {}};
  if (Status st = run.out.open(); !st)
    return fail(st.message());
  auto device = createDevice(f.device, {f.threads});
  if (!device)
    return fail(device.status().message());
  run.device = device.take();
  auto t0 = std::chrono::steady_clock::now();
  LoadOptions load;
  load.verifyWeights = f.verifyWeights;
  load.rank = (*ranks)->rank();
  load.prefault = moe::tools::prefaultMode(f.prefault);
  auto plan = LoadedPlan::open(f.planDir, load);
  if (!plan)
    return fail(plan.status().message());
  run.plan = plan.take();
  run.loadSeconds = since(t0);
  // A sync prefault ran inside open: it is the warm-up, not the load.
  if (const PrefaultProgress p = run.plan->prefault(); p.mode == Prefault::Sync)
    run.loadSeconds = std::max(0.0, run.loadSeconds - p.seconds);
  if (Status st = moe::tools::agreeOnPlan(**ranks, *run.plan, *run.device); !st)
    return fail(st.message());
  // The ranks have just agreed: their traces start together.
  auto trace = moe::tools::TraceOutput::open(f.timeline.trace, (*ranks)->rank());
  if (!trace)
    return fail(trace.status().message());
  run.trace = trace.take();
  SessionOptions so;
  so.ranks = ranks->get();
  so.trace = run.trace ? &run.trace->trace : nullptr;
  so.maxContext = f.maxContext;
  so.kvDtype = moe::tools::kvDtype(f.kvDtype);
  so.memoryLimit = moe::tools::memoryLimitBytes(f.memoryLimit);
  so.residentKvCache = load.prefault != moe::rt::Prefault::Off;
  auto session = Session::create(*run.plan, *run.device, so);
  if (!session)
    return fail(session.status().message());
  run.session = session.take();
  // A profile file this run could not add to is refused before the work.
  if (!f.routingProfile.empty() && (*ranks)->rank() == 0)
    if (auto profile = addToProfileIn(
            f.routingProfile,
            routingWindow(run.plan->plan(), run.session->expertLoad(), (*ranks)->size()),
            f.profileDecay);
        !profile)
      return fail(profile.status().message());
  // Text needs the tokenizer; token ids use it for stop strings only.
  if (auto t = Tokenizer::forPlan(run.plan->plan()))
    run.tokenizer = t.take();
  else if (f.promptTokens.empty())
    return fail(t.status().message() + "; pass token ids with --prompt-tokens");
  // Data-parallel attention: rank 0's data group (rank 0, or ranks 0 to
  // M - 1 with --tp M) runs the sequence; the others serve its MoE layers
  // (the rows of their experts) until it is done.
  const bool serving = run.session->stepsWithRanks() && run.session->dataGroup() != 0;
  int code = serving ? run.finish(json::object()) : evaluating ? run.evaluate() : run.generate();
  if (code != 0)
    (*ranks)->abandon();
  return code;
}
