//===- Error.h - a template error at a source offset -------------*- C++ -*-===//
//
// The lexer, parser and evaluator throw TemplateError; ChatTemplate catches it
// at the API boundary and turns it into a Status. Every expression can fail
// (an undefined attribute, a type mismatch), so exceptions keep the tree
// walker readable; none escapes ChatTemplate.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_ERROR_H
#define MOE_RUNTIME_TEXT_CHAT_ERROR_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace moe::rt::chat {

/// The offset of an error raised where no source position is known, such as
/// a comparison of two values nested too deep; the evaluator gives it the
/// position of the expression it was evaluating.
inline constexpr size_t kUnlocated = SIZE_MAX;

struct TemplateError {
  size_t offset;       ///< Byte offset into the (newline-normalised) source, or kUnlocated.
  std::string message; ///< One line, without the "chat template L:C:" prefix.
  /// raise_exception(): the message is the template's own and is reported
  /// as is, without a location, as transformers reports it.
  bool raised = false;
};

[[noreturn]] inline void fail(size_t offset, std::string message) {
  throw TemplateError{offset, std::move(message)};
}

} // namespace moe::rt::chat

#endif
