//===- StreamText.cpp - a request's text as its tokens arrive -------------===//
#include "tools/moe-serve/StreamText.h"

#include <algorithm>

namespace moe::serve {

StreamText::StreamText(const rt::Tokenizer &tokenizer, std::vector<std::string> stops)
    : stream_(tokenizer.stream()), stops_(std::move(stops)) {
  for (const std::string &s : stops_)
    longest_ = std::max(longest_, s.size());
}

size_t StreamText::stopAt() const {
  size_t at = std::string::npos;
  for (const std::string &s : stops_)
    at = std::min(at, text_.find(s));
  return at;
}

std::string StreamText::add(const std::vector<int32_t> &tokens) {
  for (int32_t t : tokens)
    text_ += stream_->push(t);
  // Hold back the last longest-1 bytes (they may begin a stop string), and
  // everything from a stop string on.
  size_t end = text_.size() - std::min(text_.size(), longest_ ? longest_ - 1 : 0);
  end = std::min(end, stopAt());
  while (end > released_.size() && end < text_.size() && (uint8_t(text_[end]) & 0xC0) == 0x80)
    --end; // not inside a character
  if (end <= released_.size())
    return "";
  std::string out = text_.substr(released_.size(), end - released_.size());
  released_ += out;
  return out;
}

std::string StreamText::finish(rt::FinishReason reason) {
  text_ += stream_->finish();
  size_t end = text_.size();
  if (reason == rt::FinishReason::Stop)
    end = std::min(end, stopAt());
  end = std::max(end, released_.size());
  std::string out = text_.substr(released_.size(), end - released_.size());
  released_ += out;
  return out;
}

} // namespace moe::serve
