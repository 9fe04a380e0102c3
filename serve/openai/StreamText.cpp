//===- StreamText.cpp - a request's text as its tokens arrive -------------===//
#include "moe/serve/StreamText.h"

#include <algorithm>

namespace moe::serve {

StreamText::StreamText(const rt::Tokenizer &tokenizer, const rt::StopOptions &stop,
                       const std::vector<int32_t> &eos)
    : stream_(tokenizer.stream()), stops_(stop.strings), ends_(stop.stopTokenIds),
      keepStop_(stop.includeStopString) {
  if (!stop.ignoreEos)
    ends_.insert(ends_.end(), eos.begin(), eos.end());
  for (const std::string &s : stops_)
    longest_ = std::max(longest_, s.size());
}

void StreamText::push(int32_t token) {
  text_ += stream_->push(token);
  tokenEnds_.push_back(text_.size());
}

size_t StreamText::releasable(bool final, rt::FinishReason reason) const {
  size_t end = text_.size();
  if (!final) // hold back the last longest-1 bytes: they may begin a stop string
    end -= std::min(end, longest_ ? longest_ - 1 : 0);
  if (!final || reason == rt::FinishReason::Stop) {
    // Nothing from the earliest stop string on; with it kept, nothing after it.
    size_t at = std::string::npos;
    for (const std::string &s : stops_)
      if (size_t p = text_.find(s); p != std::string::npos)
        at = std::min(at, keepStop_ && final ? p + s.size() : p);
    end = std::min(end, at);
  }
  if (!final)
    while (end > released_.size() && end < text_.size() && (uint8_t(text_[end]) & 0xC0) == 0x80)
      --end; // not inside a character
  return std::max(end, released_.size());
}

std::string StreamText::release(size_t end) {
  std::string out = text_.substr(released_.size(), end - released_.size());
  released_ += out;
  return out;
}

std::string StreamText::add(const std::vector<int32_t> &tokens) {
  for (int32_t t : tokens) {
    // A held end token that did not end the sequence (ignored, or below
    // min_tokens it could not have come) is text like any other.
    if (heldEnd_)
      push(*std::exchange(heldEnd_, std::nullopt));
    if (std::find(ends_.begin(), ends_.end(), t) != ends_.end())
      heldEnd_ = t;
    else
      push(t);
  }
  return release(releasable(false, rt::FinishReason::Length));
}

std::string StreamText::finish(rt::FinishReason reason) {
  if (heldEnd_ && (reason != rt::FinishReason::Eos || keepStop_))
    push(*heldEnd_);
  heldEnd_.reset();
  text_ += stream_->finish();
  return release(releasable(true, reason));
}

size_t StreamText::tokensReleased() const {
  return size_t(std::upper_bound(tokenEnds_.begin(), tokenEnds_.end(), released_.size()) -
                tokenEnds_.begin());
}

} // namespace moe::serve
