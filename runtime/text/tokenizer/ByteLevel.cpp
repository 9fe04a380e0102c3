//===- ByteLevel.cpp - GPT-2's byte <-> printable character map -----------===//
#include "ByteLevel.h"

#include "Unicode.h"

#include <array>
#include <unordered_map>

namespace moe::rt::tok {

namespace {
// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
// the others take the code points from 256 on, in byte order.
struct Tables {
  std::array<std::string, 256> byteToChar;
  std::unordered_map<char32_t, unsigned char> charToByte;
  Tables() {
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      char32_t c = printable(b) ? char32_t(b) : next++;
      appendUtf8(byteToChar[b], c);
      charToByte[c] = static_cast<unsigned char>(b);
    }
  }
};
const Tables &tables() {
  static const Tables t;
  return t;
}
} // namespace

std::string bytesToChars(std::string_view text) {
  const Tables &t = tables();
  std::string out;
  out.reserve(text.size() * 2);
  for (char b : text)
    out += t.byteToChar[static_cast<unsigned char>(b)];
  return out;
}

std::optional<std::string> charsToBytes(std::string_view token) {
  const Tables &t = tables();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    auto it = t.charToByte.find(nextCodePoint(token, i));
    if (it == t.charToByte.end())
      return std::nullopt;
    out += char(it->second);
  }
  return out;
}

} // namespace moe::rt::tok
