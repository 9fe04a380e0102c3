//===- RequestFuzzer.cpp - fuzz moe-serve's request bodies ----------------===//
//
// The input is the body of a POST to /v1/completions (fuzz-completions) or
// /v1/chat/completions (fuzz-chat), read as moe-serve reads it: JSON, the
// fields, the prompts (tokenized with the byte tokenizer) or the messages
// rendered by the published Qwen3 chat template. A body is accepted into
// engine requests that are well formed, or refused with an error that
// names a status; nothing else may happen (no crash, no hang, no sanitizer
// report).
//
//===----------------------------------------------------------------------===//
#include "moe/abi/File.h"
#include "moe/serve/OpenAi.h"
#include "test/fuzz/FuzzTarget.h"

#include <cstdlib>

using namespace moe;

namespace {

struct Model {
  Model() {
    auto text = rt::readFile(MOE_FUZZ_CHAT_TEMPLATE, 1u << 20);
    if (!text)
      std::abort();
    auto parsed = rt::ChatTemplate::parse(*text);
    if (!parsed)
      std::abort();
    chat.emplace(parsed.take());
    info.name = "m";
    info.tokenizer = &tokenizer;
    info.chatTemplate = &*chat;
    info.bosToken = "<s>";
    info.eosToken = "</s>";
    info.eosTokens = {1};
    info.vocabSize = 259;
    info.maxContext = 4096;
    info.maxPromptTokens = 2048;
  }
  rt::ByteTokenizer tokenizer;
  std::optional<rt::ChatTemplate> chat;
  serve::ModelInfo info;
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const Model model;
  serve::ApiRequest request;
  auto error = serve::parseRequest(std::string(reinterpret_cast<const char *>(data), size),
                                   MOE_FUZZ_CHAT, model.info, request);
  if (error) {
    if (error->status < 400 || error->status > 499 || error->message.empty())
      std::abort(); // a refusal is a client error with a reason
    return 0;
  }
  const std::vector<rt::GenerationRequest> all = serve::choices(request);
  if (all.empty() || int64_t(all.size()) > serve::kMaxChoices)
    std::abort();
  for (const rt::GenerationRequest &g : all) {
    const int64_t length = int64_t(g.prompt.size());
    if (length == 0 || length > model.info.maxPromptTokens ||
        length + g.maxNewTokens > model.info.maxContext || g.maxNewTokens < 0)
      std::abort(); // what the engine is given always fits
    for (int32_t t : g.prompt)
      if (t < 0 || t >= model.info.vocabSize)
        std::abort();
  }
  return 0;
}
