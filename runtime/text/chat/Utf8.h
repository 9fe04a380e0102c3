//===- Utf8.h - code points for Python's str semantics -----------*- C++ -*-===//
//
// Python strings index, slice, measure and strip by code point; templates do
// all of these to message content. Strings stay UTF-8 and are decoded only by
// the operations that need code points.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_UTF8_H
#define MOE_RUNTIME_TEXT_CHAT_UTF8_H

#include "runtime/text/AppendUtf8.h"
#include <string>
#include <string_view>

namespace moe::rt::chat {

std::u32string decodeUtf8(std::string_view s);
std::string encodeUtf8(std::u32string_view s);
using text::appendUtf8;
/// Code points in `s` (invalid bytes count one each).
size_t codePointCount(std::string_view s);
/// Python's str.isspace() for one code point.
bool isPySpace(char32_t c);
/// Python's str.isprintable() for one code point, except that unassigned
/// code points count as printable (no Unicode database here).
bool isPyPrintable(char32_t c);
/// True when the code point may change under Unicode case mapping but is not
/// ASCII: the case filters refuse such text rather than get it wrong.
bool hasNonAsciiCase(char32_t c);

} // namespace moe::rt::chat

#endif
