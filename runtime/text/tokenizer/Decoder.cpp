//===- Decoder.cpp - tokenizer.json decoders ------------------------------===//
#include "Decoder.h"

#include "ByteLevel.h"
#include "Unicode.h"

namespace moe::rt::tok {

namespace {

const char *const Replacement = "\xEF\xBF\xBD"; // U+FFFD

class Sequence final : public Decoder {
public:
  std::vector<std::unique_ptr<Decoder>> steps;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (const auto &step : steps)
      step->decodeChain(tokens);
  }
};

/// Every token's characters back to bytes (a token with a character outside
/// the byte alphabet keeps its own UTF-8), all joined, invalid UTF-8 replaced.
class ByteLevel final : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string bytes;
    for (const std::string &token : tokens)
      bytes += charsToBytes(token).value_or(token);
    tokens = {utf8Lossy(bytes)};
  }
};

class Replace final : public Decoder {
public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &token : tokens)
      token = pattern_.replaceAll(token, content_);
  }

private:
  Pattern pattern_;
  std::string content_;
};

/// Runs of `<0xNN>` tokens become their bytes; a run that is not valid UTF-8
/// becomes one U+FFFD per byte.
class ByteFallback final : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty())
        return;
      if (isValidUtf8(pending))
        out.push_back(pending);
      else
        out.insert(out.end(), pending.size(), Replacement);
      pending.clear();
    };
    for (std::string &token : tokens) {
      if (auto byte = parseByte(token)) {
        pending += char(*byte);
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
  }

private:
  /// "<0xNN>" as Rust's u8::from_str_radix(NN, 16) reads it (a leading '+'
  /// is accepted there).
  static std::optional<unsigned char> parseByte(const std::string &token) {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
      return std::nullopt;
    auto hex = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                 : -1;
    };
    int hi = hex(token[3]), lo = hex(token[4]);
    if (token[3] == '+' && lo >= 0)
      return static_cast<unsigned char>(lo);
    if (hi < 0 || lo < 0)
      return std::nullopt;
    return static_cast<unsigned char>(hi * 16 + lo);
  }
};

class Fuse final : public Decoder {
public:
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string all;
    for (const std::string &token : tokens)
      all += token;
    tokens = {all};
  }
};

/// Removes up to `start` leading and `stop` trailing `content` characters
/// from each token.
class Strip final : public Decoder {
public:
  Strip(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &token : tokens) {
      std::vector<size_t> offsets; // of each character, then the end
      std::vector<char32_t> chars;
      for (size_t i = 0; i < token.size();) {
        offsets.push_back(i);
        chars.push_back(nextCodePoint(token, i));
      }
      offsets.push_back(token.size());
      size_t begin = 0, end = chars.size();
      while (begin < start_ && begin < chars.size() && chars[begin] == content_)
        ++begin;
      for (size_t n = 0; n < stop_ && end > begin && chars[end - 1] == content_; ++n)
        --end;
      token = token.substr(offsets[begin], offsets[end] - offsets[begin]);
    }
  }

private:
  char32_t content_;
  size_t start_, stop_;
};

/// "▁" back to spaces; in the first token (unless prepend_scheme is never)
/// every "▁" is dropped, as Hugging Face does.
class Metaspace final : public Decoder {
public:
  Metaspace(char32_t replacement, bool dropFirst) : replacement_(replacement), dropFirst_(dropFirst) {}
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::string out;
      for (size_t i = 0; i < tokens[t].size();) {
        char32_t c = nextCodePoint(tokens[t], i);
        if (c != replacement_)
          appendUtf8(out, c);
        else if (t != 0 || !dropFirst_)
          out += ' ';
      }
      tokens[t] = std::move(out);
    }
  }

private:
  char32_t replacement_;
  bool dropFirst_;
};

} // namespace

Expected<std::unique_ptr<Decoder>> parseDecoder(const Json &json) {
  MOE_TOK_TRY(std::string type, typeOf(json, "decoder"));
  std::string where = "decoder " + type;
  if (type == "Sequence") {
    MOE_TOK_TRY(const Json *list, member(json, "decoders", where));
    if (!list->is_array())
      return jsonError(where, "field \"decoders\" must be an array");
    auto seq = std::make_unique<Sequence>();
    for (const Json &item : *list) {
      MOE_TOK_TRY(auto step, parseDecoder(item));
      seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<Decoder>(std::move(seq));
  }
  if (type == "ByteLevel")
    return std::unique_ptr<Decoder>(std::make_unique<ByteLevel>());
  if (type == "Replace") {
    MOE_TOK_TRY(Pattern pattern, patternField(json, where));
    MOE_TOK_TRY(std::string content, field<std::string>(json, "content", where));
    return std::unique_ptr<Decoder>(std::make_unique<Replace>(std::move(pattern), std::move(content)));
  }
  if (type == "ByteFallback")
    return std::unique_ptr<Decoder>(std::make_unique<ByteFallback>());
  if (type == "Fuse")
    return std::unique_ptr<Decoder>(std::make_unique<Fuse>());
  if (type == "Strip") {
    MOE_TOK_TRY(char32_t content, charField(json, "content", where));
    MOE_TOK_TRY(int64_t start, field<int64_t>(json, "start", where));
    MOE_TOK_TRY(int64_t stop, field<int64_t>(json, "stop", where));
    if (start < 0 || stop < 0)
      return jsonError(where, "start " + std::to_string(start) + " and stop " +
                                  std::to_string(stop) + " must not be negative");
    return std::unique_ptr<Decoder>(std::make_unique<Strip>(content, size_t(start), size_t(stop)));
  }
  if (type == "Metaspace") {
    MOE_TOK_TRY(char32_t replacement, charField(json, "replacement", where));
    MOE_TOK_TRY(std::string scheme, optionalField<std::string>(json, "prepend_scheme", "always", where));
    bool legacyNever = json.contains("add_prefix_space") && json["add_prefix_space"].is_boolean() &&
                       !json["add_prefix_space"].get<bool>();
    bool never = scheme == "never" || legacyNever;
    return std::unique_ptr<Decoder>(std::make_unique<Metaspace>(replacement, !never));
  }
  return unsupported("decoder", type, "Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace");
}

} // namespace moe::rt::tok
