//===- Tokenizer.h - text <-> token ids for byte-level models ---*- C++ -*-===//
//
// The runtime applies byte-level tokenizers only: ByT5's (token = byte + 3;
// 0 pad, 1 eos, 2 unk). Other models take token ids.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TOKENIZER_H
#define MOE_RUNTIME_TOKENIZER_H

#include "moe/runtime/Status.h"
#include "runtime/schema/plan_generated.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe::rt {

class ByteTokenizer {
public:
  /// The plan's tokenizer, or an error saying to use token ids instead.
  static Expected<ByteTokenizer> forPlan(const plan::Plan &plan);

  std::vector<int32_t> encode(const std::string &text) const;
  /// Bytes of the ids that stand for bytes; special ids are dropped.
  std::string decode(const std::vector<int32_t> &ids) const;
  /// The id that starts every sequence (the model's eos, as in training).
  int32_t startId() const { return start_; }
  static constexpr int32_t kOffset = 3;

private:
  int32_t start_ = 1;
};

} // namespace moe::rt

#endif
