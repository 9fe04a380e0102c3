//===- moe-import.cpp - Hugging Face checkpoint -> moe IR -----------------===//
//
//   moe-import <hf-dir> [-o out.mlir] [--shape-only] [--summary]
//
// Prints the imported module (or writes it to -o); --summary prints what the
// module contains instead. Bad input: one line on stderr, exit code 1.
//
//===----------------------------------------------------------------------===//
#include "compiler/Registration.h"
#include "compiler/analysis/ModelSummary.h"
#include "compiler/import/Importer.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;

static cl::OptionCategory category("moe-import options");
static cl::opt<std::string> inputDir(cl::Positional, cl::Required,
                                     cl::desc("<hf-checkpoint-dir>"),
                                     cl::cat(category));
static cl::opt<std::string> outputFile("o", cl::desc("write the IR here"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(category));
static cl::opt<bool> shapeOnly(
    "shape-only",
    cl::desc("import from config.json alone; read no tensor headers"),
    cl::cat(category));
static cl::opt<bool> summary(
    "summary",
    cl::desc("print a summary of the model instead of its IR (with -o, "
             "write the IR too)"),
    cl::cat(category));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "moe-import: Hugging Face MoE checkpoint -> moe dialect\n\n"
      "  Reads config.json and the safetensors headers (model.safetensors or\n"
      "  model.safetensors.index.json) of mixtral, qwen2_moe, qwen3_moe,\n"
      "  deepseek_v2 and deepseek_v3 checkpoints.\n");

  mlir::DialectRegistry registry;
  moe::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  std::string error;
  moe::ImportOptions options;
  options.shapeOnly = shapeOnly;
  auto module = moe::importCheckpoint(context, inputDir, options, error);
  if (!module) {
    llvm::errs() << "moe-import: error: " << error << "\n";
    return 1;
  }
  if (summary)
    moe::printModelSummary(*module, llvm::outs());
  if (summary && outputFile == "-")
    return 0;
  auto output = mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "moe-import: error: " << error << "\n";
    return 1;
  }
  module->print(output->os());
  output->keep();
  return 0;
}
