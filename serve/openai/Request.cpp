//===- Request.cpp - OpenAI completions requests into engine requests -----===//
#include "moe/serve/OpenAi.h"

#include "moe/runtime/JsonDepth.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

namespace moe::serve {
namespace {

using json = nlohmann::ordered_json;

ApiError invalid(const std::string &param, const std::string &message) {
  return ApiError{400, message, "invalid_request_error", param, ""};
}

ApiError unsupported(const std::string &param, const std::string &what) {
  return invalid(param, "\"" + param + "\"" + what + " is not supported by moe-serve");
}

enum class Field {
  Read,     ///< implemented
  Ignored,  ///< cannot change the answer: accepted, logged once
  Refused,  ///< would change it: refused unless its value is neutral()
};

/// Every field either endpoint knows; anything else is an unknown field.
/// `chat` and `completion` say which endpoint reads it.
struct Known {
  Field kind;
  bool completion, chat;
};

const std::map<std::string, Known> kFields = {
    {"model", {Field::Read, true, true}},
    {"prompt", {Field::Read, true, false}},
    {"messages", {Field::Read, false, true}},
    {"max_tokens", {Field::Read, true, true}},
    {"max_completion_tokens", {Field::Read, false, true}},
    {"temperature", {Field::Read, true, true}},
    {"top_p", {Field::Read, true, true}},
    {"top_k", {Field::Read, true, true}},
    {"min_p", {Field::Read, true, true}},
    {"seed", {Field::Read, true, true}},
    {"stop", {Field::Read, true, true}},
    {"stop_token_ids", {Field::Read, true, true}},
    {"min_tokens", {Field::Read, true, true}},
    {"include_stop_str_in_output", {Field::Read, true, true}},
    {"ignore_eos", {Field::Read, true, true}},
    {"presence_penalty", {Field::Read, true, true}},
    {"frequency_penalty", {Field::Read, true, true}},
    {"repetition_penalty", {Field::Read, true, true}},
    {"stream", {Field::Read, true, true}},
    {"stream_options", {Field::Read, true, true}},
    {"n", {Field::Read, true, true}},
    {"logprobs", {Field::Read, true, true}},
    {"top_logprobs", {Field::Read, false, true}},
    {"echo", {Field::Read, true, false}},
    {"tools", {Field::Read, false, true}},
    {"tool_choice", {Field::Read, false, true}},
    {"chat_template_kwargs", {Field::Read, false, true}},
    {"response_format", {Field::Read, true, true}},
    {"user", {Field::Ignored, true, true}},
    {"metadata", {Field::Ignored, true, true}},
    {"store", {Field::Ignored, true, true}},
    {"service_tier", {Field::Ignored, true, true}},
    {"reasoning_effort", {Field::Ignored, false, true}},
    {"parallel_tool_calls", {Field::Ignored, false, true}},
    {"suffix", {Field::Refused, true, false}},
    {"best_of", {Field::Refused, true, false}},
    {"logit_bias", {Field::Refused, true, true}},
    {"function_call", {Field::Refused, false, true}},
    {"functions", {Field::Refused, false, true}},
};

/// A refused field's value that asks for nothing.
bool neutral(const std::string &key, const json &v) {
  if (v.is_null())
    return true;
  if (key == "best_of")
    return v.is_number_integer() && v.get<int64_t>() == 1;
  if (key == "logit_bias")
    return v.is_object() && v.empty();
  if (key == "suffix")
    return v.is_string() && v.get<std::string>().empty();
  return false;
}

template <typename T>
std::optional<ApiError> number(const json &body, const char *key, double lo, double hi, T &out,
                               bool openLow = false) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number())
    return invalid(key, std::string("\"") + key + "\" must be a number");
  double v = it->get<double>();
  if (!(v >= lo && v <= hi) || (openLow && v == lo)) {
    char range[64];
    std::snprintf(range, sizeof range, "%s%g, %g]", openLow ? "(" : "[", lo, hi);
    return invalid(key, std::string("\"") + key + "\" must lie in " + range + ", got " +
                            it->dump());
  }
  out = T(v);
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

std::optional<ApiError> boolean(const json &body, const char *key, bool &out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_boolean())
    return invalid(key, std::string("\"") + key + "\" must be true or false");
  out = it->get<bool>();
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

std::optional<ApiError> renderChat(const json &body, const ModelInfo &model,
                                   std::string &prompt) {
  if (!model.chatTemplate)
    return ApiError{400, "this model has no chat template (its checkpoint's "
                         "tokenizer_config.json had none, and moe-serve was given no "
                         "--chat-template); use /v1/completions",
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

std::optional<ApiError> tokenIds(const json &list, const ModelInfo &model,
                                 std::vector<int32_t> &ids) {
  for (const json &t : list) {
    int64_t id = t.get<int64_t>();
    if (id < 0 || id >= model.vocabSize)
      return invalid("prompt", "token id " + t.dump() + " is outside the vocabulary [0, " +
                                   std::to_string(model.vocabSize) + ")");
    ids.push_back(int32_t(id));
  }
  return std::nullopt;
}

/// `prompt`: a string, a list of strings, token ids, or lists of token ids.
std::optional<ApiError> readPrompts(const json &body, const ModelInfo &model,
                                    std::vector<std::vector<int32_t>> &prompts,
                                    std::vector<std::string> &texts) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null())
    return invalid("prompt", "\"prompt\" is required");
  auto integers = [](const json &l) {
    return l.is_array() && !l.empty() &&
           std::all_of(l.begin(), l.end(), [](const json &t) { return t.is_number_integer(); });
  };
  std::vector<const json *> items;
  if (it->is_string() || integers(*it))
    items.push_back(&*it);
  else if (it->is_array() && !it->empty())
    for (const json &p : *it)
      items.push_back(&p);
  if (items.empty())
    return invalid("prompt", "\"prompt\" must be a string, a list of strings, a list of token "
                             "ids, or a list of lists of token ids");
  for (const json *p : items) {
    std::vector<int32_t> ids;
    if (p->is_string()) {
      ids = model.tokenizer->encode(p->get<std::string>(), /*addSpecial=*/true);
      texts.push_back(p->get<std::string>());
    } else if (integers(*p)) {
      if (auto e = tokenIds(*p, model, ids))
        return e;
      texts.push_back(model.tokenizer->decode(ids));
    } else {
      return invalid("prompt", "each prompt must be a string or a non-empty list of token ids");
    }
    prompts.push_back(std::move(ids));
  }
  return std::nullopt;
}

std::optional<ApiError> readStop(const json &body, rt::StopOptions &stop) {
  auto it = body.find("stop");
  if (it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      stop.strings.push_back(it->get<std::string>());
    } else if (it->is_array() && it->size() <= 16 &&
               std::all_of(it->begin(), it->end(), [](const json &s) { return s.is_string(); })) {
      stop.strings = it->get<std::vector<std::string>>();
    } else {
      return invalid("stop", "\"stop\" must be a string or a list of at most 16 strings");
    }
    for (const std::string &s : stop.strings)
      if (s.empty())
        return invalid("stop", "a stop string must not be empty");
  }
  return std::nullopt;
}

