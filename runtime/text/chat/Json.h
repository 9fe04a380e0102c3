//===- Json.h - JSON in and out of template values ---------------*- C++ -*-===//
//
// The render context arrives as JSON; the tojson filter writes JSON back.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_JSON_H
#define MOE_RUNTIME_TEXT_CHAT_JSON_H

#include "Value.h"

#include <nlohmann/json.hpp>

namespace moe::rt::chat {

/// The value Python's json.loads would give, keys in document order.
/// Throws TemplateError for integers beyond 64 bits. It recurses once per
/// level: the caller bounds `j` by kMaxJsonDepth first (ChatTemplate does).
Value fromJson(const nlohmann::ordered_json &j);
/// transformers' tojson: json.dumps(x, ensure_ascii, indent, separators, sort_keys).
/// Fails past kMaxValueDepth levels and kMaxTextBytes of output.
std::string toJson(const Value &v, const Value &indent, const Value &separators, bool sortKeys,
                   bool ensureAscii, size_t offset);

} // namespace moe::rt::chat

#endif
