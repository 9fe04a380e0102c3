//===- TextCheck.cpp - warn about a checkpoint's unusable text files ------===//
#include "tools/moe-compile/TextCheck.h"

#include "compiler/import/Safetensors.h"
#include "compiler/import/TextFiles.h"
#include "moe/runtime/ChatTemplate.h"
#include "moe/runtime/HfTokenizer.h"

#include <filesystem>

namespace moe {

void warnAboutTextFiles(const std::string &checkpointDir, int64_t vocabSize,
                        llvm::raw_ostream &out) {
  TextFiles text;
  try {
    text = readTextFiles((std::filesystem::path(checkpointDir) / "config.json").string());
  } catch (const InputError &) {
    return; // the plan writer reports it
  }
  if (!text.tokenizerJson.empty()) {
    auto tokenizer = rt::HfTokenizer::fromJson(text.tokenizerJson);
    if (!tokenizer)
      out << "moe-compile: warning: the checkpoint's " << tokenizer.status().message()
          << "; the plan takes token ids only\n";
    else if ((*tokenizer)->vocabSize() > vocabSize)
      out << "moe-compile: warning: the checkpoint's tokenizer.json has "
          << (*tokenizer)->vocabSize() << " tokens and the model " << vocabSize
          << "; a prompt with a token past the model's is refused\n";
  }
  if (!text.chatTemplate.empty())
    if (auto chat = rt::ChatTemplate::parse(text.chatTemplate); !chat)
      out << "moe-compile: warning: the checkpoint's chat template: " << chat.status().message()
          << "; moe-serve answers /v1/completions only\n";
}

} // namespace moe
