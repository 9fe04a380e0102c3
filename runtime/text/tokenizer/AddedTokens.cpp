//===- AddedTokens.cpp - the added_tokens of tokenizer.json ---------------===//
#include "AddedTokens.h"

#include "Unicode.h"

namespace moe::rt::tok {

namespace {

size_t previousCharStart(std::string_view text, size_t i) {
  do
    --i;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80);
  return i;
}

/// Start of the whitespace run that ends text[0, end) (Rust regex `\s*$`).
size_t trailingSpaceStart(std::string_view text, size_t end) {
  while (end > 0) {
    size_t prev = previousCharStart(text, end), at = prev;
    if (!isWhitespace(nextCodePoint(text, at)))
      break;
    end = prev;
  }
  return end;
}

/// End of the whitespace run that starts at `begin` (Rust regex `^\s*`).
size_t leadingSpaceEnd(std::string_view text, size_t begin) {
  for (size_t i = begin; i < text.size();) {
    if (!isWhitespace(nextCodePoint(text, i)))
      break;
    begin = i;
  }
  return begin;
}

bool wordCharBefore(std::string_view text, size_t end) {
  if (end == 0)
    return false;
  size_t at = previousCharStart(text, end);
  return isWordChar(nextCodePoint(text, at));
}

bool wordCharAt(std::string_view text, size_t begin) {
  return begin < text.size() && isWordChar(nextCodePoint(text, begin));
}

bool sameFlags(const AddedToken &a, const AddedToken &b) {
  return a.content == b.content && a.singleWord == b.singleWord && a.lstrip == b.lstrip &&
         a.rstrip == b.rstrip && a.normalized == b.normalized && a.special == b.special;
}

} // namespace

void AddedVocabulary::Trie::insert(const std::string &pattern, int32_t id) {
  int32_t node = 0;
  for (char c : pattern) {
    auto [it, added] = nodes_[size_t(node)].next.emplace(static_cast<unsigned char>(c), int32_t(nodes_.size()));
    node = it->second;
    if (added)
      nodes_.emplace_back();
  }
  nodes_[size_t(node)].id = id;
}

std::optional<std::pair<size_t, int32_t>> AddedVocabulary::Trie::longestAt(std::string_view text,
                                                                           size_t at) const {
  std::optional<std::pair<size_t, int32_t>> best;
  int32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto &next = nodes_[size_t(node)].next;
    auto it = next.find(static_cast<unsigned char>(text[i]));
    if (it == next.end())
      break;
    node = it->second;
    if (nodes_[size_t(node)].id >= 0)
      best = {i + 1, nodes_[size_t(node)].id};
  }
  return best;
}

Expected<AddedVocabulary> AddedVocabulary::parse(const Json &addedTokens, const Bpe &model,
                                                 const Normalizer *normalizer) {
  const std::string where = "added_tokens";
  if (!addedTokens.is_array())
    return jsonError(where, "must be an array, found " + std::string(addedTokens.type_name()));
  AddedVocabulary vocab;
  int32_t nextId = int32_t(model.size());
  for (const Json &item : addedTokens) {
    AddedToken token;
    MOE_TOK_TRY(token.content, field<std::string>(item, "content", where));
    std::string at = where + " \"" + token.content + "\"";
    MOE_TOK_TRY(int64_t fileId, field<int64_t>(item, "id", at));
    (void)fileId; // Hugging Face renumbers (and only warns on a mismatch)
    MOE_TOK_TRY(token.singleWord, field<bool>(item, "single_word", at));
    MOE_TOK_TRY(token.lstrip, field<bool>(item, "lstrip", at));
    MOE_TOK_TRY(token.rstrip, field<bool>(item, "rstrip", at));
    MOE_TOK_TRY(token.normalized, field<bool>(item, "normalized", at));
    MOE_TOK_TRY(token.special, field<bool>(item, "special", at));
    if (token.content.empty())
      continue;
    auto known = vocab.byContent_.find(token.content);
    if (known != vocab.byContent_.end() && sameFlags(vocab.byId_[known->second], token))
      continue;
    std::optional<int32_t> existing =
        known != vocab.byContent_.end() ? known->second : model.tokenToId(token.content);
    int32_t id = existing ? *existing : nextId++;
    token.pattern = token.normalized && normalizer ? normalizer->normalize(token.content) : token.content;
    vocab.byContent_[token.content] = id;
    if (token.special)
      vocab.special_.insert(token.content);
    vocab.byId_[id] = std::move(token);
  }
  for (const auto &[id, token] : vocab.byId_)
    if (!token.pattern.empty())
      (token.normalized ? vocab.normalized_ : vocab.raw_).insert(token.pattern, id);
  return vocab;
}

void AddedVocabulary::split(const Segment &segment, const Trie &trie, std::vector<Segment> &out) const {
  const std::string &text = segment.text;
  auto emit = [&](size_t begin, size_t end, std::optional<int32_t> id) {
    if (end > begin)
      out.push_back({text.substr(begin, end - begin), id, segment.atStart && begin == 0 && !id});
  };
  size_t startOffset = 0;
  for (size_t pos = 0; !trie.empty() && pos < text.size();) {
    auto found = trie.longestAt(text, pos);
    if (!found) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = found->first;
    pos = stop;
    const AddedToken &token = byId_.at(found->second);
    if (token.singleWord && (wordCharBefore(text, start) || wordCharAt(text, stop)))
      continue;
    // lstrip takes the spaces before, unless an earlier match already did.
    if (token.lstrip)
      start = std::max(trailingSpaceStart(text, start), startOffset);
    if (token.rstrip)
      stop = leadingSpaceEnd(text, stop);
    emit(startOffset, start, std::nullopt);
    emit(start, stop, found->second);
    startOffset = stop;
  }
  emit(startOffset, text.size(), std::nullopt);
}

std::vector<Segment> AddedVocabulary::extractAndNormalize(std::string_view text,
                                                          const Normalizer *normalizer) const {
  std::vector<Segment> raw, out;
  split({std::string(text), std::nullopt, true}, raw_, raw);
  for (Segment &segment : raw) {
    if (segment.id) {
      out.push_back(std::move(segment));
      continue;
    }
    if (normalizer)
      segment.text = normalizer->normalize(std::move(segment.text));
    split(segment, normalized_, out);
  }
  return out;
}

std::optional<int32_t> AddedVocabulary::tokenToId(std::string_view content) const {
  auto it = byContent_.find(std::string(content));
  if (it == byContent_.end())
    return std::nullopt;
  return it->second;
}

const std::string *AddedVocabulary::idToToken(int32_t id) const {
  auto it = byId_.find(id);
  return it == byId_.end() ? nullptr : &it->second.pattern;
}

bool AddedVocabulary::isSpecialId(int32_t id) const {
  auto it = byId_.find(id);
  return it != byId_.end() && it->second.special;
}

int64_t AddedVocabulary::countOutside(const Bpe &model) const {
  int64_t n = 0;
  for (const auto &entry : byContent_)
    n += model.tokenToId(entry.first) ? 0 : 1;
  return n;
}

} // namespace moe::rt::tok
