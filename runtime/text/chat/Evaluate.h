//===- Evaluate.h - render a parsed template --------------------*- C++ -*-===//
//
// Walks the tree with jinja2's scoping: a for loop's body and a macro's body
// get a fresh frame per iteration or call (assignments there do not leak
// out), `if` does not; `namespace()` objects are shared by reference.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_EVALUATE_H
#define MOE_RUNTIME_TEXT_CHAT_EVALUATE_H

#include "Ast.h"

namespace moe::rt::chat {

/// Renders `body` with `variables` (names to values) over the globals
/// transformers defines. Throws TemplateError.
std::string renderTemplate(const Body &body, const Dict &variables);

} // namespace moe::rt::chat

#endif
