//===- PreTokenizer.h - tokenizer.json pre-tokenizers -----------*- C++ -*-===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_PRETOKENIZER_H
#define MOE_RUNTIME_TEXT_TOKENIZER_PRETOKENIZER_H

#include "Json.h"

#include <memory>
#include <string>
#include <vector>

namespace moe::rt::tok {

/// A split of the input on its way to the model.
struct Piece {
  std::string text;
  /// Whether it begins at offset 0 of the original input (Metaspace's
  /// prepend_scheme "first" adds "▁" there only).
  bool atStart = false;
};

/// Splits pieces into smaller ones (empty pieces are dropped, as Hugging
/// Face's PreTokenizedString::split does).
class PreTokenizer {
public:
  virtual ~PreTokenizer() = default;
  virtual void preTokenize(std::vector<Piece> &pieces) const = 0;
};

/// The `pre_tokenizer` object (not null).
Expected<std::unique_ptr<PreTokenizer>> parsePreTokenizer(const Json &json);

} // namespace moe::rt::tok

#endif
