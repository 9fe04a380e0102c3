//===- StreamDecoder.cpp - decode ids one at a time -----------------------===//
//
// Hugging Face's DecodeStream: decode a window of recent ids, emit what it
// adds to the decode of the window's already-emitted prefix, and hold back
// while the text ends in U+FFFD (a character still missing bytes). Because
// the window starts at an id that was decoded before, decoders that treat
// the first token specially (Strip, Metaspace) cut the same way in both.
// Unlike DecodeStream, it also holds back while the window ends in a
// `<0xNN>` byte token: the ByteFallback decoder replaces a whole run of
// them when the run is not UTF-8, so a valid start ('d' as <0x64>) is not
// final until the run ends. The pieces then always add up to decode().
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/HfTokenizer.h"

#include <cctype>

namespace moe::rt {

namespace {
const std::string Replacement = "\xEF\xBF\xBD";

/// "<0xNN>": what the ByteFallback decoder turns into a byte.
bool byteToken(const std::optional<std::string> &token) {
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  return token && token->size() == 6 && token->compare(0, 3, "<0x") == 0 && hex((*token)[3]) &&
         hex((*token)[4]) && (*token)[5] == '>';
}

bool endsWithReplacement(const std::string &s) {
  return s.size() >= Replacement.size() &&
         s.compare(s.size() - Replacement.size(), Replacement.size(), Replacement) == 0;
}

/// `text` past what it shares with `prefix` (all of `prefix`, unless decode
/// rewrote an invalid byte-fallback run), cut at a character boundary.
std::string after(const std::string &text, const std::string &prefix) {
  size_t n = 0;
  while (n < prefix.size() && n < text.size() && text[n] == prefix[n])
    ++n;
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80)
    --n;
  return text.substr(n);
}
} // namespace

StreamDecoder::StreamDecoder(const HfTokenizer &tokenizer, bool skipSpecialTokens)
    : tokenizer_(tokenizer), skipSpecialTokens_(skipSpecialTokens) {}

std::string StreamDecoder::push(int32_t id) {
  window_.push_back(id);
  if (byteToken(tokenizer_.idToToken(id)))
    return ""; // its run may yet turn out not UTF-8
  std::string text = tokenizer_.decode(window_, skipSpecialTokens_);
  if (text.size() <= prefix_.size() || endsWithReplacement(text))
    return "";
  std::string piece = after(text, prefix_);
  // Keep the ids that produced `piece` as the next window's context.
  window_.erase(window_.begin(), window_.begin() + std::ptrdiff_t(prefixIndex_));
  prefix_ = tokenizer_.decode(window_, skipSpecialTokens_);
  prefixIndex_ = window_.size();
  return piece;
}

std::string StreamDecoder::finish() {
  std::string text = tokenizer_.decode(window_, skipSpecialTokens_);
  std::string piece = text.size() > prefix_.size() ? after(text, prefix_) : "";
  window_.clear();
  prefix_.clear();
  prefixIndex_ = 0;
  return piece;
}

} // namespace moe::rt
