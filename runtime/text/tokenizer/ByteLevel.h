//===- ByteLevel.h - GPT-2's byte <-> printable character map ---*- C++ -*-===//
//
// Byte-level BPE vocabularies spell every byte as a printable character
// (space is "Ġ", newline "Ċ"), so that merges never see raw control bytes.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_BYTELEVEL_H
#define MOE_RUNTIME_TEXT_TOKENIZER_BYTELEVEL_H

#include <optional>
#include <string>
#include <string_view>

namespace moe::rt::tok {

/// Each byte of `text` as its printable character.
std::string bytesToChars(std::string_view text);
/// The bytes spelled by `token`, or nothing if a character is not one of the
/// 256 (e.g. an added token's text).
std::optional<std::string> charsToBytes(std::string_view token);

} // namespace moe::rt::tok

#endif