std::optional<ApiError> readStopTokens(const json &body, const ModelInfo &model,
                                       rt::StopOptions &stop) {
  auto it = body.find("stop_token_ids");
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_array() || it->size() > 1024)
    return invalid("stop_token_ids", "\"stop_token_ids\" must be a list of token ids");
  for (const json &t : *it) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.vocabSize)
      return invalid("stop_token_ids", "stop token id " + t.dump() +
                                           " is not a token id of the vocabulary [0, " +
                                           std::to_string(model.vocabSize) + ")");
    stop.stopTokenIds.push_back(int32_t(t.get<int64_t>()));
  }
  return std::nullopt;
}

/// logprobs / top_logprobs / echo.
std::optional<ApiError> readLogprobs(const json &body, bool chat, ApiRequest &out) {
  std::optional<int64_t> top;
  if (chat) {
    bool want = false;
    if (auto e = boolean(body, "logprobs", want))
      return e;
    if (auto e = integer(body, "top_logprobs", 0, rt::kMaxTopLogprobs, top))
      return e;
    if (top && !want)
      return invalid("top_logprobs", "\"top_logprobs\" needs \"logprobs\": true");
    if (want)
      out.logprobs = int32_t(top.value_or(0));
    return std::nullopt;
  }
  if (auto it = body.find("logprobs"); it != body.end() && it->is_boolean())
    return invalid("logprobs", "\"logprobs\" of a completion is the number of alternatives "
                               "(an integer in [0, 20]); true/false is the chat form");
  if (auto e = integer(body, "logprobs", 0, rt::kMaxTopLogprobs, top))
    return e;
  if (top)
    out.logprobs = int32_t(*top);
  return boolean(body, "echo", out.echo);
}

