//===- PreTokenizer.cpp - tokenizer.json pre-tokenizers -------------------===//
#include "PreTokenizer.h"

#include "ByteLevel.h"
#include "SplitBehavior.h"
#include "Unicode.h"

namespace moe::rt::tok {

namespace {

/// Replaces each piece by the non-empty ranges `ranges(text)` cuts from it.
template <typename F> void splitEach(std::vector<Piece> &pieces, F ranges) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece &piece : pieces)
    for (auto [begin, end] : ranges(piece))
      if (end > begin)
        out.push_back({piece.text.substr(begin, end - begin), piece.atStart && begin == 0});
  pieces = std::move(out);
}

class Sequence final : public PreTokenizer {
public:
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void preTokenize(std::vector<Piece> &pieces) const override {
    for (const auto &step : steps)
      step->preTokenize(pieces);
  }
};

class Split final : public PreTokenizer {
public:
  Split(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void preTokenize(std::vector<Piece> &pieces) const override {
    splitEach(pieces, [&](const Piece &piece) {
      Spans spans = pattern_.findMatches(piece.text);
      if (invert_)
        for (Span &s : spans)
          s.match = !s.match;
      return applyBehavior(spans, behavior_);
    });
  }

private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

/// Splits where `pred` holds, with a fixed behavior (Digits, Punctuation,
/// WhitespaceSplit, CharDelimiterSplit).
class CharSplit final : public PreTokenizer {
public:
  CharSplit(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void preTokenize(std::vector<Piece> &pieces) const override {
    splitEach(pieces, [&](const Piece &piece) {
      return applyBehavior(charMatches(piece.text, pred_), behavior_);
    });
  }

private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

/// `\w+|[^\w\s]+` kept, whitespace dropped.
class Whitespace final : public PreTokenizer {
public:
  void preTokenize(std::vector<Piece> &pieces) const override {
    splitEach(pieces, [](const Piece &piece) {
      std::vector<std::pair<size_t, size_t>> runs;
      int runClass = -1; // 0: word, 1: other, -1: whitespace
      for (size_t i = 0; i < piece.text.size();) {
        size_t begin = i;
        char32_t c = nextCodePoint(piece.text, i);
        int cls = isWordChar(c) ? 0 : isWhitespace(c) ? -1 : 1;
        if (cls >= 0 && cls == runClass)
          runs.back().second = i;
        else if (cls >= 0)
          runs.emplace_back(begin, i);
        runClass = cls;
      }
      return runs;
    });
  }
};

class ByteLevel final : public PreTokenizer {
public:
  ByteLevel(bool addPrefixSpace, std::optional<Pattern> gpt2)
      : addPrefixSpace_(addPrefixSpace), gpt2_(std::move(gpt2)) {}
  void preTokenize(std::vector<Piece> &pieces) const override {
    if (addPrefixSpace_)
      for (Piece &piece : pieces)
        if (piece.text.empty() || piece.text[0] != ' ')
          piece.text.insert(0, " ");
    if (gpt2_)
      splitEach(pieces, [&](const Piece &piece) {
        return applyBehavior(gpt2_->findMatches(piece.text), SplitBehavior::Isolated);
      });
    for (Piece &piece : pieces)
      piece.text = bytesToChars(piece.text);
  }

private:
  bool addPrefixSpace_;
  std::optional<Pattern> gpt2_; ///< when use_regex
};

class Metaspace final : public PreTokenizer {
public:
  enum class Prepend { Always, First, Never };
  Metaspace(char32_t replacement, Prepend prepend, bool split)
      : prepend_(prepend), split_(split), replacementChar_(replacement) {
    appendUtf8(replacement_, replacement);
  }
  void preTokenize(std::vector<Piece> &pieces) const override {
    for (Piece &piece : pieces) {
      std::string replaced;
      for (char c : piece.text)
        if (c == ' ')
          replaced += replacement_;
        else
          replaced += c;
      bool starts = replaced.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (prepend_ == Prepend::Always || (prepend_ == Prepend::First && piece.atStart)))
        replaced.insert(0, replacement_);
      piece.text = std::move(replaced);
    }
    if (split_)
      splitEach(pieces, [&](const Piece &piece) {
        Spans spans = charMatches(piece.text, [&](char32_t c) { return c == replacementChar_; });
        return applyBehavior(spans, SplitBehavior::MergedWithNext);
      });
  }

private:
  Prepend prepend_;
  bool split_;
  char32_t replacementChar_;
  std::string replacement_;
};

// GPT-2's pre-tokenization regex, which ByteLevel applies when use_regex.
constexpr const char *Gpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Expected<std::unique_ptr<PreTokenizer>> parseMetaspace(const Json &json, const std::string &where) {
  MOE_TOK_TRY(char32_t replacement, charField(json, "replacement", where));
  MOE_TOK_TRY(std::string scheme, optionalField<std::string>(json, "prepend_scheme", "always", where));
  MOE_TOK_TRY(bool split, optionalField<bool>(json, "split", true, where));
  Metaspace::Prepend prepend;
  if (scheme == "always")
    prepend = Metaspace::Prepend::Always;
  else if (scheme == "first")
    prepend = Metaspace::Prepend::First;
  else if (scheme == "never")
    prepend = Metaspace::Prepend::Never;
  else
    return jsonError(where, "prepend_scheme \"" + scheme + "\" is not one of always, first, never");
  // The legacy add_prefix_space=false means "never".
  if (json.contains("add_prefix_space") && json["add_prefix_space"].is_boolean() &&
      !json["add_prefix_space"].get<bool>()) {
    if (prepend != Metaspace::Prepend::Never && json.contains("prepend_scheme"))
      return jsonError(where, "add_prefix_space does not match declared prepend_scheme");
    prepend = Metaspace::Prepend::Never;
  }
  return std::unique_ptr<PreTokenizer>(std::make_unique<Metaspace>(replacement, prepend, split));
}

} // namespace

Expected<std::unique_ptr<PreTokenizer>> parsePreTokenizer(const Json &json) {
  MOE_TOK_TRY(std::string type, typeOf(json, "pre_tokenizer"));
  std::string where = "pre_tokenizer " + type;
  if (type == "Sequence") {
    MOE_TOK_TRY(const Json *list, member(json, "pretokenizers", where));
    if (!list->is_array())
      return jsonError(where, "field \"pretokenizers\" must be an array");
    auto seq = std::make_unique<Sequence>();
    for (const Json &item : *list) {
      MOE_TOK_TRY(auto step, parsePreTokenizer(item));
      seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<PreTokenizer>(std::move(seq));
  }
  if (type == "Split") {
    MOE_TOK_TRY(Pattern pattern, patternField(json, where));
    MOE_TOK_TRY(SplitBehavior behavior, behaviorField(json, where));
    MOE_TOK_TRY(bool invert, field<bool>(json, "invert", where));
    return std::unique_ptr<PreTokenizer>(std::make_unique<Split>(std::move(pattern), behavior, invert));
  }
  if (type == "ByteLevel") {
    MOE_TOK_TRY(bool addPrefixSpace, field<bool>(json, "add_prefix_space", where));
    MOE_TOK_TRY(bool useRegex, optionalField<bool>(json, "use_regex", true, where));
    std::optional<Pattern> gpt2;
    if (useRegex) {
      MOE_TOK_TRY(Pattern p, Pattern::regex(Gpt2Regex, where));
      gpt2.emplace(std::move(p));
    }
    return std::unique_ptr<PreTokenizer>(std::make_unique<ByteLevel>(addPrefixSpace, std::move(gpt2)));
  }
  if (type == "Metaspace")
    return parseMetaspace(json, where);
  if (type == "Digits") {
    MOE_TOK_TRY(bool individual, field<bool>(json, "individual_digits", where));
    return std::unique_ptr<PreTokenizer>(std::make_unique<CharSplit>(
        isNumeric, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous));
  }
  if (type == "Punctuation") {
    SplitBehavior behavior = SplitBehavior::Isolated;
    if (json.contains("behavior")) {
      MOE_TOK_TRY(SplitBehavior b, behaviorField(json, where));
      behavior = b;
    }
    return std::unique_ptr<PreTokenizer>(std::make_unique<CharSplit>(isPunctuation, behavior));
  }
  if (type == "WhitespaceSplit")
    return std::unique_ptr<PreTokenizer>(std::make_unique<CharSplit>(isWhitespace, SplitBehavior::Removed));
  if (type == "CharDelimiterSplit") {
    MOE_TOK_TRY(char32_t delimiter, charField(json, "delimiter", where));
    return std::unique_ptr<PreTokenizer>(std::make_unique<CharSplit>(
        [delimiter](char32_t c) { return c == delimiter; }, SplitBehavior::Removed));
  }
  if (type == "Whitespace")
    return std::unique_ptr<PreTokenizer>(std::make_unique<Whitespace>());
  return unsupported("pre_tokenizer", type,
                     "Sequence, Split, ByteLevel, Metaspace, Digits, Punctuation, Whitespace, "
                     "WhitespaceSplit, CharDelimiterSplit");
}

} // namespace moe::rt::tok
