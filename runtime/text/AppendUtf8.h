//===- AppendUtf8.h - one code point as UTF-8 -------------------*- C++ -*-===//
//
// Shared by the tokenizer and the chat templates (runtime/text/*), which
// otherwise read text by their own rules (Rust's and Python's).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_APPENDUTF8_H
#define MOE_RUNTIME_TEXT_APPENDUTF8_H

#include <string>

namespace moe::rt::text {

inline void appendUtf8(std::string &out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

} // namespace moe::rt::text

#endif
