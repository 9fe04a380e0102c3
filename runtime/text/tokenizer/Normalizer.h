//===- Normalizer.h - tokenizer.json normalizers ----------------*- C++ -*-===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_NORMALIZER_H
#define MOE_RUNTIME_TEXT_TOKENIZER_NORMALIZER_H

#include "Json.h"

#include <memory>
#include <string>

namespace moe::rt::tok {

/// Rewrites one piece of input before pre-tokenization. Offsets are not
/// tracked: the runtime needs ids, not alignments.
class Normalizer {
public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;
};

/// The `normalizer` object (not null).
Expected<std::unique_ptr<Normalizer>> parseNormalizer(const Json &json);

} // namespace moe::rt::tok

#endif
