//===- Lexer.h - Jinja source to tokens --------------------------*- C++ -*-===//
//
// Splits a template into text and tag tokens, applying the whitespace rules
// transformers' environment uses: trim_blocks (drop the newline after a
// block or comment tag), lstrip_blocks (drop the indentation before one), `-`
// (strip all whitespace on that side) and `+` (keep it). The source is first
// normalised as jinja2 does: every newline becomes "\n" and one trailing
// newline is dropped.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_LEXER_H
#define MOE_RUNTIME_TEXT_CHAT_LEXER_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moe::rt::chat {

struct Token {
  enum class Kind { Text, PrintBegin, PrintEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };
  Kind kind;
  std::string text; ///< Text, name, decoded string literal or operator.
  size_t offset;    ///< Byte offset in the normalised source.
  int64_t intValue = 0;
  double floatValue = 0;
};

/// jinja2's newline normalisation (see the file comment).
std::string normaliseSource(std::string_view source);
/// Tokens of a normalised source; throws TemplateError.
std::vector<Token> tokenize(const std::string &source);

} // namespace moe::rt::chat

#endif
