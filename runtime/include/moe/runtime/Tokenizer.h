//===- Tokenizer.h - text <-> token ids for a plan --------------*- C++ -*-===//
//
// A plan's text comes in and goes out through one of two tokenizers:
// ByT5's byte-level one (token = byte + 3; 0 pad, 1 eos, 2 unk) when its
// checkpoint had a ByT5Tokenizer, else the checkpoint's tokenizer.json
// (plan format 2.6, HfTokenizer.h). Plans with neither take token ids.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TOKENIZER_H
#define MOE_RUNTIME_TOKENIZER_H

#include "moe/abi/Status.h"
#include "abi/schema/plan_generated.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace moe::rt {

/// Incremental decoding: the text of each new token as soon as it is whole
/// (no partial UTF-8 character is ever returned). The pieces concatenated
/// equal decoding all the tokens at once.
class TextStream {
public:
  virtual ~TextStream() = default;
  virtual std::string push(int32_t id) = 0;
  /// What is held back at the end (an incomplete character, replaced).
  virtual std::string finish() = 0;
};

class Tokenizer {
public:
  virtual ~Tokenizer() = default;
  /// The plan's tokenizer, or an error saying why it has none.
  static Expected<std::shared_ptr<const Tokenizer>> forPlan(const plan::Plan &plan);
  /// With `addSpecial`, the tokens the tokenizer puts around a text (a
  /// start token) are added, as for a prompt; a chat template's output
  /// already holds them.
  virtual std::vector<int32_t> encode(std::string_view text, bool addSpecial) const = 0;
  /// Special tokens (start, end, pad, added specials) are dropped.
  virtual std::string decode(const std::vector<int32_t> &ids) const = 0;
  virtual std::unique_ptr<TextStream> stream() const = 0;
};

class ByteTokenizer final : public Tokenizer {
public:
  /// The plan's byte tokenizer, or an error saying there is none.
  static Expected<ByteTokenizer> forPlan(const plan::Plan &plan);

  std::vector<int32_t> encode(std::string_view text, bool addSpecial = false) const override;
  /// Bytes of the ids that stand for bytes; special ids are dropped.
  std::string decode(const std::vector<int32_t> &ids) const override;
  std::unique_ptr<TextStream> stream() const override;
  /// The id that starts every sequence (the model's eos, as in training).
  int32_t startId() const { return start_; }
  static constexpr int32_t kOffset = 3;

private:
  int32_t start_ = 1;
};

} // namespace moe::rt

#endif
