//===- moe-import.cpp - Hugging Face checkpoint -> moe IR -----------------===//
//
// Prints the imported module (or writes it to -o); --summary prints what the
// module contains instead; --config-keys prints the config.json keys a model
// type understands. Bad input: one line on stderr, exit code 1.
//
//===----------------------------------------------------------------------===//
#include "compiler/Registration.h"
#include "compiler/analysis/ModelSummary.h"
#include "compiler/import/ConfigKeys.h"
#include "compiler/import/Importer.h"
#include "moe/abi/File.h"
#include "tools/common/Cli.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <optional>

namespace {

/// The key table of `modelType`, one key per line: name, role, note.
int printConfigKeys(const moe::tools::Cli &cli, const std::string &modelType) {
  for (moe::Family f : {moe::Family::Mixtral, moe::Family::Qwen2Moe, moe::Family::Qwen3Moe,
                        moe::Family::DeepseekV2, moe::Family::DeepseekV3}) {
    if (modelType != moe::familyName(f))
      continue;
    for (const moe::ConfigKey &k : moe::configKeys(f)) {
      const char *role = k.role == moe::KeyRole::Read    ? "read"
                         : k.role == moe::KeyRole::Inert ? "inert"
                                                         : "alias of";
      std::printf("%-34s %-8s %s\n", k.name, role, k.note);
    }
    return 0;
  }
  return cli.fail("unknown model_type '" + modelType +
                  "'; supported: mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3");
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  moe::tools::Cli cli("moe-import",
                      "moe-import: Hugging Face MoE checkpoint -> moe dialect. Reads config.json "
                      "and the safetensors headers (model.safetensors or "
                      "model.safetensors.index.json) of mixtral, qwen2_moe, qwen3_moe, "
                      "deepseek_v2 and deepseek_v3 checkpoints.");
  std::string input, output = "-", keysOf;
  bool shapeOnly = false, summary = false;
  CLI::App &app = cli.app;
  auto *dir = app.add_option("checkpoint", input, "the Hugging Face checkpoint directory")
                  ->type_name("HF-DIR");
  app.add_option("-o,--output", output, "write the IR here ('-': standard output, the default)")
      ->type_name("FILE");
  app.add_flag("--shape-only", shapeOnly,
               "import from config.json alone; read no tensor headers");
  app.add_flag("--summary", summary,
               "print a summary of the model instead of its IR (with -o, write the IR too)");
  app.add_option("--config-keys", keysOf,
                 "print the config.json keys MODEL_TYPE understands (read, inert, alias) and "
                 "exit")
      ->type_name("MODEL_TYPE")
      ->excludes(dir);
  if (auto code = cli.parse(argc, argv))
    return *code;
  if (!keysOf.empty())
    return printConfigKeys(cli, keysOf);
  if (input.empty())
    return cli.fail("checkpoint is required (see --help)");
  // Open the output before the work, so that a bad path fails first.
  const bool writeIr = !summary || output != "-";
  std::optional<moe::rt::OutputFile> out;
  if (writeIr) {
    auto file = moe::rt::OutputFile::create(output);
    if (!file)
      return cli.fail(file.status().message());
    out.emplace(file.take());
  }

  mlir::DialectRegistry registry;
  moe::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  std::string error;
  moe::ImportOptions options;
  options.shapeOnly = shapeOnly;
  auto module = moe::importCheckpoint(context, input, options, error);
  if (!module)
    return cli.fail(error);
  if (summary)
    moe::printModelSummary(*module, llvm::outs());
  if (!writeIr)
    return 0;
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  os.flush();
  if (moe::rt::Status st = out->write(text); !st)
    return cli.fail(st.message());
  if (moe::rt::Status st = out->close(); !st)
    return cli.fail(st.message());
  return 0;
}
