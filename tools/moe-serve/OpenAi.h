//===- OpenAi.h - OpenAI completions requests and responses -----*- C++ -*-===//
//
// The request bodies of POST /v1/completions and /v1/chat/completions read
// into a GenerationRequest, and the response objects and stream chunks
// written back, as OpenAI's API defines them. A field we do not implement
// is refused by name (400), never ignored: a client that asks for logprobs
// must not get an answer without them.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOESERVE_OPENAI_H
#define MOE_TOOLS_MOESERVE_OPENAI_H

#include "moe/runtime/ChatTemplate.h"
#include "moe/runtime/Engine.h"
#include "moe/runtime/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace moe::serve {

/// An HTTP error with OpenAI's error body.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param; ///< the offending field, when there is one
  std::string code;
  nlohmann::ordered_json body() const;
};

/// What requests are read against.
struct ModelInfo {
  std::string name;                      ///< the model's id in requests and /v1/models
  const rt::Tokenizer *tokenizer = nullptr;
  const rt::ChatTemplate *chatTemplate = nullptr; ///< null: no /v1/chat/completions
  std::string bosToken, eosToken;
  int64_t maxContext = 0;
  int64_t maxPromptTokens = 0; ///< --max-prompt-tokens
};

struct ApiRequest {
  bool chat = false;
  bool stream = false;
  bool includeUsage = false; ///< stream_options.include_usage
  rt::GenerationRequest generation;
};

/// The body of a completions (`chat` false) or chat completions request.
std::optional<ApiError> parseRequest(const std::string &body, bool chat, const ModelInfo &model,
                                     ApiRequest &out);

/// "stop" or "length" (OpenAI's names for why a completion ended).
const char *finishReason(rt::FinishReason reason);

/// The response object of a finished request.
nlohmann::ordered_json responseObject(const ApiRequest &r, const std::string &id, int64_t created,
                              const std::string &model, const std::string &text,
                              rt::FinishReason reason, int64_t completionTokens);
/// A stream chunk carrying `text` (and, at the end, the finish reason).
nlohmann::ordered_json chunkObject(const ApiRequest &r, const std::string &id, int64_t created,
                           const std::string &model, const std::string &text,
                           std::optional<rt::FinishReason> reason, bool first);
nlohmann::ordered_json usageObject(int64_t promptTokens, int64_t completionTokens);

} // namespace moe::serve

#endif
