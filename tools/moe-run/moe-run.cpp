//===- moe-run.cpp - run a compiled plan ----------------------------------===//
//
// Prefills a prompt (in chunks of the plan's max batch), then decodes token
// by token with the KV cache, greedy or sampled. No MLIR, no LLVM.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/Hal.h"
#include "moe/runtime/Plan.h"
#include "moe/runtime/Sampler.h"
#include "moe/runtime/Evaluate.h"
#include "moe/runtime/Session.h"
#include "moe/runtime/Tokenizer.h"
#include "tools/common/Args.h"
#include "tools/common/RuntimeFlags.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <vector>

using namespace moe::rt;

namespace {

const char *kHelp = R"(moe-run: run a compiled MoE plan

usage: moe-run <plan-dir> (--prompt-tokens 1,2,3 | --prompt TEXT | --eval-file FILE) [options]

  --prompt-tokens IDS    comma-separated prompt token ids
  --prompt TEXT          a text prompt (byte-level models); prints the text
  --eval-file FILE       bits per byte and perplexity of FILE under the model,
                         in windows of the plan's context (byte-level models)
  --compare-to PLAN      with --eval-file: also run PLAN (e.g. an fp32 or f32-KV
                         plan) on the same windows; report KL(PLAN || this) per
                         byte, top-1 agreement and PLAN's bits per byte; with
                         --prompt-tokens: the same per token of the prompt
                         (each predicted from those before it; no generation)
  --max-new-tokens N     tokens to generate (default 16)
  --temperature T        0 = greedy (default); > 0 samples
  --top-p P              nucleus sampling mass (default 1.0)
  --seed S               sampling seed (default 0)
  --max-context N        KV-cache tokens for this run (default: the plan's)
  --kv-dtype T           KV-cache type for this run: f32, bf16, int8, fp8
                         (default: the plan's)
  --memory-limit MIB     refuse to start if weights + activations + KV cache exceed it
  --dump-logits FILE     write every computed logits row as little-endian f32:
                         the prompt's rows, then one row per decode step
                         ((prompt + new - 1) x vocab floats)
  --json                 print one JSON object instead of text
  --expert-stats FILE    write tokens per (layer, expert) of the run as JSON
  --expert-histogram     print a per-layer histogram of the expert load
  --verify-weights       check every weight's checksum before running
  --recompute            no KV-cache reuse: recompute the whole sequence at
                         every step (slow; for checking the cache)
)";

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string jsonEscape(const std::string &s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

int fail(const std::string &message) {
  std::cerr << "moe-run: error: " << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (moe::tools::wantsHelp(argc, argv)) {
    std::cout << kHelp;
    return 0;
  }
  try {
    moe::tools::Args args(argc, argv,
                          {"prompt-tokens", "prompt", "eval-file", "compare-to", "max-new-tokens",
                           "temperature", "top-p", "seed", "max-context", "dump-logits", "memory-limit",
                           "expert-stats", "kv-dtype"},
                          {"json", "verify-weights", "recompute", "expert-histogram"});
    if (args.positional.size() != 1)
      return fail("expected one plan directory (see --help)");
    if (args.has("compare-to") && !args.has("eval-file") && !args.has("prompt-tokens"))
      return fail("--compare-to needs --eval-file or --prompt-tokens (it compares predictions "
                  "over a text or a token sequence)");
    int inputs = args.has("prompt-tokens") + args.has("prompt") + args.has("eval-file");
    if (inputs != 1)
      return fail("give exactly one of --prompt-tokens, --prompt and --eval-file (see --help)");
    std::vector<int32_t> tokens;
    if (args.has("prompt-tokens"))
      for (int64_t t : args.integers("prompt-tokens")) {
        if (t < 0 || t > INT32_MAX)
          return fail("token id " + std::to_string(t) + " is not a valid id");
        tokens.push_back(int32_t(t));
      }
    int64_t newTokens = args.integer("max-new-tokens", 16);
    if (newTokens < 0)
      return fail("--max-new-tokens must be >= 0, got " + std::to_string(newTokens));
    SamplingOptions sampling;
    sampling.temperature = float(args.number("temperature", 0.0));
    sampling.topP = float(args.number("top-p", 1.0));
    sampling.seed = uint64_t(args.integer("seed", 0));
    if (sampling.temperature < 0 || sampling.topP <= 0 || sampling.topP > 1)
      return fail("--temperature must be >= 0 and --top-p in (0, 1]");

    auto t0 = std::chrono::steady_clock::now();
    LoadOptions load;
    load.verifyWeights = args.has("verify-weights");
    auto plan = LoadedPlan::open(args.positional[0], load);
    if (!plan)
      return fail(plan.status().message());
    double loadSeconds = since(t0);
    auto device = createCpuDevice();
    SessionOptions so;
    so.maxContext = args.integer("max-context", 0);
    so.kvDtype = moe::tools::kvDtypeFlag(args);
    so.memoryLimit = moe::tools::memoryLimitFlag(args);
    auto session = Session::create(**plan, *device, so);
    if (!session)
      return fail(session.status().message());
    Session &s = **session;
    auto writeStats = [&]() -> int {
      if (args.has("expert-histogram"))
        std::printf("%s", expertLoadHistogram(s.expertLoad()).c_str());
      if (args.has("expert-stats")) {
        std::ofstream out(args.str("expert-stats"));
        out << expertLoadJson((*plan)->plan(), s.expertLoad());
        if (!out)
          return fail(args.str("expert-stats") + ": cannot write");
      }
      return 0;
    };
    std::optional<ByteTokenizer> tokenizer;
    if (!args.has("prompt-tokens")) {
      auto t = ByteTokenizer::forPlan((*plan)->plan());
      if (!t)
        return fail(t.status().message());
      tokenizer = *t;
    }
    if (args.has("eval-file") || args.has("compare-to")) {
      // A text (per byte) or, with --prompt-tokens, the prompt's tokens
      // (per token, each predicted from those before it).
      const bool text = args.has("eval-file");
      const std::string source = text ? args.str("eval-file") : "prompt";
      const char *unit = text ? "byte" : "token";
      std::string bytes;
      if (text) {
        std::ifstream in(source, std::ios::binary);
        if (!in)
          return fail(source + ": cannot open");
        bytes.assign(std::istreambuf_iterator<char>(in), {});
      }
      // The reference plan, on windows both plans hold.
      std::unique_ptr<LoadedPlan> refPlan;
      std::unique_ptr<Session> refSession;
      int64_t window = s.maxContext();
      if (args.has("compare-to")) {
        auto rp = LoadedPlan::open(args.str("compare-to"));
        if (!rp)
          return fail(rp.status().message());
        refPlan = rp.take();
        SessionOptions ro;
        window = std::min<int64_t>(window, refPlan->plan().kv_cache()->max_context());
        ro.maxContext = window;
        ro.memoryLimit = so.memoryLimit;
        auto rs = Session::create(*refPlan, *device, ro);
        if (!rs)
          return fail(args.str("compare-to") + ": " + rs.status().message());
        refSession = rs.take();
      }
      auto t3 = std::chrono::steady_clock::now();
      auto score = text ? scoreText(s, *tokenizer, bytes, window, refSession.get())
                        : scoreTokens(s, tokens, window, refSession.get());
      if (!score)
        return fail(source + ": " + score.status().message());
      double seconds = since(t3);
      const std::optional<Comparison> &c = score->comparison;
      if (args.has("json")) {
        std::printf("{\"unit\": \"%s\", \"bits_per_byte\": %.6f, \"perplexity\": %.6f, "
                    "\"bytes\": %llu, \"window\": %lld, \"tokens_per_second\": %.1f",
                    unit, score->bitsPerByte, score->perplexity,
                    (unsigned long long)score->bytes, (long long)window,
                    double(score->bytes) / seconds);
        if (c)
          std::printf(", \"reference_bits_per_byte\": %.6f, \"kl\": %.9g, \"top1\": %.6f",
                      c->referenceBitsPerByte, c->kl, c->top1);
        std::printf("}\n");
      } else {
        std::printf("%s: %.4f bits per %s, perplexity %.4f per %s, %llu %ss in "
                    "windows of %lld tokens (%.0f tokens/s)\n",
                    source.c_str(), score->bitsPerByte, unit, score->perplexity, unit,
                    (unsigned long long)score->bytes, unit, (long long)window,
                    double(score->bytes) / seconds);
        if (c)
          std::printf("vs %s: its %.4f bits per %s (%+.3f%%), KL(reference || this) %.3g "
                      "nats per %s, top-1 agreement %.2f%%\n",
                      args.str("compare-to").c_str(), c->referenceBitsPerByte, unit,
                      100.0 * (score->bitsPerByte / c->referenceBitsPerByte - 1.0), c->kl, unit,
                      100.0 * c->top1);
      }
      return writeStats();
    }
    if (tokenizer) {
      tokens.assign(1, tokenizer->startId());
      std::vector<int32_t> text = tokenizer->encode(args.str("prompt"));
      tokens.insert(tokens.end(), text.begin(), text.end());
    }
    int64_t total = int64_t(tokens.size()) + newTokens;
    if (tokens.empty())
      return fail("--prompt-tokens is empty");
    for (int32_t t : tokens)
      if (t >= s.vocabSize())
        return fail("token id " + std::to_string(t) + " out of vocabulary [0, " +
                    std::to_string(s.vocabSize()) + ")");

    if (total > s.maxContext())
      return fail("prompt (" + std::to_string(tokens.size()) + ") + --max-new-tokens (" +
                  std::to_string(newTokens) + ") = " + std::to_string(total) +
                  " exceeds the context of " + std::to_string(s.maxContext()) + " tokens");
    std::ofstream dump;
    if (args.has("dump-logits")) {
      dump.open(args.str("dump-logits"), std::ios::binary);
      if (!dump)
        return fail(args.str("dump-logits") + ": cannot create");
    }
    int64_t vocab = s.vocabSize(), chunk = s.maxBatchTokens();
    std::vector<float> logits(size_t(chunk * vocab));
    std::vector<int32_t> sequence = tokens, positions;
    // Runs tokens [from, to) of `sequence`; the last row's logits stay in
    // `logits` at row (to - 1 - last chunk start).
    auto run = [&](int64_t from, int64_t to, bool dumpRows) -> Status {
      for (int64_t start = from; start < to; start += chunk) {
        int64_t n = std::min(chunk, to - start);
        positions.resize(size_t(n));
        for (int64_t i = 0; i < n; ++i)
          positions[size_t(i)] = int32_t(start + i);
        if (Status st = s.forward(sequence.data() + start, positions.data(), n,
                                  logits.data());
            !st)
          return st;
        if (dumpRows && dump)
          dump.write(reinterpret_cast<const char *>(logits.data()),
                     std::streamsize(n * vocab * sizeof(float)));
        if (start + n == to && !dumpRows && dump)
          dump.write(reinterpret_cast<const char *>(logits.data() + (n - 1) * vocab),
                     std::streamsize(vocab * sizeof(float)));
        if (start + n == to && n > 1)
          std::copy(logits.begin() + (n - 1) * vocab, logits.begin() + n * vocab,
                    logits.begin());
      }
      return Status::ok();
    };

    Sampler sampler(sampling);
    bool recompute = args.has("recompute");
    auto t1 = std::chrono::steady_clock::now();
    if (Status st = run(0, int64_t(tokens.size()), true); !st)
      return fail(st.message());
    double firstToken = since(t1);
    std::vector<int32_t> generated;
    auto t2 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < newTokens; ++i) {
      int32_t next = sampler.next(logits.data(), vocab);
      generated.push_back(next);
      sequence.push_back(next);
      if (i + 1 == newTokens)
        break;
      int64_t end = int64_t(sequence.size());
      if (Status st = run(recompute ? 0 : end - 1, end, false); !st)
        return fail(st.message());
    }
    double decodeSeconds = since(t2);
    double perSecond = newTokens > 1 ? double(newTokens - 1) / decodeSeconds : 0.0;

    std::ostringstream ids, gen;
    for (size_t i = 0; i < tokens.size(); ++i)
      ids << (i ? "," : "") << tokens[i];
    for (size_t i = 0; i < generated.size(); ++i)
      gen << (i ? "," : "") << generated[i];
    std::string text = tokenizer ? tokenizer->decode(generated) : "";
    if (args.has("json")) {
      std::printf("{\"prompt_tokens\": [%s], \"generated_tokens\": [%s], "
                  "\"tokens_per_second\": %.3f, \"time_to_first_token_ms\": %.3f, "
                  "\"plan_load_ms\": %.3f",
                  ids.str().c_str(), gen.str().c_str(), perSecond, firstToken * 1e3,
                  loadSeconds * 1e3);
      if (tokenizer)
        std::printf(", \"text\": \"%s\"", jsonEscape(text).c_str());
      std::printf("}\n");
    } else {
      if (tokenizer)
        std::printf("%s%s\n", args.str("prompt").c_str(), text.c_str());
      else
        std::printf("prompt:    %s\ngenerated: %s\n", ids.str().c_str(), gen.str().c_str());
      std::printf("%zu prompt tokens in %.1f ms (time to first token), %lld decode steps "
                  "at %.1f tokens/s; plan loaded in %.1f ms\n",
                  tokens.size(), firstToken * 1e3, (long long)std::max<int64_t>(newTokens - 1, 0),
                  perSecond, loadSeconds * 1e3);
    }
    return writeStats();
  } catch (const moe::tools::ArgError &e) {
    return fail(e.what());
  }
}
