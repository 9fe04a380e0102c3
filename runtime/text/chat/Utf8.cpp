//===- Utf8.cpp - code points for Python's str semantics -----------------===//
#include "Utf8.h"

namespace moe::rt::chat {

std::u32string decodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + extra >= s.size() + (extra == 0)) {
      out.push_back(c); // Not UTF-8: keep the byte as a code point of its own.
      ++i;
      continue;
    }
    char32_t cp = extra == 0 ? c : c & (0x3F >> extra);
    bool ok = true;
    for (int k = 1; k <= extra; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      ok = ok && (cc >> 6) == 2;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += extra + 1;
  }
  return out;
}

std::string encodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s)
    appendUtf8(out, c);
  return out;
}

size_t codePointCount(std::string_view s) { return decodeUtf8(s).size(); }

bool isPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool isPyPrintable(char32_t c) {
  if (c == ' ')
    return true;
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD || isPySpace(c))
    return false;
  // Format characters (Cf) and private use (Co).
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E ||
      (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) ||
      (c >= 0x2060 && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) ||
      (c >= 0xD800 && c <= 0xF8FF) || (c >= 0xE0000 && c <= 0xE007F) || c >= 0xF0000)
    return false;
  return true;
}

bool hasNonAsciiCase(char32_t c) {
  if (c < 0x80 || c >= 0x1F000)
    return false;
  // Punctuation, symbols, arrows, box drawing, dingbats and the CJK blocks
  // have no case; Latin, Greek, Cyrillic, Armenian, fullwidth Latin and
  // several historic scripts do.
  bool caseless = (c >= 0x2000 && c <= 0x2183) || (c >= 0x2185 && c <= 0x24B5) ||
                  (c >= 0x24EA && c <= 0x2BFF) || (c >= 0x2E00 && c <= 0xA63F) ||
                  (c >= 0xA800 && c <= 0xAB2F) || (c >= 0xAC00 && c <= 0xFB00) ||
                  (c >= 0xFB07 && c <= 0xFF20) || (c >= 0xFF3B && c <= 0xFF40) ||
                  (c >= 0xFF5B && c <= 0xFFFF) || (c >= 0x0590 && c <= 0x109F) ||
                  (c >= 0x1100 && c <= 0x139F) || (c >= 0x1400 && c <= 0x1C7F) ||
                  (c >= 0x10000 && c <= 0x103FF) || (c >= 0x10500 && c <= 0x10C7F) ||
                  (c >= 0x10D00 && c <= 0x16E3F) || (c >= 0x16EA0 && c <= 0x1E8FF) ||
                  (c >= 0x1E960 && c < 0x1F000);
  return !caseless;
}

} // namespace moe::rt::chat
