//===- Bpe.h - the BPE model of tokenizer.json ------------------*- C++ -*-===//
//
// Byte-pair encoding as Hugging Face's `BPE` model does it: a word starts as
// its characters (or `<0xNN>` byte tokens with byte_fallback, or the unk
// token) and the lowest-ranked merge applies first, leftmost on ties, with a
// priority queue (O(n log n) per word). Words are cached.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_BPE_H
#define MOE_RUNTIME_TEXT_TOKENIZER_BPE_H

#include "Json.h"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moe::rt::tok {

class Bpe {
public:
  /// The `model` object; refuses other model types and BPE options it does
  /// not implement (dropout, continuing_subword_prefix, end_of_word_suffix).
  static Expected<std::unique_ptr<Bpe>> parse(const Json &model);

  /// Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t> &ids) const;
  std::optional<int32_t> tokenToId(std::string_view token) const;
  const std::string *idToToken(int32_t id) const;
  /// Number of vocab entries (what Hugging Face numbers new added tokens from).
  int64_t size() const { return int64_t(strings_.size()); }
  /// One past the largest id.
  int64_t idBound() const { return int64_t(idToString_.size()); }

private:
  Bpe() = default;
  Status buildMerges(const Json &merges);
  std::vector<int32_t> mergeWord(std::string_view word) const;

  std::vector<std::string> strings_; ///< the vocab's tokens; never resized after loading
  std::unordered_map<std::string_view, int32_t> vocab_;
  std::vector<int32_t> idToString_; ///< index into strings_, or -1
  /// (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  std::optional<int32_t> unk_;
  bool fuseUnk_ = false;
  bool byteFallback_ = false;
  bool ignoreMerges_ = false;
  std::array<int32_t, 256> byteTokens_{}; ///< id of "<0xNN>", or -1

  mutable std::mutex cacheMutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

} // namespace moe::rt::tok

#endif
