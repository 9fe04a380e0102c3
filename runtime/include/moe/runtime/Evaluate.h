//===- Evaluate.h - bits per byte, routing statistics -----------*- C++ -*-===//
#ifndef MOE_RUNTIME_EVALUATE_H
#define MOE_RUNTIME_EVALUATE_H

#include "moe/runtime/Session.h"
#include "moe/runtime/Tokenizer.h"

#include <functional>
#include <optional>
#include <string>

namespace moe::rt {

/// How a model's predictions differ from a reference model's on one text.
struct Comparison {
  double referenceBitsPerByte = 0;
  double kl = 0;   ///< mean KL(reference || model) per predicted byte, in nats
  double top1 = 0; ///< fraction of positions where both models' argmax agree
};

struct TextScore {
  /// Per predicted byte (per predicted token for scoreTokens): bits and
  /// perplexity.
  double bitsPerByte = 0, perplexity = 0;
  uint64_t bytes = 0; ///< predicted bytes (tokens)
  std::optional<Comparison> comparison; ///< with a reference session
};

/// Called after each window with the tokens scored so far and in all.
using Progress = std::function<void(uint64_t done, uint64_t total)>;

/// Scores `text` under the model. The bytes are cut into consecutive windows
/// of (context - 1) bytes, each run as [start] + bytes from position 0, and
/// every byte is predicted from the tokens before it in its window (the
/// procedure examples/train_tiny_moe.py uses). `context` <= the session's.
/// With `reference` (same vocabulary), it sees the same windows and the
/// score carries the comparison.
Expected<TextScore> scoreText(Session &session, const ByteTokenizer &tokenizer,
                              const std::string &text, int64_t context,
                              Session *reference = nullptr, const Progress &progress = {});

/// The same for a token sequence. With `start`, windows of context - 1
/// tokens each follow `start` and every token is predicted; without, windows
/// of `context` tokens overlap by one and every token but the first is.
Expected<TextScore> scoreTokens(Session &session, const std::vector<int32_t> &tokens,
                                int64_t context, Session *reference = nullptr,
                                std::optional<int32_t> start = std::nullopt,
                                const Progress &progress = {});

/// One line per MoE layer: a bar per expert and the max/mean load ratio.
std::string expertLoadHistogram(const std::vector<ExpertLoad> &load);

} // namespace moe::rt

#endif
