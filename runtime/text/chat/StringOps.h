//===- StringOps.h - Python str operations ----------------------*- C++ -*-===//
//
// The str methods and the jinja2 string filters share these (trim is strip,
// the case filters are the case methods), so both behave as Python does.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_STRINGOPS_H
#define MOE_RUNTIME_TEXT_CHAT_STRINGOPS_H

#include "Value.h"

#include <string>

namespace moe::rt::chat {

enum class StripSide { Both, Left, Right };
/// str.strip([chars]): `chars` None/Undefined strips whitespace.
std::string pyStrip(const std::string &s, const Value &chars, StripSide side, size_t offset);
/// str.split(sep=None, maxsplit=-1), or rsplit when `fromRight`.
List pySplit(const std::string &s, const Value &sep, int64_t maxsplit, bool fromRight, size_t offset);
/// str.replace(old, new, count=-1); fails past kMaxTextBytes.
std::string pyReplace(const std::string &s, const std::string &from, const std::string &to, int64_t count,
                      size_t offset);
/// Case mapping; text with non-ASCII cased letters is refused (`what` names the caller).
std::string pyUpper(const std::string &s, const char *what, size_t offset);
std::string pyLower(const std::string &s, const char *what, size_t offset);
/// str.title(): a letter after a non-letter is upper-cased, others lowered.
std::string pyTitle(const std::string &s, const char *what, size_t offset);
/// str.capitalize(): the first character upper-cased, the rest lowered.
std::string pyCapitalize(const std::string &s, const char *what, size_t offset);

} // namespace moe::rt::chat

#endif
