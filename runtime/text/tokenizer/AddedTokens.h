//===- AddedTokens.h - the added_tokens of tokenizer.json -------*- C++ -*-===//
//
// Added tokens are cut out of the input before anything else sees it:
// first those with normalized=false on the raw text, then, after each
// remaining piece is normalized, those with normalized=true (matched in
// their normalized spelling). Matching is leftmost-longest, with
// single_word, lstrip and rstrip applied as Hugging Face's AddedVocabulary
// does.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_TOKENIZER_ADDEDTOKENS_H
#define MOE_RUNTIME_TEXT_TOKENIZER_ADDEDTOKENS_H

#include "Bpe.h"
#include "Json.h"
#include "Normalizer.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moe::rt::tok {

struct AddedToken {
  std::string content;
  bool singleWord = false, lstrip = false, rstrip = false, normalized = true, special = false;
  /// The content as the normalizer spells it, for normalized tokens.
  std::string pattern;
};

/// A piece of the input: an added token's id, or text for the pipeline.
struct Segment {
  std::string text;
  std::optional<int32_t> id;
  bool atStart = false; ///< begins at offset 0 of the input
};

class AddedVocabulary {
public:
  /// The `added_tokens` array. Ids are assigned as Hugging Face does on
  /// load: a token already in the vocab keeps its id, others are numbered
  /// from the vocab's size on, in file order.
  static Expected<AddedVocabulary> parse(const Json &addedTokens, const Bpe &model,
                                         const Normalizer *normalizer);

  /// Cuts `text` on added tokens and normalizes the rest.
  std::vector<Segment> extractAndNormalize(std::string_view text, const Normalizer *normalizer) const;

  std::optional<int32_t> tokenToId(std::string_view content) const;
  /// The token's text as decode sees it (the normalized spelling for
  /// normalized tokens, as Hugging Face's simple_id_to_token returns).
  const std::string *idToToken(int32_t id) const;
  /// Whether `token` is the content of a special token.
  bool isSpecialContent(const std::string &token) const { return special_.count(token) != 0; }
  bool isSpecialId(int32_t id) const;
  /// Added tokens whose content is not in the model's vocab.
  int64_t countOutside(const Bpe &model) const;

private:
  /// A byte trie with leftmost-longest search.
  class Trie {
  public:
    void insert(const std::string &pattern, int32_t id);
    bool empty() const { return nodes_.size() <= 1; }
    /// The longest pattern starting at `at`: (end, id).
    std::optional<std::pair<size_t, int32_t>> longestAt(std::string_view text, size_t at) const;

  private:
    struct Node {
      std::map<unsigned char, int32_t> next;
      int32_t id = -1;
    };
    std::vector<Node> nodes_{Node()};
  };

  void split(const Segment &segment, const Trie &trie, std::vector<Segment> &out) const;

  std::map<int32_t, AddedToken> byId_;
  std::unordered_map<std::string, int32_t> byContent_;
  std::set<std::string> special_;
  Trie raw_, normalized_;
};

} // namespace moe::rt::tok

#endif
