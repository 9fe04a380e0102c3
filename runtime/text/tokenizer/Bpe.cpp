//===- Bpe.cpp - the BPE model of tokenizer.json --------------------------===//
#include "Bpe.h"

#include "Unicode.h"

#include <cstdio>
#include <queue>

namespace moe::rt::tok {

namespace {
// Hugging Face caches words shorter than this many bytes, up to this many.
constexpr size_t CacheMaxWordBytes = 256;
constexpr size_t CacheCapacity = 10000;
constexpr const char *Where = "model BPE";

uint64_t pairKey(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }
} // namespace

Expected<std::unique_ptr<Bpe>> Bpe::parse(const Json &model) {
  MOE_TOK_TRY(std::string type, optionalField<std::string>(model, "type", "BPE", "model"));
  if (type != "BPE")
    return unsupported("model", type, "BPE");
  for (const char *key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    MOE_TOK_TRY(std::string affix, optionalField<std::string>(model, key, "", Where));
    if (!affix.empty())
      return jsonError(Where, std::string(key) + " \"" + affix +
                                  "\" is not supported (only null or \"\")");
  }
  MOE_TOK_TRY(double dropout, optionalField<double>(model, "dropout", 0.0, Where));
  if (dropout != 0.0)
    return jsonError(Where, "dropout " + std::to_string(dropout) +
                                " is not supported (random merges; set it to null for inference)");

  std::unique_ptr<Bpe> bpe(new Bpe());
  MOE_TOK_TRY(bpe->fuseUnk_, optionalField<bool>(model, "fuse_unk", false, Where));
  MOE_TOK_TRY(bpe->byteFallback_, optionalField<bool>(model, "byte_fallback", false, Where));
  MOE_TOK_TRY(bpe->ignoreMerges_, optionalField<bool>(model, "ignore_merges", false, Where));

  MOE_TOK_TRY(const Json *vocab, member(model, "vocab", Where));
  if (!vocab->is_object())
    return jsonError(Where, "field \"vocab\" must be an object of token: id");
  bpe->strings_.reserve(vocab->size());
  int64_t maxId = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > INT32_MAX)
      return jsonError(Where, "vocab entry \"" + it.key() + "\" has id " + it.value().dump() +
                                  ", not an integer in [0, 2^31)");
    bpe->strings_.push_back(it.key());
    maxId = std::max(maxId, it.value().get<int64_t>());
  }
  // Ids index a table: refuse gaps that would make it much larger than the vocab.
  if (maxId >= int64_t(bpe->strings_.size()) * 2 + 65536)
    return jsonError(Where, "vocab id " + std::to_string(maxId) + " is far beyond its " +
                                std::to_string(bpe->strings_.size()) + " entries");
  bpe->idToString_.assign(size_t(maxId + 1), -1);
  bpe->vocab_.reserve(bpe->strings_.size());
  size_t index = 0;
  for (auto it = vocab->begin(); it != vocab->end(); ++it, ++index) {
    int32_t id = it.value().get<int32_t>();
    bpe->vocab_.emplace(bpe->strings_[index], id);
    if (bpe->idToString_[size_t(id)] < 0)
      bpe->idToString_[size_t(id)] = int32_t(index);
  }

  MOE_TOK_TRY(std::string unk, optionalField<std::string>(model, "unk_token", "", Where));
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto id = bpe->tokenToId(unk);
    if (!id)
      return jsonError(Where, "unk_token \"" + unk + "\" is not in the vocab");
    bpe->unk_ = *id;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    bpe->byteTokens_[size_t(b)] = bpe->tokenToId(name).value_or(-1);
  }
  MOE_TOK_TRY(const Json *merges, member(model, "merges", Where));
  if (Status s = bpe->buildMerges(*merges); !s)
    return s;
  return bpe;
}

