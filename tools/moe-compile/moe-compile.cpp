//===- moe-compile.cpp - Hugging Face checkpoint -> deployable plan -------===//
//
// Imports the checkpoint, runs the default pipeline (or the one given) with
// the verifier after every pass, then packs the weights and writes the plan.
// --emit=mlir prints the pipeline's output instead of writing a plan.
//
//===----------------------------------------------------------------------===//
#include "compiler/Registration.h"
#include "compiler/import/Importer.h"
#include "compiler/pipelines/Pipelines.h"
#include "compiler/target/PlanWriter.h"
#include "tools/moe-compile/TextCheck.h"
#include "AutoOverlap.h"
#include "AutoPrecision.h"
#include "tools/common/LinkFlag.h"
#include "moe/abi/File.h"
#include "moe/abi/PlanFormat.h"
#include "tools/common/Cli.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <signal.h>
#include <sys/resource.h>

#include <atomic>

#include <algorithm>
#include <chrono>
#include <optional>

namespace {

/// Set by SIGTERM and SIGINT: the plan being written is abandoned and the
/// old one left in place. A second signal kills at once (SA_RESETHAND).
std::atomic<bool> interrupted{false};

void onSignal(int) { interrupted = true; }

void catchInterrupts() {
  struct sigaction sa = {};
  sa.sa_handler = onSignal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

struct Flags {
  std::string input, output, pipeline, kvDtype = "f32", precision = "keep", calibration,
                                       emit = "plan", weightLayout = "rows";
  int64_t maxBatchTokens = 256, maxContext = 4096, calibrationTokens = 1024;
  bool fusion = true, splitExperts = false, dpAttention = false, shapeOnly = false;
  double maxKl = 1e-3, minTop1 = 0.99;
  int threads = 0;
  int64_t ep = 1, tp = 1, redundant = 0, ranksPerNode = 0;
  std::string placementProfile, routing = "token_choice", overlap = "none", hardware, link;
  int64_t microBatches = 2;
  double capacityFactor = 1.0;
  /// The options whose values go only into the default pass pipeline's text
  /// (defaultPipelineText): beside --pass-pipeline, which replaces that
  /// pipeline, they are refused rather than ignored.
  std::vector<const CLI::Option *> pipelineOnly;
};

const std::vector<std::string> kPolicies = {"keep", "fp32", "bf16", "int8", "w8a8",
                                            "int4", "w4a8", "fp8",  "seed", "auto"};

void addFlags(moe::tools::Cli &cli, Flags &f) {
  CLI::App &app = cli.app;
  auto pipeline = [&](CLI::Option *option) { // an option of the default pipeline only
    f.pipelineOnly.push_back(option);
    return option;
  };
  using moe::tools::finiteIn;
  using moe::tools::integerIn;
  app.add_option("checkpoint", f.input, "the Hugging Face checkpoint directory")
      ->required()
      ->type_name("HF-DIR");
  app.add_option("-o,--output", f.output, "the plan directory to write (replaced atomically)")
      ->type_name("PLAN-DIR");
  pipeline(app.add_option("--max-batch-tokens", f.maxBatchTokens,
                          "most tokens one forward step processes (default 256)"))
      ->check(integerIn(1, 1 << 20))
      ->type_name("N");
  pipeline(app.add_option("--max-context", f.maxContext,
                          "KV-cache tokens per sequence (default 4096, capped by the model)"))
      ->check(integerIn(1, 1 << 24))
      ->type_name("N");
  app.add_option("--pass-pipeline", f.pipeline,
                 "textual pass pipeline to run instead of the default, as in moe-opt (the "
                 "flags that only set the default's options are then refused)")
      ->type_name("PIPELINE");
  app.add_option("--kv-dtype", f.kvDtype,
                 "the plan's KV-cache element type: f32 (default), bf16, int8, fp8")
      ->check(moe::tools::oneOf({"f32", "bf16", "int8", "fp8"}))
      ->type_name("T");
  pipeline(
      app.add_flag("--fusion,!--no-fusion", f.fusion,
                   "run moe-fuse-experts (default; --no-fusion or --fusion=false to compare)"));
  pipeline(app.add_option("--ep", f.ep,
                          "expert-parallel ranks: one program per rank, each holding 1/N of every "
                          "layer's experts (run with mpirun -np N; default 1)"))
      ->check(integerIn(1, 4096))
      ->type_name("N");
  pipeline(
      app.add_option("--tp", f.tp,
                     "tensor-parallel ranks: one program per rank, each holding 1/N of every "
                     "layer's attention heads, MLP columns and (without --ep) experts' columns, "
                     "an all-reduce after each split projection (mpirun -np N; with --ep N, M "
                     "dividing N: groups of M consecutive ranks split attention and dense "
                     "layers, experts are spread over all N; default 1)"))
      ->check(integerIn(1, 4096))
      ->type_name("N");
  pipeline(
      app.add_flag("--dp-attention", f.dpAttention,
                   "with --ep: data-parallel attention, as DeepSeek deploys V3: each rank serves "
                   "its own sequences and the MoE layers send rows to the experts' ranks and back "
                   "(all-to-all)"));
  app.add_flag("--shape-only", f.shapeOnly,
               "compile from config.json alone (dtypes from torch_dtype): the plan's layout "
               "without weights, to inspect and simulate (moe-plan show, simulate) a model "
               "too large to download; the runtime refuses to run it");
  pipeline(
      app.add_option("--overlap", f.overlap,
                     "with --ep or --tp: two-batch splits each step into --micro-batches parts "
                     "whose collectives run on a stream of their own while the next part computes "
                     "(moe-schedule-overlap); auto chooses by prediction (--hardware); none "
                     "(default)"))
      ->check(moe::tools::oneOf({"none", "two-batch", "auto"}))
      ->type_name("POLICY");
  app.add_option("--hardware", f.hardware,
                 "with --overlap auto: the hardware profile its predictions run on "
                 "(docs/hardware/*.json): none, or two-batch in 2, 3 or 4 micro-batches, "
                 "whichever moe-plan simulate predicts fastest at --max-batch-tokens")
      ->type_name("FILE");
  app.add_option("--link", f.link,
                 "with --overlap auto: the link between ranks instead of the profile's")
      ->type_name("LATENCY_US:GB_PER_S")
      ->check(moe::tools::linkValidator());
  pipeline(app.add_option("--micro-batches", f.microBatches,
                          "with --overlap two-batch: parts of each step (default 2)"))
      ->check(integerIn(2, moe::rt::kMaxMicroBatches))
      ->type_name("K");
  pipeline(
      app.add_option("--placement-profile", f.placementProfile,
                     "with --ep: place each layer's experts as planned from this routing profile "
                     "(moe-run --routing-profile): hot experts replicated into --redundant slots, "
                     "the most loaded rank evened out (moe-place-experts)"))
      ->type_name("FILE");
  pipeline(app.add_option("--redundant", f.redundant,
                          "with --placement-profile: expert slots beyond one per routed expert "
                          "(default 0)"))
      ->check(integerIn(0, 65536))
      ->type_name("R");
  pipeline(
      app.add_option("--ranks-per-node", f.ranksPerNode,
                     "ranks per node, packed node first (mpirun's default mapping; default 0: one "
                     "node): --placement-profile places replicas by it, and --tp groups must lie "
                     "inside a node"))
      ->check(integerIn(0, 4096))
      ->type_name("K");
  pipeline(
      app.add_option("--routing", f.routing,
                     "how a step's tokens go to experts: token_choice (each token its top-k, the "
                     "checkpoint's own, default), capacity (token choice, each expert capped at "
                     "--capacity-factor x its even share, overflow to the next-best expert), "
                     "expert_choice (each expert takes its --capacity-factor x even share of the "
                     "step's tokens); the last two depend on the batch (moe-set-routing)"))
      ->check(moe::tools::oneOf({"token_choice", "capacity", "expert_choice"}))
      ->type_name("POLICY");
  pipeline(
      app.add_option("--capacity-factor", f.capacityFactor,
                     "with --routing capacity or expert_choice: each expert's capacity in even "
                     "shares of the step's picks (default 1)"))
      ->check(finiteIn(1, 64))
      ->type_name("F");
  pipeline(app.add_flag("--split-experts", f.splitExperts,
                        "run moe-split-experts: each experts launch as dispatch, expert_rows and "
                        "combine (what expert parallelism exchanges rows between; the same bits)"));
  pipeline(
      app.add_option("--precision", f.precision,
                     "how the plan stores weights: keep (the checkpoint's dtypes, default), fp32, "
                     "bf16, int8 (per output row scales), w8a8 (int8 weights with row scales and "
                     "int8 activations per token in the matrix products; router and an untied "
                     "embedding int8), int4 (scales per 128 elements of a row), w4a8 (int4 "
                     "weights and int8 activations per token in the matrix products; router and "
                     "an untied embedding int4), "
                     "fp8 (e4m3, 128x128 block scales), seed (router f32, shared experts int8, "
                     "routed experts fp8, embedding int8, LM head bf16), auto (the fewest bytes "
                     "within --max-kl and --min-top1, measured on calibration text)"))
      ->check(moe::tools::oneOf(kPolicies))
      ->type_name("POLICY");
  pipeline(app.add_option("--weight-layout", f.weightLayout,
                          "how the plan lays out the matrices the CPU kernels multiply (attention, "
                          "MLPs, experts, router, LM head) when stored as f32, bf16 or f16: rows "
                          "(default) or panels (8 rows side by side; docs/design-panel-gemm.md). "
                          "An untied embedding table stays rows; the CUDA backend takes rows "
                          "only"))
      ->check(moe::tools::oneOf({"rows", "panels"}))
      ->type_name("LAYOUT");
  app.add_option("--max-kl", f.maxKl,
                 "auto: largest mean KL(fp32 || plan) per calibration token, in nats "
                 "(default 0.001)")
      ->check(finiteIn(0, 1e6))
      ->type_name("NATS");
  app.add_option("--min-top1", f.minTop1,
                 "auto: smallest fraction of calibration tokens whose most likely next token "
                 "agrees with fp32 (default 0.99)")
      ->check(finiteIn(0, 1))
      ->type_name("F");
  app.add_option("--calibration", f.calibration,
                 "auto: calibration text (byte-level models) or token ids (others); default: a "
                 "built-in English sample, or seeded random tokens")
      ->type_name("FILE");
  app.add_option("--calibration-tokens", f.calibrationTokens,
                 "auto: tokens of the calibration input scored (default 1024)")
      ->check(integerIn(2, 1 << 24))
      ->type_name("N");
  app.add_option("--emit", f.emit, "plan (default) or mlir: print the IR, write no plan")
      ->check(moe::tools::oneOf({"plan", "mlir"}))
      ->type_name("WHAT");
  cli.addThreads(f.threads);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  moe::registerAllPasses();
  moe::tools::Cli cli("moe-compile", "moe-compile: Hugging Face MoE checkpoint -> plan");
  Flags f;
  addFlags(cli, f);
  if (auto code = cli.parse(argc, argv))
    return *code;
  auto fail = [&](const std::string &m) { return cli.fail(m); };
  catchInterrupts();
  if (f.emit == "plan" && f.output.empty())
    return fail("missing -o <plan-dir> (or use --emit=mlir)");
  if (f.emit == "mlir" && !f.output.empty() && f.precision != "auto")
    return fail("--emit=mlir prints the IR to standard output and writes no plan: drop -o");
  for (const char *flag : {"--max-kl", "--min-top1", "--calibration", "--calibration-tokens"})
    if (cli.app.count(flag) && f.precision != "auto")
      return fail(std::string(flag) + " is used only by --precision auto");
  if (cli.app.count("--capacity-factor") && f.routing == "token_choice")
    return fail("--capacity-factor is used only with --routing capacity or expert_choice");
  if (f.ep > 1 && f.tp > 1 && f.ep % f.tp)
    return fail("--tp " + std::to_string(f.tp) + " does not divide --ep " + std::to_string(f.ep) +
                ": with both, --ep is the rank count (experts over all ranks) and --tp the "
                "ranks of each tensor-parallel group (attention and dense layers split over "
                "them), so --tp must divide --ep");
  if (f.dpAttention && (f.ep < 2 || f.ep == f.tp))
    return fail("--dp-attention needs --ep 2 or more and at least two data-parallel groups: "
                "with --tp M, each group of M ranks attends for its own sequences, so M must "
                "be below --ep");
  if (f.overlap != "none" && f.ep < 2 && f.tp < 2)
    return fail("--overlap hides the collectives of --ep or --tp behind computation: it needs "
                "one of them at 2 or more");
  if (cli.app.count("--micro-batches") && f.overlap != "two-batch")
    return fail("--micro-batches is used only with --overlap two-batch");
  if ((f.overlap == "auto") != !f.hardware.empty() || (!f.link.empty() && f.overlap != "auto"))
    return fail("--overlap auto needs --hardware FILE, and --hardware and --link are used only "
                "by --overlap auto");
  if (f.overlap == "auto" && (f.emit != "plan" || !f.pipeline.empty() || f.precision == "auto"))
    return fail("--overlap auto compiles and simulates plans: it cannot be combined with "
                "--emit=mlir, --pass-pipeline or --precision=auto");
  if (!f.placementProfile.empty() && f.ep < 2)
    return fail("--placement-profile places experts over ranks: it needs --ep 2 or more");
  if (cli.app.count("--redundant") && f.placementProfile.empty())
    return fail("--redundant is used only with --placement-profile");
  if (cli.app.count("--ranks-per-node") && f.placementProfile.empty() && f.tp < 2)
    return fail("--ranks-per-node is used only with --placement-profile or --tp");
  if (f.ranksPerNode > 0 && f.tp > 1 && f.ranksPerNode % f.tp)
    return fail("--tp " + std::to_string(f.tp) + " groups consecutive ranks, and with " +
                std::to_string(f.ranksPerNode) + " ranks per node a group would span two nodes: "
                "--tp must divide --ranks-per-node");
  if (f.placementProfile.find('"') != std::string::npos)
    return fail("--placement-profile: a path with '\"' cannot go into the pass pipeline");
  const moe::plan::DType kvType = *moe::rt::parseKvDtype(f.kvDtype);
  const bool autoPrecision = f.precision == "auto";
  if (autoPrecision && (f.emit != "plan" || !f.pipeline.empty()))
    return fail("--precision=auto writes a plan: it cannot be combined with --emit=mlir or "
                "--pass-pipeline");
  // A pipeline given whole would silently ignore these.
  if (!f.pipeline.empty())
    for (const CLI::Option *option : f.pipelineOnly)
      if (option->count())
        return fail(option->get_name() +
                    " sets an option of the default pass pipeline, which "
                    "--pass-pipeline replaces: write it into the pipeline instead (a plan "
                    "compiled without --pass-pipeline shows its text: moe-plan show PLAN-DIR)");
  auto start = std::chrono::steady_clock::now();

  mlir::DialectRegistry registry;
  moe::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  std::string error;
  if (f.shapeOnly && autoPrecision)
    return fail("--shape-only has no weights to calibrate --precision=auto on");
  moe::ImportOptions importOptions;
  importOptions.shapeOnly = f.shapeOnly;
  auto module = moe::importCheckpoint(context, f.input, importOptions, error);
  if (!module)
    return fail(error);

  // One compilation of the imported module (a copy: auto compiles many).
  std::string diagnostic;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (diagnostic.empty() && d.getSeverity() == mlir::DiagnosticSeverity::Error) {
      llvm::raw_string_ostream os(diagnostic);
      os << d.getLocation() << ": " << d.str();
    }
    return mlir::success();
  });
  auto compile = [&](const std::string &policy, const std::vector<std::string> &overrides,
                     const std::string &dir, std::string &error) {
    moe::PipelineOptions options{f.maxBatchTokens, f.maxContext, f.fusion,
                                 f.splitExperts,   f.ep,          policy,
                                 overrides,        f.placementProfile, f.redundant,
                                 f.ranksPerNode,   f.routing,          f.capacityFactor,
                                 f.tp,             f.dpAttention,
                                 f.overlap,        f.microBatches};
    options.weightLayout = f.weightLayout;
    std::string text = f.pipeline.empty() ? moe::defaultPipelineText(options) : f.pipeline;
    auto parsed = mlir::parsePassPipeline(text, llvm::errs());
    if (mlir::failed(parsed)) {
      error = "cannot parse pass pipeline '" + text + "'";
      return false;
    }
    mlir::PassManager pm(&context);
    static_cast<mlir::OpPassManager &>(pm) = *parsed;
    mlir::OwningOpRef<mlir::ModuleOp> copy = module->clone();
    diagnostic.clear();
    if (mlir::failed(pm.run(*copy))) {
      error = diagnostic.empty() ? "the pass pipeline failed" : diagnostic;
      return false;
    }
    if (f.emit == "mlir") {
      // Through the checked output (a full disk is one line, not LLVM's
      // fatal error when its stream closes).
      std::string ir;
      llvm::raw_string_ostream os(ir);
      copy->print(os);
      auto out = moe::rt::OutputFile::create("-");
      for (moe::rt::Status st : {out->write(ir), out->close()})
        if (!st) {
          error = st.message();
          return false;
        }
      return true;
    }
    return moe::writePlan(*copy, {f.input, dir, text, kvType, &interrupted, f.shapeOnly},
                          error);
  };
  std::vector<std::string> overrides;
  if (autoPrecision) {
    moe::AutoPrecisionOptions search{f.maxKl, f.minTop1, f.calibration, f.calibrationTokens,
                                     moe::candidatesDir(f.output), f.threads};
    if (!moe::searchPrecision(compile, search, overrides, llvm::errs(), error))
      return fail(interrupted ? "interrupted by a signal; " + f.output + " was left as it was"
                              : error);
  }
  if (f.overlap == "auto") {
    moe::AutoOverlapOptions choose{f.hardware, f.link, f.maxBatchTokens,
                                   moe::candidatesDir(f.output)};
    auto compileOverlap = [&](const std::string &policy, int64_t parts, const std::string &dir,
                              std::string &error) {
      f.overlap = policy;
      f.microBatches = parts;
      return compile(f.precision, overrides, dir, error);
    };
    std::string policy;
    int64_t parts = 0;
    if (!moe::chooseOverlap(compileOverlap, choose, policy, parts, llvm::errs(), error))
      return fail(error);
    f.overlap = policy;
    f.microBatches = parts;
  }
  if (!compile(autoPrecision ? "keep" : f.precision, overrides, f.output, error))
    return fail(error);
  if (f.emit == "mlir")
    return 0;
  auto config = (*module)->getAttrOfType<mlir::DictionaryAttr>("moe.config");
  auto vocab = config ? config.getAs<mlir::IntegerAttr>("vocab_size") : mlir::IntegerAttr();
  moe::warnAboutTextFiles(f.input, vocab ? vocab.getInt() : INT64_MAX, llvm::errs());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  llvm::outs() << "moe-compile: wrote " << f.output << " in " << llvm::format("%.2f", seconds)
               << " s (peak RSS " << llvm::format("%.1f", usage.ru_maxrss / 1024.0) << " MiB)\n";
  return 0;
}
