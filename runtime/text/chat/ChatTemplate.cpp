//===- ChatTemplate.cpp - parse and render chat templates ----------------===//
#include "moe/runtime/ChatTemplate.h"

#include "moe/runtime/JsonDepth.h"

#include "Ast.h"
#include "Error.h"
#include "Evaluate.h"
#include "Json.h"
#include "Lexer.h"
#include "Parser.h"
#include "Utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace moe::rt {

namespace {

/// "chat template L:C: message", the column counted in characters.
Status located(const std::string &source, const chat::TemplateError &e) {
  if (e.raised)
    return Status::error(e.message);
  if (e.offset == chat::kUnlocated)
    return Status::error("chat template: " + e.message);
  size_t offset = std::min(e.offset, source.size());
  size_t line = 1, lineStart = 0;
  for (size_t i = 0; i < offset; ++i)
    if (source[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  size_t column = chat::codePointCount(std::string_view(source).substr(lineStart, offset - lineStart)) + 1;
  return Status::error("chat template " + std::to_string(line) + ":" + std::to_string(column) + ": " + e.message);
}

const char *const reasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

/// apply_chat_template's message normalisation: null-valued keys are
/// dropped, then the first reasoning field found becomes
/// {"thinking": r, **message, "reasoning_content": r} as Python builds it.
nlohmann::ordered_json normaliseMessage(const nlohmann::ordered_json &message) {
  if (!message.is_object())
    return message;
  nlohmann::ordered_json kept = nlohmann::ordered_json::object();
  for (const auto &[k, v] : message.items())
    if (!v.is_null())
      kept[k] = v;
  const nlohmann::ordered_json *reasoning = nullptr;
  for (const char *field : reasoningFields)
    if (kept.contains(field)) {
      reasoning = &kept[field];
      break;
    }
  if (!reasoning)
    return kept;
  nlohmann::ordered_json value = *reasoning;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["thinking"] = value;
  for (const auto &[k, v] : kept.items())
    out[k] = v;
  out["reasoning_content"] = value;
  return out;
}

/// The context is an object that nests at most kMaxJsonDepth arrays and
/// objects, itself included. Checked before anything copies or converts
/// it: both recurse.
template <class Json> Status checkContext(const Json &context) {
  if (!context.is_object())
    return Status::error(std::string("chat template context must be a JSON object, not ") + context.type_name());
  if (std::optional<std::string> key = memberNestedTooDeep(context))
    return Status::error("chat template context: \"" + *key + "\" nests deeper than the limit of " +
                         std::to_string(kMaxJsonDepth) + " arrays and objects (the context's own included)");
  return Status::ok();
}

} // namespace

Expected<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  auto parsed = std::make_shared<chat::Template>();
  parsed->source = chat::normaliseSource(source);
  try {
    parsed->body = chat::parseTemplate(chat::tokenize(parsed->source));
  } catch (const chat::TemplateError &e) {
    return located(parsed->source, e);
  }
  return ChatTemplate(std::move(parsed));
}

Expected<std::string> ChatTemplate::render(const nlohmann::json &context) const {
  if (Status valid = checkContext(context); !valid)
    return valid;
  return render(nlohmann::ordered_json(context));
}

Expected<std::string> ChatTemplate::render(const nlohmann::ordered_json &context) const {
  if (Status valid = checkContext(context); !valid)
    return valid;
  try {
    chat::Dict variables;
    for (const auto &[k, v] : context.items()) {
      if (k == "messages" && v.is_array()) {
        nlohmann::ordered_json messages = nlohmann::ordered_json::array();
        for (const auto &m : v)
          messages.push_back(normaliseMessage(m));
        variables.entries.emplace_back(chat::Value(k), chat::fromJson(messages));
      } else {
        variables.entries.emplace_back(chat::Value(k), chat::fromJson(v));
      }
    }
    return chat::renderTemplate(parsed_->body, variables);
  } catch (const chat::TemplateError &e) {
    return located(parsed_->source, e);
  }
}

} // namespace moe::rt
