//===- StreamText.h - a request's text as its tokens arrive -----*- C++ -*-===//
//
// The engine reports a stop string's tokens before it ends the request, so
// text that could be the start of a stop string is held back until the
// next token shows it is not (or the request ends, and the text is cut
// where the stop string starts, as OpenAI's API does). What is released is
// always whole UTF-8 characters.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_MOESERVE_STREAMTEXT_H
#define MOE_TOOLS_MOESERVE_STREAMTEXT_H

#include "moe/runtime/Stopping.h"
#include "moe/runtime/Tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace moe::serve {

class StreamText {
public:
  StreamText(const rt::Tokenizer &tokenizer, std::vector<std::string> stops);
  /// The text these tokens complete that can be released now.
  std::string add(const std::vector<int32_t> &tokens);
  /// The rest of the text once the request ended for `reason`.
  std::string finish(rt::FinishReason reason);
  /// Everything released so far.
  const std::string &released() const { return released_; }

private:
  /// Where the earliest stop string starts in text_, or npos.
  size_t stopAt() const;

  std::unique_ptr<rt::TextStream> stream_;
  std::vector<std::string> stops_;
  size_t longest_ = 0;
  std::string text_, released_;
};

} // namespace moe::serve

#endif
