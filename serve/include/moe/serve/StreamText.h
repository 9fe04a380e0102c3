//===- StreamText.h - a request's text as its tokens arrive -----*- C++ -*-===//
//
// The engine reports a stop string's tokens before it ends the request, so
// text that could be the start of a stop string is held back until the
// next token shows it is not (or the request ends, and the text is cut
// where the stop string starts, as OpenAI's API does; or where it ends,
// with include_stop_str_in_output). The text of a token that ends the
// sequence (an end-of-sequence token, a stop token id) is held back too
// and never shown unless asked (vLLM's rule). What is released is always
// whole UTF-8 characters, and streaming it piece by piece adds up to the
// answer given whole.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_SERVE_STREAMTEXT_H
#define MOE_SERVE_STREAMTEXT_H

#include "moe/runtime/Stopping.h"
#include "moe/runtime/Tokenizer.h"

#include <memory>
#include <string>
#include <vector>

namespace moe::serve {

class StreamText {
public:
  /// `stop`: the request's stop rules (its strings, whether they are kept,
  /// its stop token ids); `eos`: the model's end-of-sequence tokens.
  StreamText(const rt::Tokenizer &tokenizer, const rt::StopOptions &stop,
             const std::vector<int32_t> &eos);
  /// The text these tokens complete that can be released now.
  std::string add(const std::vector<int32_t> &tokens);
  /// The rest of the text once the request ended for `reason`.
  std::string finish(rt::FinishReason reason);
  /// Everything released so far.
  const std::string &released() const { return released_; }
  /// How many of the tokens added so far have all their text released
  /// (their logprobs can go out with it).
  size_t tokensReleased() const;

private:
  /// Decodes `token` into text_ and records where its text ends.
  void push(int32_t token);
  /// Where the text ends that may be released now (or, `final`, at the
  /// end of the request that ended for `reason`).
  size_t releasable(bool final, rt::FinishReason reason) const;
  /// Releases text_ up to `end`.
  std::string release(size_t end);

  std::unique_ptr<rt::TextStream> stream_;
  std::vector<std::string> stops_;
  std::vector<int32_t> ends_; ///< tokens whose text is held, and dropped at their end
  bool keepStop_ = false;
  size_t longest_ = 0;
  std::string text_, released_;
  std::vector<size_t> tokenEnds_; ///< where each token's text ends in text_
  std::optional<int32_t> heldEnd_; ///< the newest token, if it may end the sequence
};

} // namespace moe::serve

#endif
