//===- moe-plan.cpp - inspect and verify compiled plans -------------------===//
//
//   moe-plan show <plan-dir>     readable summary
//   moe-plan weights <plan-dir>  each weight: precision, shape, bytes
//   moe-plan json <plan-dir>     the whole plan as JSON (for FileCheck)
//   moe-plan verify <plan-dir>   structure, semantics and every weight checksum
//   moe-plan placement <plan-dir> [--profile FILE] [--trace FILE [--days A:B]] [--json FILE]
//                                each MoE layer's experts on the ranks, with a
//                                routing profile's predicted load per rank and a
//                                trace replayed over them
//   moe-plan simulate <plan-dir> --hardware FILE --batch-tokens N [--link L]
//                     [--baseline PLAN] [--measured TRACE] [--trace FILE] [--json FILE]
//                                a step predicted on a hardware profile
//   moe-plan synth <plan-dir> -o DIR [--seed S]
//                                a runnable copy with random weights (Synth.h)
//
//===----------------------------------------------------------------------===//
#include "moe/abi/File.h"
#include "moe/runtime/HfTokenizer.h"
#include "moe/runtime/Plan.h"
#include "moe/abi/PlanFormat.h"
#include "moe/runtime/Session.h"
#include "moe/abi/WeightChecksum.h"
#include "abi/schema/PlanSchemaText.h"
#include "moe/abi/RoutingProfile.h"
#include "tools/common/Cli.h"
#include "tools/common/Output.h"
#include "tools/common/LinkFlag.h"
#include "tools/common/PlacementReport.h"
#include "tools/moe-plan/Synth.h"
#include "tools/plan-cost/Simulate.h"
#include "moe/runtime/PlanView.h"
#include "moe/runtime/Trace.h"

#include "flatbuffers/idl.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace moe::rt;
namespace fb = moe::plan;