Status Bpe::buildMerges(const Json &merges) {
  if (!merges.is_array())
    return jsonError(Where, "field \"merges\" must be an array");
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const Json &merge : merges) {
    std::string left, right;
    if (merge.is_string()) { // "a b"
      const std::string &line = merge.get_ref<const std::string &>();
      if (line.rfind("#version", 0) == 0)
        continue;
      size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        return jsonError(Where, "merge " + std::to_string(rank + 1) + " \"" + line +
                                    "\" is not two tokens separated by one space");
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return jsonError(Where, "merge " + std::to_string(rank + 1) + " is " + merge.dump() +
                                  ", not \"a b\" or [\"a\", \"b\"]");
    }
    auto a = tokenToId(left), b = tokenToId(right), merged = tokenToId(left + right);
    for (auto [id, token] : {std::pair{a, &left}, {b, &right}})
      if (!id)
        return jsonError(Where, "merge " + std::to_string(rank + 1) + " names token \"" + *token +
                                    "\", which is not in the vocab");
    if (!merged)
      return jsonError(Where, "merge " + std::to_string(rank + 1) + " makes \"" + left + right +
                                  "\", which is not in the vocab");
    // A repeated pair keeps its last rank, as Hugging Face's map does.
    merges_[pairKey(*a, *b)] = {rank, *merged};
    ++rank;
  }
  return Status::ok();
}

std::optional<int32_t> Bpe::tokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end())
    return std::nullopt;
  return it->second;
}

const std::string *Bpe::idToToken(int32_t id) const {
  if (id < 0 || size_t(id) >= idToString_.size() || idToString_[size_t(id)] < 0)
    return nullptr;
  return &strings_[size_t(idToString_[size_t(id)])];
}

std::vector<int32_t> Bpe::mergeWord(std::string_view word) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool removed;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  auto add = [&](int32_t id) {
    int32_t pos = int32_t(symbols.size());
    symbols.push_back({id, pos - 1, -1, false});
    if (pos > 0)
      symbols[size_t(pos - 1)].next = pos;
  };
  int32_t pendingUnk = -1; // an unk not yet added (fuse_unk grows it)
  for (size_t i = 0; i < word.size();) {
    size_t begin = i;
    i += utf8Length(word, i);
    std::string_view ch = word.substr(begin, i - begin);
    if (auto id = tokenToId(ch)) {
      if (pendingUnk >= 0)
        add(pendingUnk);
      pendingUnk = -1;
      add(*id);
      continue;
    }
    if (byteFallback_) {
      bool all = true;
      for (char b : ch)
        all = all && byteTokens_[static_cast<unsigned char>(b)] >= 0;
      // Hugging Face adds the bytes without flushing a pending unk first.
      if (all) {
        for (char b : ch)
          add(byteTokens_[static_cast<unsigned char>(b)]);
        continue;
      }
    }
    if (unk_) {
      if (pendingUnk >= 0 && !fuseUnk_)
        add(pendingUnk);
      pendingUnk = *unk_;
    }
  }
  if (pendingUnk >= 0)
    add(pendingUnk);

  struct Merge {
    int32_t rank, pos, id;
    bool operator<(const Merge &o) const { // the heap's top: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  auto lookup = [&](int32_t a, int32_t b) -> const std::pair<int32_t, int32_t> * {
    auto it = merges_.find(pairKey(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  std::priority_queue<Merge> queue;
  for (size_t p = 0; p + 1 < symbols.size(); ++p)
    if (auto *m = lookup(symbols[p].id, symbols[p + 1].id))
      queue.push({m->first, int32_t(p), m->second});
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol &cur = symbols[size_t(top.pos)];
    if (cur.removed || cur.next < 0)
      continue;
    Symbol &right = symbols[size_t(cur.next)];
    // Skip entries made stale by an earlier merge of either side.
    auto *m = lookup(cur.id, right.id);
    if (!m || m->second != top.id)
      continue;
    cur.id = top.id;
    right.removed = true;
    cur.next = right.next;
    if (cur.next >= 0)
      symbols[size_t(cur.next)].prev = top.pos;
    if (cur.prev >= 0)
      if (auto *p = lookup(symbols[size_t(cur.prev)].id, cur.id))
        queue.push({p->first, cur.prev, p->second});
    if (cur.next >= 0)
      if (auto *n = lookup(cur.id, symbols[size_t(cur.next)].id))
        queue.push({n->first, top.pos, n->second});
  }
  std::vector<int32_t> ids;
  for (const Symbol &s : symbols)
    if (!s.removed)
      ids.push_back(s.id);
  return ids;
}

void Bpe::tokenize(std::string_view word, std::vector<int32_t> &ids) const {
  if (word.empty())
    return;
  if (ignoreMerges_)
    if (auto id = tokenToId(word)) {
      ids.push_back(*id);
      return;
    }
  bool cacheable = word.size() < CacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> merged = mergeWord(word);
  ids.insert(ids.end(), merged.begin(), merged.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    if (cache_.size() < CacheCapacity)
      cache_.emplace(std::string(word), std::move(merged));
  }
}

} // namespace moe::rt::tok
