//===- Decoder.h - tokenizer.json decoders ----------------------*- C++ -*-===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_DECODER_H
#define MOE_RUNTIME_TEXT_TOKENIZER_DECODER_H

#include "Json.h"

#include <memory>
#include <string>
#include <vector>

namespace moe::rt::tok {

/// Hugging Face's Decoder::decode_chain: rewrites the token strings; the
/// text is their concatenation.
class Decoder {
public:
  virtual ~Decoder() = default;
  virtual void decodeChain(std::vector<std::string> &tokens) const = 0;
};

/// The `decoder` object (not null).
Expected<std::unique_ptr<Decoder>> parseDecoder(const Json &json);

} // namespace moe::rt::tok

#endif