std::optional<ApiError> readFormat(const json &body) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (it->is_object() && it->value("type", json()) == "text" && it->size() == 1)
    return std::nullopt;
  return unsupported("response_format", " other than {\"type\": \"text\"} (JSON modes and "
                                        "schemas constrain the answer)");
}

std::optional<ApiError> readToolChoice(const json &body) {
  auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null() || *it == "auto" || *it == "none")
    return std::nullopt;
  return unsupported("tool_choice", " forcing a tool call (\"required\" or a named function)");
}

/// The engine's sampling and stopping options, common to every prompt.
std::optional<ApiError> readSampling(const json &body, const ModelInfo &model,
                                     rt::GenerationRequest &g, std::optional<uint64_t> &seed) {
  g.sampling.temperature = 1.0f; // OpenAI's default
  std::optional<int64_t> topK, seedValue, minTokens;
  for (auto e : {number(body, "temperature", 0, 2, g.sampling.temperature),
                 number(body, "top_p", 0, 1, g.sampling.topP, /*openLow=*/true),
                 integer(body, "top_k", -1, INT32_MAX, topK),
                 number(body, "min_p", 0, 1, g.sampling.minP),
                 integer(body, "seed", INT64_MIN, INT64_MAX, seedValue),
                 number(body, "presence_penalty", -2, 2, g.sampling.presencePenalty),
                 number(body, "frequency_penalty", -2, 2, g.sampling.frequencyPenalty),
                 number(body, "repetition_penalty", 0, 10, g.sampling.repetitionPenalty,
                        /*openLow=*/true),
                 integer(body, "min_tokens", 0, INT32_MAX, minTokens),
                 boolean(body, "ignore_eos", g.stop.ignoreEos),
                 boolean(body, "include_stop_str_in_output", g.stop.includeStopString),
                 readStop(body, g.stop), readStopTokens(body, model, g.stop)})
    if (e)
      return e;
  g.sampling.topK = topK && *topK > 0 ? int32_t(*topK) : 0;
  g.stop.minTokens = minTokens.value_or(0);
  if (seedValue)
    seed = uint64_t(*seedValue);
  return std::nullopt;
}

ApiError contextError(const std::string &param, const std::string &message) {
  return ApiError{400, message, "invalid_request_error", param, "context_length_exceeded"};
}

} // namespace

