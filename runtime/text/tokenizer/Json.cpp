//===- Json.cpp - typed field access for tokenizer.json -------------------===//
#include "Json.h"

#include "Unicode.h"

namespace moe::rt::tok {

Expected<char32_t> charField(const Json &object, const std::string &key, const std::string &where) {
  MOE_TOK_TRY(std::string s, field<std::string>(object, key, where));
  size_t i = 0;
  if (s.empty() || !isValidUtf8(s) || (nextCodePoint(s, i), i != s.size()))
    return jsonError(where, "field \"" + key + "\" must be one character, found \"" + s + "\"");
  i = 0;
  return nextCodePoint(s, i);
}

Expected<Pattern> patternField(const Json &object, const std::string &where) {
  MOE_TOK_TRY(const Json *pattern, member(object, "pattern", where));
  if (pattern->is_object() && pattern->size() == 1) {
    if (pattern->contains("String") && (*pattern)["String"].is_string())
      return Pattern::literal((*pattern)["String"].get<std::string>());
    if (pattern->contains("Regex") && (*pattern)["Regex"].is_string())
      return Pattern::regex((*pattern)["Regex"].get<std::string>(), where);
  }
  return jsonError(where, "field \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}, found " +
                              pattern->dump());
}

} // namespace moe::rt::tok
