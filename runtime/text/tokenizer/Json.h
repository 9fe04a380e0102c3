//===- Json.h - typed field access for tokenizer.json -----------*- C++ -*-===//
//
// nlohmann's get<T>() throws on a wrong type; these return an Expected with
// a message that names the component and the field instead.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_JSON_H
#define MOE_RUNTIME_TEXT_TOKENIZER_JSON_H

#include "Pattern.h"
#include "moe/abi/Status.h"

#include <nlohmann/json.hpp>

#include <string>

namespace moe::rt::tok {

using Json = nlohmann::json;

/// `MOE_TOK_TRY(T x, expr);` declares x from an Expected, or returns its error.
#define MOE_TOK_CONCAT2(a, b) a##b
#define MOE_TOK_CONCAT(a, b) MOE_TOK_CONCAT2(a, b)
#define MOE_TOK_TRY(decl, expr) MOE_TOK_TRY_IMPL(MOE_TOK_CONCAT(tryValue, __LINE__), decl, expr)
#define MOE_TOK_TRY_IMPL(tmp, decl, expr)                                                     \
  auto tmp = (expr);                                                                          \
  if (!tmp)                                                                                   \
    return tmp.status();                                                                      \
  decl = tmp.take()

inline Status jsonError(const std::string &where, const std::string &what) {
  return Status::error("tokenizer.json: " + where + ": " + what);
}

/// The field `key` of `object`, which must exist (no copy: vocabularies are
/// large).
inline Expected<const Json *> member(const Json &object, const std::string &key,
                                     const std::string &where) {
  if (!object.is_object())
    return jsonError(where, "expected an object, found " + std::string(object.type_name()));
  auto it = object.find(key);
  if (it == object.end())
    return jsonError(where, "field \"" + key + "\" is missing");
  return &*it;
}

/// The scalar field `key` of `object`, which must exist and have type T.
template <typename T>
Expected<T> field(const Json &object, const std::string &key, const std::string &where) {
  MOE_TOK_TRY(const Json *v, member(object, key, where));
  bool ok;
  if constexpr (std::is_same_v<T, bool>)
    ok = v->is_boolean();
  else if constexpr (std::is_same_v<T, std::string>)
    ok = v->is_string();
  else if constexpr (std::is_integral_v<T>)
    ok = v->is_number_integer();
  else
    ok = v->is_number();
  if (!ok)
    return jsonError(where, "field \"" + key + "\" has type " + v->type_name());
  return v->get<T>();
}

/// Like field(), but `fallback` when the key is missing or null.
template <typename T>
Expected<T> optionalField(const Json &object, const std::string &key, T fallback,
                          const std::string &where) {
  if (object.is_object()) {
    auto it = object.find(key);
    if (it == object.end() || it->is_null())
      return fallback;
  }
  return field<T>(object, key, where);
}

/// The "type" of a component, for dispatch.
inline Expected<std::string> typeOf(const Json &component, const std::string &what) {
  return field<std::string>(component, "type", what);
}

/// A one-character string field (Metaspace's replacement, Strip's content).
Expected<char32_t> charField(const Json &object, const std::string &key, const std::string &where);

/// The field "pattern": {"String": "..."} or {"Regex": "..."}.
Expected<Pattern> patternField(const Json &object, const std::string &where);

/// Everything not supported is refused by name.
inline Status unsupported(const std::string &what, const std::string &type,
                          const std::string &supported) {
  return Status::error("tokenizer.json: " + what + " type \"" + type +
                       "\" is not supported (supported: " + supported + ")");
}

} // namespace moe::rt::tok

#endif
