//===- OpenAi.cpp - OpenAI completions requests and responses -------------===//
#include "tools/moe-serve/OpenAi.h"

#include <random>
#include <set>

namespace moe::serve {
namespace {

using json = nlohmann::ordered_json;

ApiError invalid(const std::string &param, const std::string &message) {
  return ApiError{400, message, "invalid_request_error", param, ""};
}

/// Fields either endpoint reads. Others that OpenAI defines are refused by
/// name (kUnsupported); anything else is an unknown field.
const std::set<std::string> kCommon = {"model",       "max_tokens", "temperature", "top_p",
                                       "top_k",       "seed",       "stop",        "stream",
                                       "stream_options", "n",       "user",        "ignore_eos"};
const std::set<std::string> kCompletion = {"prompt"};
const std::set<std::string> kChat = {"messages", "max_completion_tokens", "tools",
                                     "chat_template_kwargs"};
/// OpenAI fields with a value that changes nothing are accepted at it.
const std::set<std::string> kUnsupported = {
    "logprobs",   "top_logprobs", "echo",         "suffix",          "best_of",
    "logit_bias", "tool_choice",  "response_format", "parallel_tool_calls",
    "presence_penalty", "frequency_penalty", "function_call", "functions"};

bool neutral(const std::string &key, const json &v) {
  if (v.is_null())
    return true;
  if (key == "presence_penalty" || key == "frequency_penalty")
    return v.is_number() && v.get<double>() == 0.0;
  if (key == "logprobs" || key == "echo")
    return v.is_boolean() && !v.get<bool>();
  if (key == "best_of")
    return v.is_number_integer() && v.get<int64_t>() == 1;
  if (key == "logit_bias")
    return v.is_object() && v.empty();
  return false;
}

std::optional<ApiError> number(const json &body, const char *key, double lo, double hi,
                               float &out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number())
    return invalid(key, std::string("\"") + key + "\" must be a number");
  double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return invalid(key, std::string("\"") + key + "\" must lie in [" + std::to_string(lo) +
                            ", " + std::to_string(hi) + "], got " + it->dump());
  out = float(v);
  return std::nullopt;
}

std::optional<ApiError> integer(const json &body, const char *key, int64_t lo, int64_t hi,
                                std::optional<int64_t> &out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number_integer())
    return invalid(key, std::string("\"") + key + "\" must be an integer");
  int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX)
                  ? INT64_MAX
                  : it->get<int64_t>();
  if (v < lo || v > hi)
    return invalid(key, std::string("\"") + key + "\" must lie in [" + std::to_string(lo) +
                            ", " + std::to_string(hi) + "], got " + it->dump());
  out = v;
  return std::nullopt;
}

/// A message's content: a string, or a list of text parts (joined, as
/// vLLM does); other parts (images, audio) are refused.
std::optional<ApiError> flattenContent(json &message, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  auto it = message.find("content");
  if (it == message.end() || it->is_null() || it->is_string())
    return std::nullopt;
  if (!it->is_array())
    return invalid("messages", where + " must be a string or a list of text parts");
  std::string text;
  for (const json &part : *it) {
    if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
        !part["text"].is_string())
      return invalid("messages", where + ": only {\"type\": \"text\", \"text\": ...} parts "
                                         "are supported");
    text += part["text"].get<std::string>();
  }
  *it = text;
  return std::nullopt;
}

std::optional<ApiError> renderChat(json &body, const ModelInfo &model, std::string &prompt) {
  if (!model.chatTemplate)
    return ApiError{400, "this model has no chat template (its checkpoint's "
                         "tokenizer_config.json had none); use /v1/completions",
                    "invalid_request_error", "messages", ""};
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    return invalid("messages", "\"messages\" must be a non-empty list");
  json messages = *it;
  for (size_t i = 0; i < messages.size(); ++i) {
    json &m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      return invalid("messages", "messages[" + std::to_string(i) +
                                     "] must be an object with a string \"role\"");
    if (auto e = flattenContent(m, i))
      return e;
  }
  json context = json::object();
  if (auto kw = body.find("chat_template_kwargs"); kw != body.end() && !kw->is_null()) {
    if (!kw->is_object())
      return invalid("chat_template_kwargs", "\"chat_template_kwargs\" must be an object");
    context = *kw;
  }
  context["messages"] = messages;
  context["add_generation_prompt"] = true;
  context["bos_token"] = model.bosToken;
  context["eos_token"] = model.eosToken;
  // As apply_chat_template: tools and documents are none when not given.
  context["tools"] = nullptr;
  context["documents"] = nullptr;
  if (auto tools = body.find("tools"); tools != body.end() && !tools->is_null()) {
    if (!tools->is_array())
      return invalid("tools", "\"tools\" must be a list");
    context["tools"] = *tools;
  }
  auto text = model.chatTemplate->render(context);
  if (!text)
    return invalid("messages", "the chat template: " + text.status().message());
  prompt = *text;
  return std::nullopt;
}

