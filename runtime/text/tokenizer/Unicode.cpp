//===- Unicode.cpp - UTF-8 and character classes as Rust sees them --------===//
#include "Unicode.h"

#include <algorithm>

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

namespace moe::rt::tok {

size_t utf8Length(std::string_view s, size_t i) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  return std::min(n, s.size() - i);
}

char32_t nextCodePoint(std::string_view s, size_t &i) {
  size_t n = utf8Length(s, i);
  unsigned char b = static_cast<unsigned char>(s[i]);
  char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < n; ++k)
    c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return c;
}

// Length of the valid character at s[i], or 0 with `bad` set to the length of
// the maximal invalid subpart there (Unicode's recommended practice, which
// Rust follows).
static size_t validCharAt(std::string_view s, size_t i, size_t &bad) {
  auto at = [&](size_t k) -> int {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : -1;
  };
  auto cont = [&](size_t k) { return at(k) >= 0x80 && at(k) <= 0xBF; };
  int b = at(0);
  bad = 1;
  if (b < 0x80)
    return 1;
  size_t width = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
  if (width == 0)
    return 0;
  int lo = 0x80, hi = 0xBF;
  if (b == 0xE0)
    lo = 0xA0;
  else if (b == 0xED)
    hi = 0x9F;
  else if (b == 0xF0)
    lo = 0x90;
  else if (b == 0xF4)
    hi = 0x8F;
  if (at(1) < lo || at(1) > hi)
    return 0;
  for (size_t k = 2; k < width; ++k)
    if (!cont(k)) {
      bad = k;
      return 0;
    }
  return width;
}

std::string utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t bad = 0, n = validCharAt(bytes, i, bad);
    if (n) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

bool isValidUtf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    size_t bad = 0, n = validCharAt(bytes, i, bad);
    if (!n)
      return false;
    i += n;
  }
  return true;
}

bool isWhitespace(char32_t c) { return u_hasBinaryProperty(UChar32(c), UCHAR_WHITE_SPACE); }

bool isNumeric(char32_t c) { return (U_GET_GC_MASK(UChar32(c)) & U_GC_N_MASK) != 0; }

bool isWordChar(char32_t c) {
  return u_hasBinaryProperty(UChar32(c), UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(UChar32(c)) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(UChar32(c), UCHAR_JOIN_CONTROL);
}

bool isPunctuation(char32_t c) {
  bool asciiPunct = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
                    (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
  return asciiPunct || (U_GET_GC_MASK(UChar32(c)) & U_GC_P_MASK);
}

std::string normalize(std::string_view s, NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *n =
      form == NormalForm::NFC    ? icu::Normalizer2::getNFCInstance(status)
      : form == NormalForm::NFD  ? icu::Normalizer2::getNFDInstance(status)
      : form == NormalForm::NFKC ? icu::Normalizer2::getNFKCInstance(status)
                                 : icu::Normalizer2::getNFKDInstance(status);
  icu::UnicodeString in = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), int32_t(s.size())));
  icu::UnicodeString result = n->normalize(in, status);
  std::string out;
  if (U_FAILURE(status)) // ICU's data is built in; a failure here is out of memory
    return std::string(s);
  result.toUTF8String(out);
  return out;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t c = nextCodePoint(s, i);
    if (c < 0x80) {
      out += char(c >= 'A' && c <= 'Z' ? c + 32 : c);
      continue;
    }
    // One character at a time, so no context (final sigma) applies.
    UChar src[2], dst[8];
    int32_t srcLen = 0;
    U16_APPEND_UNSAFE(src, srcLen, UChar32(c));
    UErrorCode status = U_ZERO_ERROR;
    int32_t n = u_strToLower(dst, 8, src, srcLen, "", &status);
    for (int32_t k = 0; k < n && U_SUCCESS(status);) {
      UChar32 d;
      U16_NEXT(dst, k, n, d);
      appendUtf8(out, char32_t(d));
    }
  }
  return out;
}

} // namespace moe::rt::tok
