//===- OpenAi.h - OpenAI completions requests and responses -----*- C++ -*-===//
//
// The bodies of POST /v1/completions and /v1/chat/completions read into
// the engine's requests, and the response objects and stream chunks
// written back, as OpenAI's API (and vLLM's extensions of it) define them.
// Three kinds of field:
//  - implemented (sampling, penalties, stop rules, logprobs, echo, n, ...);
//  - unable to change the output (metadata, store, user, ...): accepted,
//    and named in ApiRequest::ignored so that the server logs each once;
//  - able to change the output but not implemented (a JSON schema for the
//    answer, a forced tool call, logit_bias, best_of > 1, ...): refused by
//    name (400), never ignored; so is any field we do not know.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_SERVE_OPENAI_H
#define MOE_SERVE_OPENAI_H

#include "moe/runtime/ChatTemplate.h"
#include "moe/runtime/Engine.h"
#include "moe/runtime/Tokenizer.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

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
  std::string name; ///< the model's id in requests and /v1/models
  const rt::Tokenizer *tokenizer = nullptr;
  const rt::ChatTemplate *chatTemplate = nullptr; ///< null: no /v1/chat/completions
  std::string bosToken, eosToken;
  std::string chatTemplateText; ///< as given (GET /tokenizer_info)
  /// The model's end-of-sequence tokens, whose text an answer leaves out.
  std::vector<int32_t> eosTokens;
  int64_t vocabSize = 0;
  int64_t maxContext = 0;
  int64_t maxPromptTokens = 0; ///< --max-prompt-tokens
};

/// The most prompts times n one request may ask for: each is a sequence
/// in the engine.
inline constexpr int64_t kMaxChoices = 64;

struct ApiRequest {
  bool chat = false;
  bool stream = false;
  bool includeUsage = false; ///< stream_options.include_usage
  /// completions: the prompt's text (and logprobs) before the answer's.
  bool echo = false;
  /// Logprobs of each token with this many alternatives (completions:
  /// `logprobs`; chat: `top_logprobs` when `logprobs` is true); unset: none.
  std::optional<int32_t> logprobs;
  int64_t n = 1;
  /// One engine request per prompt, with the first choice's seed: choice
  /// p * n + i is prompt p sampled with seed + i (choices()).
  std::vector<rt::GenerationRequest> prompts;
  /// The text of each prompt, for echo.
  std::vector<std::string> promptTexts;
  /// Fields accepted although they cannot change the answer.
  std::vector<std::string> ignored;
};

/// A request body that must be a JSON object nesting at most
/// rt::kMaxJsonDepth deep; deeper containers are never built.
std::optional<ApiError> parseJsonBody(const std::string &text, nlohmann::ordered_json &body);

/// The body of a completions (`chat` false) or chat completions request.
std::optional<ApiError> parseRequest(const std::string &body, bool chat, const ModelInfo &model,
                                     ApiRequest &out);

/// The engine requests of every choice, in choice order.
std::vector<rt::GenerationRequest> choices(const ApiRequest &r);

/// "stop" or "length" (OpenAI's names for why a completion ended).
const char *finishReason(rt::FinishReason reason);

nlohmann::ordered_json usageObject(int64_t promptTokens, int64_t completionTokens);

/// Logprobs in the two forms OpenAI gives them: completions' parallel
/// lists (tokens, token_logprobs, top_logprobs, text_offset) and chat's
/// `content` list. Token strings are each token decoded alone.
class LogprobsWriter {
public:
  LogprobsWriter(const rt::Tokenizer &tokenizer, bool chat);
  /// A position: its token, its logprob and its alternatives.
  void add(const rt::LogprobEntry &entry);
  /// An echoed prompt's first token, which has no logprob (completions).
  void addFirstPromptToken(int32_t token);
  /// The object for the positions added since the last take() (a stream
  /// chunk's, or the whole answer's).
  nlohmann::ordered_json take();
  bool empty() const;

private:
  std::string text(int32_t token) const;
  const rt::Tokenizer &tokenizer_;
  const bool chat_;
  nlohmann::ordered_json tokens_, logprobs_, tops_, offsets_, content_;
  int64_t offset_ = 0; ///< characters of the tokens so far (text_offset)
};

} // namespace moe::serve

#endif