std::optional<ApiError> readPrompt(const json &body, const ModelInfo &model,
                                   std::vector<int32_t> &ids) {
  auto it = body.find("prompt");
  if (it == body.end())
    return invalid("prompt", "\"prompt\" is required");
  const json *p = &*it;
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string())
    p = &(*p)[0]; // a list of one prompt
  if (p->is_string()) {
    if (!model.tokenizer)
      return invalid("prompt", "this model has no tokenizer; send token ids as \"prompt\"");
    ids = model.tokenizer->encode(p->get<std::string>(), /*addSpecial=*/true);
    return std::nullopt;
  }
  if (p->is_array() && !p->empty() &&
      std::all_of(p->begin(), p->end(), [](const json &t) { return t.is_number_integer(); })) {
    for (const json &t : *p) {
      int64_t id = t.get<int64_t>();
      if (id < 0 || id > INT32_MAX)
        return invalid("prompt", "token id " + t.dump() + " is out of range");
      ids.push_back(int32_t(id));
    }
    return std::nullopt;
  }
  if (p->is_array() && !p->empty() && (*p)[0].is_string())
    return invalid("prompt", "one prompt per request (n = 1); send the others separately");
  return invalid("prompt", "\"prompt\" must be a string or a non-empty list of token ids");
}

std::optional<ApiError> readStop(const json &body, rt::StopOptions &stop) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (it->is_string()) {
    stop.strings.push_back(it->get<std::string>());
  } else if (it->is_array() && it->size() <= 4 &&
             std::all_of(it->begin(), it->end(), [](const json &s) { return s.is_string(); })) {
    stop.strings = it->get<std::vector<std::string>>();
  } else {
    return invalid("stop", "\"stop\" must be a string or a list of at most 4 strings");
  }
  for (const std::string &s : stop.strings)
    if (s.empty())
      return invalid("stop", "a stop string must not be empty");
  return std::nullopt;
}

} // namespace

json ApiError::body() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}}}};
}

