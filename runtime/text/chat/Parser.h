//===- Parser.h - tokens to the template tree --------------------*- C++ -*-===//
//
// jinja2's grammar and operator precedence for the supported statements and
// expressions; everything else is refused here, at parse time, by name.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_PARSER_H
#define MOE_RUNTIME_TEXT_CHAT_PARSER_H

#include "Ast.h"
#include "Lexer.h"

namespace moe::rt::chat {

/// Throws TemplateError.
Body parseTemplate(const std::vector<Token> &tokens);

} // namespace moe::rt::chat

#endif
