//===- Tokenizer.cpp - text <-> token ids for a plan ----------------------===//
#include "moe/runtime/Tokenizer.h"
#include "moe/runtime/HfTokenizer.h"

namespace moe::rt {
namespace {

/// Bytes held until they form whole UTF-8 characters.
class ByteStream final : public TextStream {
public:
  explicit ByteStream(const ByteTokenizer &t) : tokenizer_(t) {}
  std::string push(int32_t id) override {
    held_ += tokenizer_.decode({id});
    size_t whole = completePrefix(held_);
    std::string out = held_.substr(0, whole);
    held_.erase(0, whole);
    return out;
  }
  std::string finish() override {
    std::string out;
    if (!held_.empty())
      out = "\xEF\xBF\xBD"; // U+FFFD for the incomplete character, as HF decodes
    held_.clear();
    return out;
  }

private:
  /// The length of `s` up to the start of a UTF-8 sequence it cuts short.
  static size_t completePrefix(const std::string &s) {
    size_t n = s.size(), back = 0;
    while (back < n && back < 4 && (uint8_t(s[n - 1 - back]) & 0xC0) == 0x80)
      ++back;
    if (back == n)
      return n; // stray continuation bytes: nothing can complete them
    uint8_t lead = uint8_t(s[n - 1 - back]);
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return back + 1 < need ? n - 1 - back : n;
  }
  ByteTokenizer tokenizer_;
  std::string held_;
};

/// A checkpoint's tokenizer.json.
class JsonTokenizer final : public Tokenizer {
public:
  explicit JsonTokenizer(std::unique_ptr<HfTokenizer> hf) : hf_(std::move(hf)) {}
  std::vector<int32_t> encode(std::string_view text, bool addSpecial) const override {
    return hf_->encode(text, addSpecial);
  }
  std::string decode(const std::vector<int32_t> &ids) const override {
    return hf_->decode(ids, /*skipSpecialTokens=*/true);
  }
  std::unique_ptr<TextStream> stream() const override {
    struct Stream final : TextStream {
      explicit Stream(const HfTokenizer &hf) : decoder(hf, true) {}
      std::string push(int32_t id) override { return decoder.push(id); }
      std::string finish() override { return decoder.finish(); }
      StreamDecoder decoder;
    };
    return std::make_unique<Stream>(*hf_);
  }

private:
  std::unique_ptr<HfTokenizer> hf_;
};

} // namespace

Expected<std::shared_ptr<const Tokenizer>> Tokenizer::forPlan(const plan::Plan &plan) {
  const plan::TextSpec *text = plan.text();
  if (text && text->tokenizer_json() && text->tokenizer_json()->size()) {
    auto hf = HfTokenizer::fromJson(text->tokenizer_json()->string_view());
    if (!hf)
      return Status::error("the plan's " + hf.status().message());
    return std::shared_ptr<const Tokenizer>(std::make_shared<JsonTokenizer>(hf.take()));
  }
  auto bytes = ByteTokenizer::forPlan(plan);
  if (!bytes)
    return Status::error("this plan has no tokenizer (its checkpoint had neither a "
                         "tokenizer.json nor a ByT5Tokenizer)");
  return std::shared_ptr<const Tokenizer>(std::make_shared<ByteTokenizer>(*bytes));
}

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

std::vector<int32_t> ByteTokenizer::encode(std::string_view text, bool addSpecial) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() + 1);
  if (addSpecial)
    ids.push_back(start_);
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

std::unique_ptr<TextStream> ByteTokenizer::stream() const {
  return std::make_unique<ByteStream>(*this);
}

} // namespace moe::rt