std::optional<ApiError> parseRequest(const std::string &text, bool chat, const ModelInfo &model,
                                     ApiRequest &out) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded())
    return invalid("", "the body is not valid JSON");
  if (!body.is_object())
    return invalid("", "the body must be a JSON object");
  out.chat = chat;
  for (auto &[key, value] : body.items()) {
    if (kCommon.count(key) || (chat ? kChat : kCompletion).count(key))
      continue;
    if (kUnsupported.count(key)) {
      if (neutral(key, value))
        continue;
      return invalid(key, "\"" + key + "\" is not supported by moe-serve");
    }
    return invalid(key, "unknown field \"" + key + "\"");
  }
  auto m = body.find("model");
  if (m == body.end() || !m->is_string())
    return invalid("model", "\"model\" must name the model (GET /v1/models lists it)");
  if (m->get<std::string>() != model.name)
    return ApiError{404, "the model \"" + m->get<std::string>() + "\" does not exist; this "
                         "server serves \"" + model.name + "\"",
                    "invalid_request_error", "model", "model_not_found"};
  std::optional<int64_t> n, maxTokens, maxCompletion, topK, seed;
  rt::GenerationRequest &g = out.generation;
  g.sampling.temperature = 1.0f; // OpenAI's default
  if (auto e = integer(body, "n", 1, 1, n))
    return invalid("n", "only n = 1 is supported: send one request per completion");
  for (auto e : {integer(body, "max_tokens", 1, INT32_MAX, maxTokens),
                 integer(body, "max_completion_tokens", 1, INT32_MAX, maxCompletion),
                 integer(body, "top_k", -1, INT32_MAX, topK),
                 integer(body, "seed", INT64_MIN, INT64_MAX, seed),
                 number(body, "temperature", 0, 2, g.sampling.temperature),
                 number(body, "top_p", 0, 1, g.sampling.topP)})
    if (e)
      return e;
  if (body.contains("top_p") && !(g.sampling.topP > 0))
    return invalid("top_p", "\"top_p\" must be greater than 0");
  g.sampling.topK = topK && *topK > 0 ? int32_t(*topK) : 0;
  g.sampling.seed = seed ? uint64_t(*seed) : std::random_device()();
  for (const char *flag : {"stream", "ignore_eos"}) {
    auto it = body.find(flag);
    if (it != body.end() && !it->is_null() && !it->is_boolean())
      return invalid(flag, std::string("\"") + flag + "\" must be true or false");
  }
  out.stream = body.value("stream", json(false)).is_boolean() && body.value("stream", false);
  g.stop.ignoreEos = body.value("ignore_eos", json(false)).is_boolean() &&
                     body.value("ignore_eos", false);
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object() || (so->contains("include_usage") && !(*so)["include_usage"].is_boolean()))
      return invalid("stream_options", "\"stream_options\" must be {\"include_usage\": bool}");
    if (!out.stream)
      return invalid("stream_options", "\"stream_options\" needs \"stream\": true");
    out.includeUsage = so->value("include_usage", false);
  }
  if (auto e = readStop(body, g.stop))
    return e;
  if (chat) {
    std::string prompt;
    if (auto e = renderChat(body, model, prompt))
      return e;
    g.prompt = model.tokenizer->encode(prompt, /*addSpecial=*/false);
  } else if (auto e = readPrompt(body, model, g.prompt)) {
    return e;
  }
  const int64_t promptTokens = int64_t(g.prompt.size());
  if (promptTokens == 0)
    return invalid(chat ? "messages" : "prompt", "the prompt encodes to no tokens");
  if (promptTokens > model.maxPromptTokens)
    return ApiError{400, "the prompt has " + std::to_string(promptTokens) +
                             " tokens; this server takes at most " +
                             std::to_string(model.maxPromptTokens),
                    "invalid_request_error", chat ? "messages" : "prompt",
                    "context_length_exceeded"};
  std::optional<int64_t> limit = chat && maxCompletion ? maxCompletion : maxTokens;
  // OpenAI's defaults: 16 new tokens for a completion, the rest of the
  // context for a chat.
  g.maxNewTokens = limit ? *limit : chat ? model.maxContext - promptTokens : 16;
  if (promptTokens + g.maxNewTokens > model.maxContext)
    return ApiError{400, "the prompt (" + std::to_string(promptTokens) + " tokens) and " +
                             std::to_string(g.maxNewTokens) + " new tokens exceed the model's "
                             "context of " + std::to_string(model.maxContext) + " tokens",
                    "invalid_request_error", "max_tokens", "context_length_exceeded"};
  if (g.maxNewTokens < 1)
    return ApiError{400, "the prompt fills the model's context of " +
                             std::to_string(model.maxContext) + " tokens",
                    "invalid_request_error", "messages", "context_length_exceeded"};
  return std::nullopt;
}

const char *finishReason(rt::FinishReason reason) {
  return reason == rt::FinishReason::Length || reason == rt::FinishReason::Cancelled ? "length"
                                                                                      : "stop";
}

json usageObject(int64_t promptTokens, int64_t completionTokens) {
  return {{"prompt_tokens", promptTokens},
          {"completion_tokens", completionTokens},
          {"total_tokens", promptTokens + completionTokens}};
}

json responseObject(const ApiRequest &r, const std::string &id, int64_t created,
                    const std::string &model, const std::string &text, rt::FinishReason reason,
                    int64_t completionTokens) {
  json choice = {{"index", 0}, {"finish_reason", finishReason(reason)}};
  if (r.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice.update({{"text", text}, {"logprobs", nullptr}});
  return {{"id", id},
          {"object", r.chat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage", usageObject(int64_t(r.generation.prompt.size()), completionTokens)}};
}

json chunkObject(const ApiRequest &r, const std::string &id, int64_t created,
                 const std::string &model, const std::string &text,
                 std::optional<rt::FinishReason> reason, bool first) {
  json choice = {{"index", 0},
                 {"finish_reason", reason ? json(finishReason(*reason)) : json()}};
  if (r.chat) {
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!text.empty() || first)
      delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice.update({{"text", text}, {"logprobs", nullptr}});
  }
  return {{"id", id},
          {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

} // namespace moe::serve
