//===- Unicode.h - UTF-8 and character classes as Rust sees them -*- C++ -*-===//
//
// The `tokenizers` library is written in Rust; its whitespace, word and
// digit tests are Rust's char methods and regex classes. These helpers
// reproduce them with ICU so that splits land on the same characters.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_UNICODE_H
#define MOE_RUNTIME_TEXT_TOKENIZER_UNICODE_H

#include "runtime/text/AppendUtf8.h"
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace moe::rt::tok {

/// Length of the UTF-8 character starting at s[i] (valid UTF-8 assumed).
size_t utf8Length(std::string_view s, size_t i);
/// The code point starting at s[i] (valid UTF-8 assumed); advances i.
char32_t nextCodePoint(std::string_view s, size_t &i);
using text::appendUtf8;
/// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes one
/// U+FFFD.
std::string utf8Lossy(std::string_view bytes);
bool isValidUtf8(std::string_view bytes);

/// char::is_whitespace (the White_Space property).
bool isWhitespace(char32_t c);
/// char::is_numeric (general categories Nd, Nl, No).
bool isNumeric(char32_t c);
/// Rust regex `\w`: Alphabetic, marks, Nd, Pc, Join_Control.
bool isWordChar(char32_t c);
/// ASCII punctuation or a Unicode P* category (the Punctuation pre-tokenizer).
bool isPunctuation(char32_t c);

/// Unicode normalization forms through ICU's Normalizer2.
enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalize(std::string_view s, NormalForm form);
/// Rust's char::to_lowercase applied to each character (full mappings, no
/// context: Σ is always σ).
std::string lowercase(std::string_view s);

} // namespace moe::rt::tok

#endif
