//===- Tokenizer.cpp - text <-> token ids for byte-level models ----------===//
#include "moe/runtime/Tokenizer.h"

namespace moe::rt {

Expected<ByteTokenizer> ByteTokenizer::forPlan(const plan::Plan &plan) {
  const plan::ModelConfig *c = plan.config();
  if (!c->tokenizer() || c->tokenizer()->str() != "byt5")
    return Status::error("this plan has no byte-level tokenizer (its checkpoint had no "
                         "ByT5Tokenizer); pass token ids with --prompt-tokens");
  if (c->vocab_size() < 256 + kOffset)
    return Status::error("a byte-level tokenizer needs a vocabulary of at least 259, the "
                         "plan has " + std::to_string(c->vocab_size()));
  ByteTokenizer t;
  t.start_ = c->eos_token_id() >= 0 ? c->eos_token_id() : 1;
  return t;
}

std::vector<int32_t> ByteTokenizer::encode(const std::string &text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (unsigned char b : text)
    ids.push_back(int32_t(b) + kOffset);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t> &ids) const {
  std::string text;
  for (int32_t id : ids)
    if (id >= kOffset && id < 256 + kOffset)
      text.push_back(char(id - kOffset));
  return text;
}

} // namespace moe::rt
