//===- moe-compile.cpp - Hugging Face checkpoint -> deployable plan -------===//
//
//   moe-compile <hf-dir> -o <plan-dir> [--max-batch-tokens N] [--max-context N]
//               [--pass-pipeline='builtin.module(...)'] [--emit=mlir]
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
#include "AutoPrecision.h"
#include "moe/runtime/PlanFormat.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <optional>

namespace cl = llvm::cl;

static cl::OptionCategory category("moe-compile options");
static cl::opt<std::string> inputDir(cl::Positional, cl::Required,
                                     cl::desc("<hf-checkpoint-dir>"), cl::cat(category));
static cl::opt<std::string> outputDir("o", cl::desc("plan directory to write"),
                                      cl::value_desc("dir"), cl::cat(category));
static cl::opt<int64_t> maxBatchTokens(
    "max-batch-tokens", cl::desc("most tokens one forward step processes (default 256)"),
    cl::init(256), cl::cat(category));
static cl::opt<int64_t> maxContext(
    "max-context",
    cl::desc("KV-cache tokens per sequence (default 4096, capped by the model)"),
    cl::init(4096), cl::cat(category));
static cl::opt<std::string> pipeline(
    "pass-pipeline",
    cl::desc("textual pass pipeline to run instead of the default, as in moe-opt"),
    cl::cat(category));
static cl::opt<std::string> kvDtype(
    "kv-dtype", cl::desc("KV-cache element type: f32 (default), bf16, int8, fp8"),
    cl::init("f32"), cl::cat(category));
static cl::opt<bool> fusion(
    "fusion", cl::desc("run moe-fuse-experts (default true; --fusion=false to compare)"),
    cl::init(true), cl::cat(category));
static cl::opt<std::string> precision(
    "precision",
    cl::desc("how the plan stores weights: keep (the checkpoint's dtypes, default), fp32, "
             "bf16, int8 (per output row scales), int4 (scales per 128 elements of a row), "
             "fp8 (e4m3, 128x128 block scales), seed (router f32, shared experts int8, "
             "routed experts fp8, embedding int8, LM head bf16), auto (the fewest bytes "
             "within --max-kl and --min-top1, measured on calibration text)"),
    cl::init("keep"), cl::cat(category));
static cl::opt<double> maxKl(
    "max-kl", cl::desc("auto: largest mean KL(fp32 || plan) per calibration token, in nats "
                       "(default 0.001)"),
    cl::init(1e-3), cl::cat(category));
static cl::opt<double> minTop1(
    "min-top1", cl::desc("auto: smallest fraction of calibration tokens whose most likely next "
                         "token agrees with fp32 (default 0.99)"),
    cl::init(0.99), cl::cat(category));
static cl::opt<std::string> calibration(
    "calibration",
    cl::desc("auto: calibration text (byte-level models) or token ids (others); default: a "
             "built-in English sample, or seeded random tokens"),
    cl::cat(category));
static cl::opt<int64_t> calibrationTokens(
    "calibration-tokens", cl::desc("auto: tokens of the calibration input scored (default 1024)"),
    cl::init(1024), cl::cat(category));
static cl::opt<std::string> emit("emit", cl::desc("mlir: print the IR, write no plan"),
                                 cl::init("plan"), cl::cat(category));

static int fail(const std::string &message) {
  llvm::errs() << "moe-compile: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  moe::registerAllPasses();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "moe-compile: Hugging Face MoE checkpoint -> plan\n");
  if (emit != "plan" && emit != "mlir")
    return fail("--emit must be plan or mlir, got '" + emit + "'");
  if (emit == "plan" && outputDir.empty())
    return fail("missing -o <plan-dir> (or use --emit=mlir)");
  std::optional<moe::plan::DType> kvType = moe::rt::parseKvDtype(kvDtype);
  if (!kvType)
    return fail("--kv-dtype must be f32, bf16, int8 or fp8, got '" + kvDtype + "'");
  const std::string policies[] = {"keep", "fp32", "bf16", "int8", "int4", "fp8", "seed", "auto"};
  if (std::find(std::begin(policies), std::end(policies), precision.getValue()) ==
      std::end(policies))
    return fail("--precision must be keep, fp32, bf16, int8, int4, fp8, seed or auto, got '" +
                precision + "'");
  const bool autoPrecision = precision == "auto";
  if (autoPrecision && (!(maxKl >= 0) || !(minTop1 >= 0 && minTop1 <= 1) || calibrationTokens < 2))
    return fail("--max-kl must be >= 0, --min-top1 in [0, 1] and --calibration-tokens >= 2");
  if (autoPrecision && (emit != "plan" || !pipeline.empty()))
    return fail("--precision=auto writes a plan: it cannot be combined with --emit=mlir or "
                "--pass-pipeline");
  if (maxBatchTokens < 1 || maxContext < 1)
    return fail("--max-batch-tokens and --max-context must be positive");
  auto start = std::chrono::steady_clock::now();

  mlir::DialectRegistry registry;
  moe::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  std::string error;
  auto module = moe::importCheckpoint(context, inputDir, {}, error);
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
    moe::PipelineOptions options{maxBatchTokens, maxContext, fusion, policy, overrides};
    std::string text = pipeline.empty() ? moe::defaultPipelineText(options) : pipeline;
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
    if (emit == "mlir") {
      copy->print(llvm::outs());
      return true;
    }
    return moe::writePlan(*copy, {inputDir, dir, text, *kvType}, error);
  };
  std::vector<std::string> overrides;
  if (autoPrecision) {
    moe::AutoPrecisionOptions search{maxKl, minTop1, calibration, calibrationTokens,
                                     outputDir + ".auto-candidates"};
    llvm::errs() << "moe-compile: --precision=auto: each component at each precision, "
                    "against fp32\n";
    if (!moe::searchPrecision(compile, search, overrides, llvm::errs(), error))
      return fail(error);
  }
  if (!compile(autoPrecision ? "keep" : precision.getValue(), overrides, outputDir, error))
    return fail(error);
  if (emit == "mlir")
    return 0;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  llvm::outs() << "moe-compile: wrote " << outputDir << " in "
               << llvm::format("%.2f", seconds) << " s (peak RSS "
               << llvm::format("%.1f", usage.ru_maxrss / 1024.0) << " MiB)\n";
  return 0;
}