namespace {

int fail(const std::string &message) {
  std::cerr << "moe-plan: error: " << message << "\n";
  return 1;
}

/// The tensors that hold the scales of an I8/I4 weight.
std::vector<bool> scaleTensors(const fb::Plan &p) {
  std::vector<bool> scales(p.tensors()->size());
  for (const fb::Tensor *t : *p.tensors())
    if (t->group() > 0)
      scales[t->scales()] = true;
  return scales;
}

std::string shapeText(const fb::Tensor &t) {
  std::string s = "[";
  for (size_t i = 0; i < t.shape()->size(); ++i)
    s += (i ? ", " : "") + std::to_string(t.shape()->Get(i));
  return s + "]";
}

int weights(const LoadedPlan &loaded) {
  const fb::Plan &p = loaded.plan();
  std::vector<bool> scales = scaleTensors(p);
  std::printf("%-60s %-14s %-20s %s\n", "weight", "stored as", "shape", "bytes");
  for (uint32_t id = 0; id < p.tensors()->size(); ++id) {
    const fb::Tensor &t = *p.tensors()->Get(id);
    if (t.storage() != fb::Storage::Weight || scales[id])
      continue;
    std::string stored = dtypeName(t.dtype());
    uint64_t bytes = t.size();
    if (t.group() > 0) {
      stored += " g" + std::to_string(t.group());
      bytes += p.tensors()->Get(t.scales())->size();
    }
    if (t.int8_activations()) // int8 activations (format 2.7; on I4 2.11)
      stored += t.dtype() == fb::DType::I4 ? " w4a8" : " w8a8";
    if (t.layout() == fb::Layout::Panels8)
      stored += " panels"; // format 2.8
    std::printf("%-60s %-14s %-20s %s\n", t.name()->c_str(), stored.c_str(), shapeText(t).c_str(),
                moe::rt::formatBytes(bytes).c_str());
  }
  return 0;
}

int show(const LoadedPlan &loaded) {
  const fb::Plan &p = loaded.plan();
  const fb::ModelConfig &c = *p.config();
  std::printf("plan       %s (format %u.%u)\n", loaded.dir().c_str(), p.format_major(),
              p.format_minor());
  std::printf("model      %s: %d layers, hidden %d, vocab %d, %d experts top-%d\n",
              c.model_type()->c_str(), c.num_layers(), c.hidden_size(), c.vocab_size(),
              c.num_experts(), c.top_k());
  std::string eos;
  if (c.eos_token_ids())
    for (int32_t id : *c.eos_token_ids())
      eos += (eos.empty() ? "" : ", ") + std::to_string(id);
  std::string tokenizer = c.tokenizer() && c.tokenizer()->size()
                              ? "tokenizer " + c.tokenizer()->str()
                              : "no tokenizer (token ids)";
  if (const fb::TextSpec *text = p.text()) {
    if (text->tokenizer_json() && text->tokenizer_json()->size()) {
      auto hf = moe::rt::HfTokenizer::fromJson(text->tokenizer_json()->string_view());
      tokenizer = hf ? "tokenizer.json (" + std::to_string((*hf)->vocabSize()) + " tokens)"
                     : "tokenizer.json that cannot be used: " + hf.status().message();
    }
    if (text->chat_template() && text->chat_template()->size())
      tokenizer += ", chat template";
  }
  const std::string ends = eos.empty() ? "generation ends at its length limit (no eos_token_id)"
                           : eos.find(',') == std::string::npos
                               ? "generation ends at token " + eos
                               : "generation ends at tokens " + eos;
  std::printf("text       %s; %s\n", tokenizer.c_str(), ends.c_str());
  if (const fb::Provenance *pv = p.provenance())
    std::printf("built by   %s from %s (checkpoint %s)\n  pipeline %s\n",
                pv->compiler_version()->c_str(), pv->checkpoint()->c_str(),
                pv->checkpoint_hash()->c_str(), pv->pipeline()->c_str());
  std::map<std::string, std::pair<int, uint64_t>> weights;
  std::vector<bool> scales = scaleTensors(p);
  for (uint32_t id = 0; id < p.tensors()->size(); ++id) {
    const fb::Tensor *t = p.tensors()->Get(id);
    if (t->storage() == fb::Storage::Weight) {
      // W8A8 and W4A8 weights (I8, I4 with int8 activations) and weights
      // in panels (their dtype in another layout) are counted apart.
      std::string kind = scales[id] ? "scales" : dtypeName(t->dtype());
      if (t->int8_activations())
        kind += t->dtype() == fb::DType::I4 ? " (w4a8)" : " (w8a8)";
      if (t->layout() == fb::Layout::Panels8)
        kind += " (panels)";
      auto &w = weights[kind];
      ++w.first;
      w.second += t->size();
    }
  }
  uint64_t weightBytes = 0;
  for (const fb::Program *prog : *p.programs())
    weightBytes += prog->weight_bytes();
  std::printf("weights    %s in %u file(s), checksums %s\n",
              moe::rt::formatBytes(weightBytes).c_str(), p.weight_files()->size(),
              moe::rt::weightChecksumName(p.weight_checksum()));
  for (auto &[dtype, w] : weights)
    std::printf("  %-13s %d tensors, %s\n", dtype.c_str(), w.first,
                moe::rt::formatBytes(w.second).c_str());
  const fb::KvCacheSpec &kv = *p.kv_cache();
  for (uint32_t r = 0; r < p.programs()->size(); ++r) {
    auto perTokenNeeds = moe::rt::memoryNeeds(p, int(r), 1, kv.dtype());
    auto needs = moe::rt::memoryNeeds(p, int(r), uint64_t(kv.max_context()), kv.dtype());
    if (!perTokenNeeds || !needs)
      return fail(needs ? perTokenNeeds.status().message() : needs.status().message());
    uint64_t perToken = perTokenNeeds->kvCache;
    std::set<uint32_t> arena;
    for (const fb::Instruction *i : *p.programs()->Get(r)->instructions())
      for (const auto *ids : {i->inputs(), i->outputs()})
        for (uint32_t id : *ids)
          if (p.tensors()->Get(id)->storage() == fb::Storage::Arena)
            arena.insert(id);
    std::printf("arena      rank %u: %s peak activation memory at %d tokens (%zu buffers)\n", r,
                moe::rt::formatBytes(p.programs()->Get(r)->arena_bytes()).c_str(),
                p.max_batch_tokens(), arena.size());
    if (r == 0)
      std::printf("kv cache   %s, %u layers (%s), %llu bytes per token, %s at %d tokens\n",
                  dtypeName(kv.dtype()), kv.layers()->size(),
                  kv.layers()->size() && kv.layers()->Get(0)->kind() == fb::KvKind::Mla
                      ? "MLA latent + rope key"
                      : "GQA keys + values",
                  (unsigned long long)perToken,
                  moe::rt::formatBytes(perToken * kv.max_context()).c_str(), kv.max_context());
    std::printf("memory     rank %u needs %s: weights %s + activations %s + KV cache %s "
                "(one sequence of %d tokens)\n",
                r, moe::rt::formatBytes(needs->total()).c_str(),
                moe::rt::formatBytes(needs->weights).c_str(),
                moe::rt::formatBytes(needs->activations).c_str(),
                moe::rt::formatBytes(needs->kvCache).c_str(), kv.max_context());
  }
  for (uint32_t r = 0; r < p.programs()->size(); ++r) {
    std::map<std::string, int> ops;
    const auto *insts = p.programs()->Get(r)->instructions();
    int streams = 1;
    size_t events = 0, waits = 0;
    for (const fb::Instruction *i : *insts) {
      ++ops[i->collective() != fb::CollectiveOp::None ? moe::rt::instructionName(*i)
                                                      : fb::EnumNameOpCode(i->op())];
      streams = std::max(streams, int(i->stream()) + 1);
      events += i->records() ? i->records()->size() : 0;
      waits += i->waits() ? i->waits()->size() : 0;
    }
    std::printf("program    rank %u: %u instructions:", r, insts->size());
    for (auto &[name, n] : ops)
      std::printf(" %s %d", name.c_str(), n);
    std::printf("\n");
    // Where its collectives meet: a group, or every rank.
    std::map<int, int> among; // group (-1: every rank) -> collectives
    for (const fb::Instruction *i : *insts)
      if (i->collective() != fb::CollectiveOp::None)
        ++among[i->group()];
    if (p.groups() && !among.empty()) {
      std::printf("groups     rank %u:", r);
      for (auto [g, n] : among)
        std::printf(" %d collective(s) among %s%s", n,
                    g < 0 ? "every rank" : moe::rt::groupName(*p.groups()->Get(uint32_t(g))).c_str(),
                    g == among.rbegin()->first ? "" : ",");
      std::printf("\n");
    }
    if (streams > 1)
      std::printf("streams    rank %u: %d, ordered by %zu events (%zu waits)\n", r, streams,
                  events, waits);
  }
  if (p.placement() && p.placement()->size()) {
    size_t experts = 0, slots = 0;
    for (const fb::LayerPlacement *lp : *p.placement())
      for (const fb::ExpertSlots *e : *lp->experts()) {
        ++experts;
        slots += e->slots()->size();
      }
    std::printf("placement  %u MoE layer(s), %zu experts in %zu slots on %u rank(s)\n",
                p.placement()->size(), experts, slots, p.programs()->size());
  }
  return 0;
}

struct PlacementFlags {
  std::string profile, trace, days, json;
};

int placement(const LoadedPlan &loaded, const PlacementFlags &f) {
  const fb::Plan &p = loaded.plan();
  moe::tools::Output out(f.json);
  if (Status st = out.open(); !st)
    return fail(st.message());
  const int64_t experts = p.config()->num_experts();
  std::optional<RoutingProfile> profile;
  if (!f.profile.empty()) {
    auto read = moe::tools::readProfile(f.profile);
    if (!read)
      return fail(read.status().message());
    profile = read.take();
  }
  std::vector<moe::tools::LayerPlacement> layers;
  std::vector<int64_t> ids;
  for (const fb::LayerPlacement *lp : *p.placement()) {
    moe::placement::Placement pl;
    pl.ranks = int(p.programs()->size());
    for (const fb::ExpertSlots *e : *lp->experts()) {
      pl.experts.emplace_back();
      for (const fb::ExpertSlot *s : *e->slots()) {
        pl.experts.back().push_back({s->rank(), s->slot()});
        pl.slotsPerRank = std::max(pl.slotsPerRank, s->slot() + 1);
      }
    }
    if (std::string why = moe::placement::verify(pl, int(experts), /*filled=*/false);
        !why.empty())
      return fail("the plan's placement of layer " + std::to_string(lp->layer()) +
                  " is not valid: " + why);
    layers.push_back({lp->layer(), std::move(pl), nullptr});
    ids.push_back(lp->layer());
  }
  if (profile) {
    std::vector<int64_t> profileIds;
    for (const RoutingProfile::Layer &l : profile->layers)
      profileIds.push_back(l.layer);
    const std::string modelType = p.config()->model_type()->str();
    if (profile->modelType != modelType || profile->numExperts != experts || profileIds != ids)
      return fail(f.profile + " profiles another model (" + profile->modelType + ", " +
                  std::to_string(profile->numExperts) + " experts in " +
                  std::to_string(profileIds.size()) + " MoE layers; the plan: " + modelType +
                  ", " + std::to_string(experts) + " in " + std::to_string(ids.size()) + ")");
    for (size_t l = 0; l < layers.size(); ++l)
      layers[l].load = &profile->layers[l].counts;
  }
  auto trace = moe::tools::readTrace(f.trace, f.days, ids, experts);
  if (!trace)
    return fail(trace.status().message());
  std::fprintf(out.text(), "placement of %lld experts on %u rank(s), %zu MoE layer(s)\n",
               (long long)experts, p.programs()->size(), layers.size());
  nlohmann::json report =
      moe::tools::reportPlacement(out.text(), layers, *trace ? &**trace : nullptr);
  if (out.wantsJson()) {
    report["ranks"] = p.programs()->size();
    report["num_experts"] = experts;
    if (Status st = out.writeJson(report); !st)
      return fail(st.message());
  }
  return 0;
}

struct SimulateFlags {
  std::string hardware, link, baseline, trace, json, measured;
  int64_t batchTokens = 0;
};

/// One plan's simulated step, printed.
struct Simulated {
  std::unique_ptr<LoadedPlan> plan;
  moe::cost::Simulation sim;
};

Expected<Simulated> simulatePlan(const std::string &dir, const moe::cost::Hardware &hw,
                                 const LinkModel &link, int64_t tokens,
                                 const moe::cost::MeasuredLaunches *measured) {
  LoadOptions options;
  options.mapWeights = false;
  auto loaded = LoadedPlan::open(dir, options);
  if (!loaded)
    return loaded.status();
  if (tokens > (*loaded)->plan().max_batch_tokens())
    return Status::error("--batch-tokens " + std::to_string(tokens) + " exceeds " + dir +
                             "'s most tokens per step, " +
                             std::to_string((*loaded)->plan().max_batch_tokens()));
  auto sim = moe::cost::simulate((*loaded)->plan(), 0, hw, link, tokens, measured);
  if (!sim)
    return Status::error(dir + ": " + sim.status().message());
  return Simulated{loaded.take(), sim.take()};
}

int simulate(const std::string &dir, const SimulateFlags &f) {
  auto hw = moe::cost::Hardware::load(f.hardware);
  if (!hw)
    return fail(hw.status().message());
  std::optional<LinkModel> link = hw->link;
  if (!f.link.empty())
    link = *LinkModel::parse(f.link); // checked by the flag
  if (!link)
    return fail(f.hardware + " states no link between ranks: give one with --link "
                             "LATENCY_US:GB_PER_S (the --emulate-link of the run to predict)");
  moe::tools::Output out(f.json);
  if (Status st = out.open(); !st)
    return fail(st.message());
  std::optional<moe::cost::MeasuredLaunches> measured;
  if (!f.measured.empty()) {
    auto m = moe::cost::MeasuredLaunches::fromTrace(f.measured, f.batchTokens);
    if (!m)
      return fail(m.status().message());
    measured = m.take();
  }
  const moe::cost::MeasuredLaunches *timed = measured ? &*measured : nullptr;
  auto plan = simulatePlan(dir, *hw, *link, f.batchTokens, timed);
  if (!plan)
    return fail(plan.status().message());
  const moe::cost::Simulation &s = plan->sim;
  const fb::Plan &p = plan->plan->plan();
  const fb::Program &program = *p.programs()->Get(0);
  auto ms = [](double seconds) { return seconds * 1e3; };
  std::FILE *o = out.text();
  std::fprintf(o, "simulated %s: rank 0 of %u, a step of %lld tokens (a prefill from position 0) "
                  "on %s\n",
               dir.c_str(), p.programs()->size(), (long long)f.batchTokens, hw->name.c_str());
  std::fprintf(o, "  step        %.3f ms\n", ms(s.step));
  for (size_t k = 0; k < s.busy.size(); ++k)
    std::fprintf(o, "  stream %zu    busy %.3f ms (%.0f%% of the step)\n", k, ms(s.busy[k]),
                 100 * s.busy[k] / std::max(s.step, 1e-12));
  double pathCompute = 0, pathCollective = 0;
  for (size_t k : s.criticalPath) {
    const auto &i = s.instructions[k];
    const bool collective =
        program.instructions()->Get(i.index)->collective() != fb::CollectiveOp::None;
    (collective ? pathCollective : pathCompute) += i.end - i.start;
  }
  std::fprintf(o, "  critical path: %zu instructions, %.3f ms computing + %.3f ms in "
                  "collectives + %.3f ms waiting\n",
               s.criticalPath.size(), ms(pathCompute), ms(pathCollective),
               ms(s.step - pathCompute - pathCollective));
  std::fprintf(o, "  one stream  %.3f ms (the same instructions one after another): overlap "
                  "saves %.3f ms (%.1f%%)\n",
               ms(s.serial), ms(s.serial - s.step), 100 * (s.serial - s.step) / s.serial);
  nlohmann::ordered_json doc = {{"plan", dir},
                                {"hardware", hw->toJson()},
                                {"link", {{"latency_us", link->latencyUs},
                                          {"gb_per_s", link->gbPerSecond}}},
                                {"batch_tokens", f.batchTokens},
                                {"step_seconds", s.step},
                                {"serial_seconds", s.serial},
                                {"stream_busy_seconds", s.busy},
                                {"critical_path", s.criticalPath}};
  nlohmann::ordered_json timeline = nlohmann::ordered_json::array();
  for (const auto &i : s.instructions)
    timeline.push_back({{"instruction", i.index}, {"stream", i.stream}, {"start", i.start},
                        {"end", i.end}});
  doc["instructions"] = std::move(timeline);
  if (!f.baseline.empty()) {
    auto base = simulatePlan(f.baseline, *hw, *link, f.batchTokens, timed);
    if (!base)
      return fail(base.status().message());
    const double saving = base->sim.step - s.step;
    std::fprintf(o, "  baseline    %s: %.3f ms; this plan saves %.3f ms (%.1f%%), %.3fx as fast\n",
                 f.baseline.c_str(), ms(base->sim.step), ms(saving),
                 100 * saving / base->sim.step, base->sim.step / s.step);
    doc["baseline"] = {{"plan", f.baseline}, {"step_seconds", base->sim.step}};
  }
  const std::string launches =
      measured ? "launches as measured in " + f.measured +
                     " (the slowest rank's; a micro-batch's scaled by the cost model's part / "
                     "whole), collectives as its own transfer (the fastest rank's) plus the link"
               : [&] {
                   char text[200];
                   std::snprintf(text, sizeof text,
                                 "matmuls at %s's rate for their weight type, everything else at "
                                 "%.0f GB/s, %.1f us per launch",
                                 hw->name.c_str(), hw->memoryGBps, hw->launchOverheadUs);
                   return std::string(text);
                 }();
  std::fprintf(o, "assumptions: ranks alike (rank 0's program stands for the job); %s; expert "
                  "rows routed evenly; collectives over a link of %s (ring all_reduce: 2 (N - "
                  "1) / N of the payload on the wire; all_to_all_v: (N - 1) / N of a step's "
                  "rows to other ranks and back, each rank as many tokens)%s\n",
               launches.c_str(), link->describe().c_str(),
               hw->hostRunsStreamZero ? "; the host runs stream 0 and issues the others' work "
                                        "as it reaches it"
                                      : "");
  if (!f.trace.empty()) {
    Trace trace;
    for (const auto &i : s.instructions) {
      const fb::Instruction &inst = *program.instructions()->Get(i.index);
      const bool collective = inst.collective() != fb::CollectiveOp::None;
      trace.add({instructionName(inst), collective ? "collective" : "launch",
                 inst.location() ? inst.location()->str() : "", f.batchTokens},
                i.stream, i.start * 1e6, (i.end - i.start) * 1e6);
    }
    auto file = OutputFile::create(f.trace);
    if (!file)
      return fail(file.status().message());
    if (Status st = file->write(traceDocument({trace.events(0)})); !st)
      return fail(st.message());
    if (Status st = file->close(); !st)
      return fail(st.message());
  }
  if (out.wantsJson())
    if (Status st = out.writeJson(doc); !st)
      return fail(st.message());
  return 0;
}

int json(const LoadedPlan &loaded, const std::string &dir) {
  flatbuffers::Parser parser;
  parser.opts.strict_json = true;
  parser.opts.output_default_scalars_in_json = true;
  if (!parser.Parse(kPlanSchemaText))
    return fail("internal: the embedded schema does not parse: " + parser.error_);
  std::string text;
  auto bytes = moe::rt::readFile(dir + "/" + kPlanFileName);
  if (!bytes)
    return fail(bytes.status().message());
  if (!flatbuffers::GenerateText(parser, bytes->data(), &text))
    return fail("cannot print the plan as JSON: one of its strings (the checkpoint path, a "
                "tensor name) is not UTF-8");
  (void)loaded;
  std::cout << text;
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  moe::tools::Cli cli("moe-plan", "moe-plan: inspect and verify compiled MoE plans");
  std::string dir;
  struct Command {
    const char *name, *help;
  };
  const Command commands[] = {
      {"show", "readable summary: model, weights per type, memory, instructions"},
      {"weights", "each weight: precision, scale group, shape and bytes"},
      {"json", "the whole plan as JSON"},
      {"verify", "check the plan and every weight checksum"},
      {"placement", "each MoE layer's experts on the ranks; with --profile their predicted "
                    "load, with --trace a replay of the trace over them"},
      {"simulate", "a step's predicted time per stream on a hardware profile, its critical "
                   "path and what overlap saves"},
      {"synth", "a runnable copy of the plan (a shape-only one too) with random weights of "
                "every tensor's type and shape: a benchmark model where the checkpoint "
                "cannot go"}};
  for (const Command &c : commands)
    cli.addPlan(dir, cli.app.add_subcommand(c.name, c.help));
  PlacementFlags placed;
  CLI::App *placementCmd = cli.app.get_subcommand("placement");
  placementCmd->add_option("--profile", placed.profile, "a routing profile (moe-run "
                                                        "--routing-profile)")
      ->type_name("FILE");
  placementCmd->add_option("--trace", placed.trace, "a routing trace to replay "
                                                    "(tools/make-routing-trace.py)")
      ->type_name("FILE");
  placementCmd->add_option("--days", placed.days, "the trace's days to replay, FIRST:LAST")
      ->type_name("A:B");
  placementCmd->add_option("--json", placed.json, "write the results as JSON to FILE ('-': "
                                                  "standard output)")
      ->type_name("FILE");
  SimulateFlags simulated;
  CLI::App *simulateCmd = cli.app.get_subcommand("simulate");
  simulateCmd
      ->add_option("--hardware", simulated.hardware,
                   "the hardware profile (docs/hardware/*.json; moe-roofline --calibrate "
                   "writes this machine's)")
      ->required()
      ->type_name("FILE");
  simulateCmd->add_option("--batch-tokens", simulated.batchTokens, "tokens of the step")
      ->required()
      ->check(moe::tools::integerIn(1, 1 << 24))
      ->type_name("N");
  simulateCmd
      ->add_option("--link", simulated.link,
                   "the link between ranks instead of the profile's (as moe-run "
                   "--emulate-link)")
      ->type_name("LATENCY_US:GB_PER_S")
      ->check(moe::tools::linkValidator());
  simulateCmd
      ->add_option("--baseline", simulated.baseline,
                   "also simulate this plan (e.g. compiled without --overlap) and print the "
                   "saving against it")
      ->type_name("PLAN-DIR");
  simulateCmd
      ->add_option("--measured", simulated.measured,
                   "time launches as a run measured them: a trace (moe-run --trace) of this "
                   "model without micro-batches, with a step of --batch-tokens tokens")
      ->type_name("TRACE");
  simulateCmd->add_option("--trace", simulated.trace,
                          "write the predicted timeline as Chrome/Perfetto trace-event JSON")
      ->type_name("FILE");
  simulateCmd->add_option("--json", simulated.json, "write the results as JSON to FILE ('-': "
                                                    "standard output)")
      ->type_name("FILE");
  std::string synthOut;
  uint64_t seed = 0;
  CLI::App *synthCmd = cli.app.get_subcommand("synth");
  synthCmd->add_option("-o,--output", synthOut, "the new plan directory (must not exist)")
      ->required()
      ->type_name("DIR");
  synthCmd->add_option("--seed", seed, "seed of the random weights (default 0)")
      ->type_name("S");
  cli.app.require_subcommand(1);
  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(std::begin(commands), std::end(commands),
                   [&](const Command &c) { return std::string(argv[1]) == c.name; }))
    return fail("unknown command '" + std::string(argv[1]) +
                "' (show, weights, json, verify, placement, simulate or synth; see --help)");
  if (auto code = cli.parse(argc, argv))
    return *code;
  const std::string command = cli.app.get_subcommands().front()->get_name();
  if (command == "simulate")
    return simulate(dir, simulated);
  LoadOptions options;
  options.verifyWeights = command == "verify";
  options.mapWeights = command == "verify"; // the others read the plan alone
  auto loaded = LoadedPlan::open(dir, options);
  if (!loaded)
    return fail(loaded.status().message());
  if (command == "show")
    return show(**loaded);
  if (command == "json")
    return json(**loaded, dir);
  if (command == "weights")
    return weights(**loaded);
  if (command == "placement")
    return placement(**loaded, placed);
  if (command == "synth") {
    if (Status s = moe::tools::synthesizeWeights(**loaded, synthOut, seed); !s)
      return fail(s.message());
    std::printf("%s: wrote %s with random weights (seed %llu)\n", dir.c_str(), synthOut.c_str(),
                (unsigned long long)seed);
    return 0;
  }
  uint64_t weights = 0, bytes = 0;
  for (const fb::Tensor *t : *(*loaded)->plan().tensors())
    weights += t->storage() == fb::Storage::Weight;
  for (const fb::Program *prog : *(*loaded)->plan().programs())
    bytes += prog->weight_bytes();
  std::printf("%s: OK (plan verified; %llu weights, %s checked by %s)\n", dir.c_str(),
              (unsigned long long)weights, moe::rt::formatBytes(bytes).c_str(),
              moe::rt::weightChecksumName((*loaded)->plan().weight_checksum()));
  return 0;
}
