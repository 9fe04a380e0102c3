//===- Normalizer.cpp - tokenizer.json normalizers ------------------------===//
#include "Normalizer.h"

#include "ByteLevel.h"
#include "Unicode.h"

#include <vector>

namespace moe::rt::tok {

namespace {

class Sequence final : public Normalizer {
public:
  std::vector<std::unique_ptr<Normalizer>> steps;
  std::string normalize(std::string text) const override {
    for (const auto &step : steps)
      text = step->normalize(std::move(text));
    return text;
  }
};

class UnicodeForm final : public Normalizer {
public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  std::string normalize(std::string text) const override { return tok::normalize(text, form_); }

private:
  NormalForm form_;
};

class Lowercase final : public Normalizer {
public:
  std::string normalize(std::string text) const override { return lowercase(text); }
};

class Prepend final : public Normalizer {
public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override {
    return text.empty() ? text : prefix_ + text;
  }

private:
  std::string prefix_;
};

class Replace final : public Normalizer {
public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string text) const override {
    return pattern_.replaceAll(text, content_);
  }

private:
  Pattern pattern_;
  std::string content_;
};

class Strip final : public Normalizer {
public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    size_t begin = 0, end = text.size();
    if (left_)
      for (size_t i = 0; i < text.size() && isWhitespace(nextCodePoint(text, i));)
        begin = i;
    if (right_) {
      end = begin;
      for (size_t i = begin; i < text.size();)
        if (!isWhitespace(nextCodePoint(text, i)))
          end = i;
    }
    return text.substr(begin, end - begin);
  }

private:
  bool left_, right_;
};

class ByteLevelNormalizer final : public Normalizer {
public:
  std::string normalize(std::string text) const override { return bytesToChars(text); }
};

} // namespace

Expected<std::unique_ptr<Normalizer>> parseNormalizer(const Json &json) {
  MOE_TOK_TRY(std::string type, typeOf(json, "normalizer"));
  std::string where = "normalizer " + type;
  if (type == "Sequence") {
    MOE_TOK_TRY(const Json *list, member(json, "normalizers", where));
    if (!list->is_array())
      return jsonError(where, "field \"normalizers\" must be an array");
    auto seq = std::make_unique<Sequence>();
    for (const Json &item : *list) {
      MOE_TOK_TRY(auto step, parseNormalizer(item));
      seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<Normalizer>(std::move(seq));
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    NormalForm form = type == "NFC"   ? NormalForm::NFC
                      : type == "NFD" ? NormalForm::NFD
                      : type == "NFKC" ? NormalForm::NFKC
                                       : NormalForm::NFKD;
    return std::unique_ptr<Normalizer>(std::make_unique<UnicodeForm>(form));
  }
  if (type == "Lowercase")
    return std::unique_ptr<Normalizer>(std::make_unique<Lowercase>());
  if (type == "Prepend") {
    MOE_TOK_TRY(std::string prefix, field<std::string>(json, "prepend", where));
    return std::unique_ptr<Normalizer>(std::make_unique<Prepend>(std::move(prefix)));
  }
  if (type == "Replace") {
    MOE_TOK_TRY(Pattern pattern, patternField(json, where));
    MOE_TOK_TRY(std::string content, field<std::string>(json, "content", where));
    return std::unique_ptr<Normalizer>(std::make_unique<Replace>(std::move(pattern), std::move(content)));
  }
  if (type == "Strip") {
    MOE_TOK_TRY(bool left, field<bool>(json, "strip_left", where));
    MOE_TOK_TRY(bool right, field<bool>(json, "strip_right", where));
    return std::unique_ptr<Normalizer>(std::make_unique<Strip>(left, right));
  }
  if (type == "ByteLevel")
    return std::unique_ptr<Normalizer>(std::make_unique<ByteLevelNormalizer>());
  return unsupported("normalizer", type,
                     "Sequence, NFC, NFD, NFKC, NFKD, Lowercase, Prepend, Replace, Strip, ByteLevel");
}

} // namespace moe::rt::tok