std::optional<ApiError> parseJsonBody(const std::string &text, json &body) {
  // Containers deeper than the limit are never built: the parser is told
  // to drop them as they start. Building them would already recurse:
  // ordered_json copies an object's earlier members, recursively, each
  // time it grows (a const key makes the pair's move a copy).
  bool tooDeep = false;
  auto bound = [&](int depth, json::parse_event_t event, json &) {
    if ((event == json::parse_event_t::object_start ||
         event == json::parse_event_t::array_start) &&
        depth >= rt::kMaxJsonDepth)
      tooDeep = true;
    return !tooDeep;
  };
  body = json::parse(text, bound, /*allow_exceptions=*/false);
  if (tooDeep)
    return invalid("", "the body nests more than " + std::to_string(rt::kMaxJsonDepth) +
                           " arrays and objects deep");
  if (body.is_discarded())
    return invalid("", "the body is not valid JSON");
  if (!body.is_object())
    return invalid("", "the body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> parseRequest(const std::string &text, bool chat, const ModelInfo &model,
                                     ApiRequest &out) {
  json body;
  if (auto e = parseJsonBody(text, body))
    return e;
  out.chat = chat;
  for (auto &[key, value] : body.items()) {
    auto known = kFields.find(key);
    if (known == kFields.end() || !(chat ? known->second.chat : known->second.completion))
      return invalid(key, "unknown field \"" + key + "\"");
    if (known->second.kind == Field::Ignored && !value.is_null())
      out.ignored.push_back(key);
    if (known->second.kind == Field::Refused && !neutral(key, value))
      return unsupported(key, "");
  }
  auto m = body.find("model");
  if (m == body.end() || !m->is_string())
    return invalid("model", "\"model\" must name the model (GET /v1/models lists it)");
  if (m->get<std::string>() != model.name)
    return ApiError{404, "the model \"" + m->get<std::string>() + "\" does not exist; this "
                         "server serves \"" + model.name + "\"",
                    "invalid_request_error", "model", "model_not_found"};

  rt::GenerationRequest g;
  std::optional<uint64_t> seed;
  std::optional<int64_t> n, maxTokens, maxCompletion;
  for (auto e : {readSampling(body, model, g, seed), readLogprobs(body, chat, out),
                 readFormat(body), chat ? readToolChoice(body) : std::nullopt,
                 integer(body, "n", 1, kMaxChoices, n),
                 integer(body, "max_tokens", 0, INT32_MAX, maxTokens),
                 integer(body, "max_completion_tokens", 0, INT32_MAX, maxCompletion),
                 boolean(body, "stream", out.stream)})
    if (e)
      return e;
  out.n = n.value_or(1);
  g.logprobs = out.logprobs;
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!so->is_object() || so->size() != size_t(so->contains("include_usage")) ||
        (so->contains("include_usage") && !(*so)["include_usage"].is_boolean()))
      return invalid("stream_options", "\"stream_options\" must be {\"include_usage\": bool}");
    if (!out.stream)
      return invalid("stream_options", "\"stream_options\" needs \"stream\": true");
    out.includeUsage = so->value("include_usage", false);
  }

  std::vector<std::vector<int32_t>> prompts;
  if (chat) {
    std::string prompt;
    if (auto e = renderChat(body, model, prompt))
      return e;
    prompts.push_back(model.tokenizer->encode(prompt, /*addSpecial=*/false));
    out.promptTexts.push_back(prompt);
  } else if (auto e = readPrompts(body, model, prompts, out.promptTexts)) {
    return e;
  }
  if (int64_t(prompts.size()) * out.n > kMaxChoices)
    return invalid("n", std::to_string(prompts.size()) + " prompts times n = " +
                            std::to_string(out.n) + " make " +
                            std::to_string(int64_t(prompts.size()) * out.n) +
                            " choices; at most " + std::to_string(kMaxChoices) +
                            " a request");

  const char *promptParam = chat ? "messages" : "prompt";
  std::optional<int64_t> limit = chat && maxCompletion ? maxCompletion : maxTokens;
  if (limit && *limit == 0 && !(out.echo && out.logprobs))
    return invalid(chat && maxCompletion ? "max_completion_tokens" : "max_tokens",
                   "0 new tokens only scores the prompt: it needs \"echo\": true and "
                   "\"logprobs\"");
  // Without a seed, one is drawn; choices take seed + i either way.
  const uint64_t base = seed ? *seed : std::random_device()() * 0x100000000ull + std::random_device()();
  for (std::vector<int32_t> &ids : prompts) {
    const int64_t length = int64_t(ids.size());
    if (length == 0)
      return invalid(promptParam, "the prompt encodes to no tokens");
    if (length > model.maxPromptTokens)
      return contextError(promptParam, "the prompt has " + std::to_string(length) +
                                           " tokens; this server takes at most " +
                                           std::to_string(model.maxPromptTokens));
    const int64_t room = model.maxContext - length;
    rt::GenerationRequest r = g;
    r.prompt = std::move(ids);
    r.sampling.seed = base;
    if (out.echo && out.logprobs)
      r.promptLogprobs = out.logprobs;
    // OpenAI's defaults (16 new tokens for a completion, the rest of the
    // context for a chat), cut to what the context leaves.
    r.maxNewTokens = limit ? *limit : std::min<int64_t>(chat ? room : 16, room);
    if (limit && *limit > room)
      return contextError(chat && maxCompletion ? "max_completion_tokens" : "max_tokens",
                          "the prompt (" + std::to_string(length) + " tokens) and " +
                              std::to_string(*limit) + " new tokens exceed the model's "
                              "context of " + std::to_string(model.maxContext) + " tokens");
    if (r.maxNewTokens < 1 && !(limit && *limit == 0))
      return contextError(promptParam, "the prompt (" + std::to_string(length) +
                                           " tokens) fills the model's context of " +
                                           std::to_string(model.maxContext) + " tokens");
    if (r.stop.minTokens > r.maxNewTokens)
      return invalid("min_tokens", "\"min_tokens\" (" + std::to_string(r.stop.minTokens) +
                                       ") exceeds the most new tokens (" +
                                       std::to_string(r.maxNewTokens) + ")");
    out.prompts.push_back(std::move(r));
  }
  return std::nullopt;
}

std::vector<rt::GenerationRequest> choices(const ApiRequest &r) {
  std::vector<rt::GenerationRequest> all;
  for (const rt::GenerationRequest &p : r.prompts)
    for (int64_t i = 0; i < r.n; ++i) {
      all.push_back(p);
      all.back().sampling.seed = p.sampling.seed + uint64_t(i);
    }
  return all;
}

json ApiError::body() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}}}};
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

} // namespace moe::serve
