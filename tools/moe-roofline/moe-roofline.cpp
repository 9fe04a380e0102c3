//===- moe-roofline.cpp - how close a plan runs to this machine's limits --===//
//
// Measures the machine (STREAM triad and read bandwidth; matmul peak through oneDNN)
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
#include "tools/common/Cli.h"
#include "tools/common/Output.h"
#include "kernels/cpu/Isa.h"
#include "tools/moe-roofline/Machine.h"
#include "tools/plan-cost/Hardware.h"
#include "tools/plan-cost/PlanCost.h"
#include "moe/abi/File.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <vector>

using namespace moe;

namespace {

struct Flags {
  std::string plan, baseline, json, calibrate;
  std::vector<std::string> only; ///< figures to measure (empty: all)
  int64_t decodeSteps = 32, promptLen = 16, batch = 64, prefillTokens = 0, triadMib = 256,
          repeats = 3;
  int threads = 0;
  bool wants(const std::string &figure) const {
    return only.empty() || std::find(only.begin(), only.end(), figure) != only.end();
  }
};

struct Figures {
  double decode1 = 0, decodeB = 0; ///< tokens/s
  double bytesPerToken = 0, prefillSeconds = 0, prefillFlops = 0;
  double batchBytes = 0, batchFlops = 0; ///< one decode step of the batch
  int64_t prefillTokens = 0;
  /// The batch's bound in tokens/s: its step at the triad bandwidth or at
  /// the matmul peak, whichever is slower; and which one it is.
  std::pair<double, const char *> batchBound(int64_t batch, double triad, double peak) const {
    const double memory = batchBytes / (triad * 1e9), compute = batchFlops / (peak * 1e9);
    return {double(batch) / std::max(memory, compute), memory >= compute ? "bandwidth" : "compute"};
  }
};

/// A plan under measurement.
struct Subject {
  std::string dir;
  std::unique_ptr<rt::LoadedPlan> plan;
  std::unique_ptr<rt::Device> device;
  int64_t vocab() const { return plan->plan().config()->vocab_size(); }
};

/// Decode tokens/s of each subject with `batch` sequences decoding together
/// (engine clock, decode share of each step). The subjects' engines take
/// steps in turn, so that every plan sees the same moments of a shared
/// machine: their ratios are paired measurements.
rt::Expected<std::vector<double>> decodeRates(std::vector<Subject> &subjects, int64_t batch,
                                              int64_t prompt, int64_t steps) {
  std::vector<std::unique_ptr<rt::Engine>> engines;
  for (Subject &s : subjects) {
    rt::EngineOptions o;
    int64_t perSeq = (prompt + steps + 1 + o.blockSize - 1) / o.blockSize;
    o.numBlocks = batch * perSeq;
    o.maxWaiting = batch;
    auto engine = rt::Engine::create(*s.plan, *s.device, o);
    if (!engine)
      return engine.status();
    std::mt19937 rng(7);
    for (int64_t b = 0; b < batch; ++b) {
      rt::GenerationRequest r;
      for (int64_t i = 0; i < prompt; ++i)
        r.prompt.push_back(int32_t(rng() % uint32_t(s.vocab())));
      r.maxNewTokens = steps + 1;
      r.stop.ignoreEos = true; // every sequence decodes all its steps
      if (auto id = (*engine)->submit(r); !id)
        return id.status();
    }
    engines.push_back(std::move(*engine));
  }
  for (bool busy = true; busy;) {
    busy = false;
    for (auto &e : engines)
      if (!e->idle()) {
        busy = true;
        if (rt::Status st = e->step(); !st)
          return st;
      }
  }
  std::vector<double> rates;
  for (auto &e : engines)
    rates.push_back(double(e->stats().decodeTokens) / e->stats().decodeSeconds);
  return rates;
}

/// One round: every figure of every subject, each measured with the
/// subjects interleaved.
rt::Expected<std::vector<Figures>> measure(std::vector<Subject> &subjects, const Flags &flags) {
  const int64_t steps = flags.decodeSteps, prompt = flags.promptLen, batch = flags.batch;
  std::vector<Figures> f(subjects.size());
  // Figures left out by --only stay 0 (and are not printed).
  rt::Expected<std::vector<double>> d1 = std::vector<double>(subjects.size(), 0.0),
                                    dB = std::vector<double>(subjects.size(), 0.0);
  if (flags.wants("decode1")) {
    std::fprintf(stderr, "  decode batch 1 ...\n");
    d1 = decodeRates(subjects, 1, prompt, steps);
    if (!d1)
      return d1.status();
  }
  if (flags.wants("decode-batch")) {
    std::fprintf(stderr, "  decode batch %lld ...\n", (long long)batch);
    dB = decodeRates(subjects, batch, prompt, steps);
    if (!dB)
      return dB.status();
  }

  // Prefill: one sequence, positions 0 .. P-1, best of two per subject, the
  // subjects in turn.
  const bool prefill = flags.wants("prefill");
  if (prefill)
    std::fprintf(stderr, "  prefill ...\n");
  std::vector<std::unique_ptr<rt::Session>> sessions;
  for (size_t i = 0; i < subjects.size(); ++i) {
    const plan::Plan &p = subjects[i].plan->plan();
    f[i].decode1 = (*d1)[i];
    f[i].decodeB = (*dB)[i];
    // A prefill fits one step and one sequence's context (a plan may hold
    // fewer positions than a step's tokens).
    const int64_t most = std::min<int64_t>(p.max_batch_tokens(), p.kv_cache()->max_context());
    f[i].prefillTokens = flags.prefillTokens > 0 ? flags.prefillTokens : most;
    if (f[i].prefillTokens > most)
      return rt::Status::error("--prefill-tokens must lie in [1, " + std::to_string(most) +
                               "] for " + subjects[i].dir);
    rt::SessionOptions so;
    so.maxContext = f[i].prefillTokens;
    auto session = rt::Session::create(*subjects[i].plan, *subjects[i].device, so);
    if (!session)
      return session.status();
    sessions.push_back(std::move(*session));
    f[i].prefillSeconds = 1e30;
    f[i].prefillFlops = cost::prefillFlops(p, f[i].prefillTokens);
    // KV read per decode token at the mean timed context.
    double kvPerToken = double(sessions[i]->kvBlockBytes()) / double(sessions[i]->blockSize());
    f[i].bytesPerToken =
        double(cost::decodeWeightBytes(p)) + kvPerToken * double(prompt + steps / 2);
    f[i].batchBytes = double(cost::decodeWeightBytes(p, batch)) +
                      kvPerToken * double(prompt + steps / 2) * double(batch);
    f[i].batchFlops = cost::stepFlops(p, batch);
  }
  for (int r = 0; r < (prefill ? 2 : 0); ++r)
    for (size_t i = 0; i < subjects.size(); ++i) {
      std::vector<int32_t> tokens(size_t(f[i].prefillTokens)), positions(tokens.size());
      std::mt19937 rng(11);
      for (size_t t = 0; t < tokens.size(); ++t) {
        tokens[t] = int32_t(rng() % uint32_t(subjects[i].vocab()));
        positions[t] = int32_t(t);
      }
      std::vector<float> logits(tokens.size() * size_t(subjects[i].vocab()));
      auto t0 = std::chrono::steady_clock::now();
      if (rt::Status st = sessions[i]->forward(tokens.data(), positions.data(),
                                               f[i].prefillTokens, logits.data(), true);
          !st)
        return st;
      f[i].prefillSeconds = std::min(
          f[i].prefillSeconds,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  return f;
}

void report(std::FILE *out, const std::string &name, const Figures &f, double triad,
            double read, double peak, const Flags &flags) {
  double roof = triad * 1e9 / f.bytesPerToken;
  double prefillRate = f.prefillFlops / f.prefillSeconds / 1e9;
  std::fprintf(out, "%s\n", name.c_str());
  if (flags.wants("decode1"))
    std::fprintf(out,
                 "  decode batch 1: %.2f tok/s; %.1f MB read per token; roofline %.2f tok/s; "
                 "%.2f of roofline (%.2f GB/s, %.2f of the read bandwidth)\n",
                 f.decode1, f.bytesPerToken / 1e6, roof, f.decode1 / roof,
                 f.decode1 * f.bytesPerToken / 1e9, f.decode1 * f.bytesPerToken / 1e9 / read);
  if (flags.wants("prefill"))
    std::fprintf(out,
                 "  prefill %lld tokens: %.3f s, %.1f GFLOP, %.1f GFLOP/s = %.2f of matmul peak\n",
                 (long long)f.prefillTokens, f.prefillSeconds, f.prefillFlops / 1e9, prefillRate,
                 prefillRate / peak);
  if (flags.wants("decode-batch")) {
    const auto [bound, by] = f.batchBound(flags.batch, triad, peak);
    std::fprintf(out, "  decode batch %lld: %.1f tok/s", (long long)flags.batch, f.decodeB);
    if (flags.wants("decode1"))
      std::fprintf(out, " = %.1fx batch 1", f.decodeB / f.decode1);
    std::fprintf(out,
                 "; bound %.1f tok/s (%s: %.1f MB, %.1f GFLOP a step); %.2f of the bound\n",
                 bound, by, f.batchBytes / 1e6, f.batchFlops / 1e9, f.decodeB / bound);
  }
}

/// The figures measured (all, or those --only names); bytes per token always.
nlohmann::json figuresJson(const Figures &f, double triad, double read, double peak,
                           const Flags &flags) {
  double roof = triad * 1e9 / f.bytesPerToken;
  nlohmann::json j = {{"bytes_per_token", f.bytesPerToken},
                      {"roofline_tokens_per_second", roof}};
  if (flags.wants("decode1")) {
    j["decode1_tokens_per_second"] = f.decode1;
    j["roofline_fraction"] = f.decode1 / roof;
    j["read_fraction"] = f.decode1 * f.bytesPerToken / 1e9 / read;
  }
  if (flags.wants("prefill")) {
    j["prefill_tokens"] = f.prefillTokens;
    j["prefill_seconds"] = f.prefillSeconds;
    j["prefill_gflops"] = f.prefillFlops / 1e9;
    j["prefill_peak_fraction"] = f.prefillFlops / f.prefillSeconds / 1e9 / peak;
  }
  if (flags.wants("decode-batch")) {
    const auto [bound, by] = f.batchBound(flags.batch, triad, peak);
    j["decode_batch_tokens_per_second"] = f.decodeB;
    j["decode_batch_bound_tokens_per_second"] = bound;
    j["decode_batch_bound"] = by;
    j["decode_batch_bound_fraction"] = f.decodeB / bound;
    j["decode_batch_step_bytes"] = f.batchBytes;
    j["decode_batch_step_gflops"] = f.batchFlops / 1e9;
  }
  if (flags.wants("decode-batch") && flags.wants("decode1"))
    j["batch_speedup"] = f.decodeB / f.decode1;
  return j;
}

int rooflineMain(const Flags &flags, tools::Cli &cli) {
  tools::Output out(flags.json);
  if (rt::Status st = out.open(); !st)
    return cli.fail(st.message());
  if (flags.threads > 0)
    omp_set_num_threads(flags.threads); // the machine's ceilings too
  const int64_t batch = flags.batch, repeats = flags.repeats;
  // The ceilings are measured before every round and the best kept: other
  // tenants of a shared machine only ever lower them, and a low ceiling
  // would flatter the fractions. Within a round plan and baseline are
  // measured interleaved (decode steps and prefills in turn), so that a
  // noisy moment does not favour one of them; best of `repeats` rounds each.
  double triad = 0.0, read = 0.0;
  roofline::MatmulPeak peak{0.0, ""};
  std::vector<std::string> dirs = {flags.plan};
  if (!flags.baseline.empty())
    dirs.push_back(flags.baseline);
  std::vector<Subject> subjects;
  for (const std::string &dir : dirs) {
    auto plan = rt::LoadedPlan::open(dir);
    if (!plan)
      return cli.fail(plan.status().message());
    rt::CpuDeviceOptions device;
    device.threads = flags.threads;
    subjects.push_back({dir, std::move(*plan), rt::createCpuDevice(device)});
  }
  std::vector<Figures> best;
  // Per round, plan / baseline: decode batch 1, prefill speed, decode batch B.
  std::vector<std::array<double, 3>> ratios;
  for (int64_t r = 0; r < repeats; ++r) {
    std::fprintf(stderr, "round %lld of %lld: measuring the machine ...\n", (long long)r + 1,
                 (long long)repeats);
    triad = std::max(triad, roofline::triadGBps(size_t(flags.triadMib) << 18, 10));
    read = std::max(read, roofline::readGBps(size_t(flags.triadMib) << 18, 10));
    roofline::MatmulPeak p = roofline::matmulPeak(2048);
    if (p.gflops > peak.gflops)
      peak = p;
    auto f = measure(subjects, flags);
    if (!f)
      return cli.fail(f.status().message());
    if (f->size() > 1) {
      const Figures &p = (*f)[0], &b = (*f)[1];
      ratios.push_back({p.decode1 / b.decode1, b.prefillSeconds / p.prefillSeconds,
                        p.decodeB / b.decodeB});
    }
    if (r == 0) {
      best = *f;
      continue;
    }
    for (size_t i = 0; i < best.size(); ++i) {
      best[i].decode1 = std::max(best[i].decode1, (*f)[i].decode1);
      best[i].decodeB = std::max(best[i].decodeB, (*f)[i].decodeB);
      best[i].prefillSeconds = std::min(best[i].prefillSeconds, (*f)[i].prefillSeconds);
    }
  }
  double ours = roofline::linearGflops(cpu::WeightType::BF16, 512, 2048, 2048);
  std::fprintf(out.text(),
               "machine: %d threads; STREAM triad %.2f GB/s; read %.2f GB/s; matmul peak %.1f "
               "GFLOP/s (%s); our linear kernel, bf16 weights, 512 x 2048 x 2048: %.1f GFLOP/s = "
               "%.2f of peak (ceilings: best of %lld measurements between the runs); kernels: %s\n",
               omp_get_max_threads(), triad, read, peak.gflops, peak.how.c_str(), ours,
               ours / peak.gflops, (long long)repeats, cpu::isaName(cpu::isa()));
  report(out.text(), "plan " + dirs[0], best[0], triad, read, peak.gflops, flags);
  nlohmann::json document = {{"triad_gbps", triad},
                             {"read_gbps", read},
                             {"matmul_peak_gflops", peak.gflops},
                             {"linear_bf16_gflops", ours},
                             {"kernel_isa", cpu::isaName(cpu::isa())},
                             {"batch", batch},
                             {"plan", figuresJson(best[0], triad, read, peak.gflops, flags)}};
  if (dirs.size() > 1) {
    const Figures &b = best[1];
    report(out.text(), "baseline " + dirs[1], b, triad, read, peak.gflops, flags);
    // The median round's ratio of each figure (the two plans measured
    // interleaved in that round).
    std::array<double, 3> median;
    for (size_t k = 0; k < 3; ++k) {
      std::vector<double> v;
      for (const auto &r : ratios)
        v.push_back(r[k]);
      std::sort(v.begin(), v.end());
      median[k] = v[v.size() / 2];
    }
    std::string line;
    nlohmann::json ratioJson = nlohmann::json::object();
    char part[96];
    if (flags.wants("decode1")) {
      std::snprintf(part, sizeof part, "decode batch 1 %.3f", median[0]);
      line += part;
      ratioJson["decode1"] = median[0];
    }
    if (flags.wants("prefill")) {
      std::snprintf(part, sizeof part, "%sprefill speed %.3f", line.empty() ? "" : ", ",
                    median[1]);
      line += part;
      ratioJson["prefill"] = median[1];
    }
    if (flags.wants("decode-batch")) {
      std::snprintf(part, sizeof part, "%sdecode batch %lld %.3f", line.empty() ? "" : ", ",
                    (long long)batch, median[2]);
      line += part;
      ratioJson["decode_batch"] = median[2];
    }
    std::fprintf(out.text(), "plan / baseline (median of %zu interleaved rounds): %s\n",
                 ratios.size(), line.c_str());
    document["baseline"] = figuresJson(b, triad, read, peak.gflops, flags);
    document["ratios"] = ratioJson;
  }
  if (out.wantsJson())
    if (rt::Status st = out.writeJson(document); !st)
      return cli.fail(st.message());
  return 0;
}

/// --calibrate FILE: this machine as a hardware profile for the plan
/// simulator (tools/plan-cost/Hardware.h), measured with the run's threads
/// (one rank's share of the cores): our linear kernel's rate per weight
/// type at a prefill-sized product, the STREAM triad, the cost of one
/// kernel call. The link between ranks is left to the run it predicts
/// (--emulate-link; moe-plan simulate --link).
int calibrate(const Flags &flags, tools::Cli &cli) {
  if (flags.threads > 0)
    omp_set_num_threads(flags.threads);
  const int64_t repeats = flags.repeats;
  double triad = 0, f32 = 0, bf16 = 0, launch = 1e30;
  for (int64_t r = 0; r < repeats; ++r) {
    triad = std::max(triad, roofline::triadGBps(size_t(flags.triadMib) << 18, 5));
    f32 = std::max(f32, roofline::linearGflops(cpu::WeightType::F32, 256, 1024, 1024));
    bf16 = std::max(bf16, roofline::linearGflops(cpu::WeightType::BF16, 256, 1024, 1024));
    // One tiny product: what a call costs besides its work (threads woken
    // and joined).
    const double tiny = 2.0 * 8 * 8 * 8 / (roofline::linearGflops(cpu::WeightType::F32, 1, 8, 8) *
                                           1e9);
    launch = std::min(launch, tiny);
  }
  cost::Hardware h;
  h.name = "this-cpu";
  std::string cpu = "?";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  char description[320];
  std::snprintf(description, sizeof description,
                "one rank of this machine (%s): %d thread(s), measured by moe-roofline "
                "--calibrate",
                cpu.c_str(), omp_get_max_threads());
  h.description = description;
  h.matmulTflops = {{"f32", f32 / 1e3}, {"bf16", bf16 / 1e3}};
  h.memoryGBps = triad;
  h.launchOverheadUs = launch * 1e6;
  h.hostRunsStreamZero = true; // the CPU backend's stream 0 is the caller
  const std::string how = " (best of " + std::to_string(repeats) + ")";
  h.sources = {
      {"matmul_tflops", "our linear kernel, x [256, 1024] times w [1024, 1024]" + how},
      {"memory_gb_per_s", "STREAM triad over 3 x " + std::to_string(flags.triadMib) +
                              " MiB arrays" + how},
      {"launch_overhead_us", "our linear kernel on [1, 8] x [8, 8]" + how},
      {"link", "none: pass moe-plan simulate --link, the --emulate-link of the run"}};
  auto file = rt::OutputFile::create(flags.calibrate);
  if (!file)
    return cli.fail(file.status().message());
  if (rt::Status st = file->write(h.toJson().dump(2) + "\n"); !st)
    return cli.fail(st.message());
  if (rt::Status st = file->close(); !st)
    return cli.fail(st.message());
  std::fprintf(stderr,
               "moe-roofline: wrote %s: %d thread(s), f32 %.1f GFLOP/s, bf16 %.1f GFLOP/s, "
               "triad %.2f GB/s, %.1f us per call\n",
               flags.calibrate.c_str(), omp_get_max_threads(), f32, bf16, triad,
               launch * 1e6);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  tools::Cli cli("moe-roofline",
                 "moe-roofline: a plan's speed against this machine's roofline (STREAM triad "
                 "bandwidth for decode, the matmul peak for prefill), optionally paired with a "
                 "baseline plan measured in the same run");
  Flags f;
  CLI::App &app = cli.app;
  CLI::Option *plan = cli.addPlan(f.plan);
  CLI::Option *calibrating =
      app.add_option("--calibrate", f.calibrate,
                     "instead of measuring a plan, write this machine's hardware profile for "
                     "moe-plan simulate to FILE (with --threads: one rank's share)")
          ->type_name("FILE");
  plan->required(false);
  calibrating->excludes(plan);
  app.add_option("--baseline", f.baseline,
                 "a second plan (e.g. compiled with --fusion=false); ratios plan / baseline are "
                 "printed")
      ->type_name("DIR");
  app.add_option("--decode-steps", f.decodeSteps, "decode tokens timed per sequence (default 32)")
      ->check(tools::integerIn(1, 1 << 20))
      ->type_name("N");
  app.add_option("--prompt-len", f.promptLen, "prompt tokens before decoding (default 16)")
      ->check(tools::integerIn(1, 1 << 20))
      ->type_name("N");
  app.add_option("--batch", f.batch,
                 "sequences decoded together for the batched figure (default 64)")
      ->check(tools::integerIn(1, 1 << 16))
      ->type_name("B");
  app.add_option("--prefill-tokens", f.prefillTokens,
                 "tokens of the timed prefill (default: the plan's max batch, or its "
                 "context when that is smaller)")
      ->check(tools::integerIn(1, 1 << 24))
      ->type_name("P");
  app.add_option("--triad-mib", f.triadMib, "size of each STREAM array in MiB (default 256)")
      ->check(tools::integerIn(1, 1 << 16))
      ->type_name("M");
  app.add_option("--repeats", f.repeats,
                 "measure the machine and each plan N times, alternating, keep the best of "
                 "each (default 3)")
      ->check(tools::integerIn(1, 1000))
      ->type_name("N");
  app.add_option("--only", f.only,
                 "measure only these figures, a comma-separated list of decode1, decode-batch "
                 "and prefill (default: all three)")
      ->delimiter(',')
      ->check(tools::oneOf({"decode1", "decode-batch", "prefill"}))
      ->type_name("LIST")
      ->excludes(calibrating);
  cli.addJson(f.json);
  cli.addThreads(f.threads);
  if (auto code = cli.parse(argc, argv))
    return *code;
  if (!f.calibrate.empty())
    return calibrate(f, cli);
  if (f.plan.empty())
    return cli.fail("give a plan directory, or --calibrate FILE");
  return rooflineMain(f, cli);
}
