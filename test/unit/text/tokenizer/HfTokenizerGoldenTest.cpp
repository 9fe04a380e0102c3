//===- HfTokenizerGoldenTest.cpp - parity with Hugging Face tokenizers ----===//
//
// Every (tokenizer, string) pair of data/goldens.json, recorded from the
// `tokenizers` library by tools/make-tokenizer-goldens.py: encode with and
// without special tokens, decode with and without skipping them, and the
// stream decoder's pieces against decode.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/HfTokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

using moe::rt::HfTokenizer;
using moe::rt::StreamDecoder;
using nlohmann::json;

namespace {

std::string dataPath(const std::string &name) { return std::string(MOE_TOKENIZER_DATA_DIR) + "/" + name; }

const json &goldens() {
  static const json g = [] {
    std::ifstream in(dataPath("goldens.json"));
    return json::parse(in);
  }();
  return g;
}

const HfTokenizer &tokenizer(const std::string &name) {
  static std::map<std::string, std::unique_ptr<HfTokenizer>> loaded;
  auto &slot = loaded[name];
  if (!slot) {
    auto t = HfTokenizer::fromFile(dataPath(name + ".tokenizer.json"));
    if (!t)
      ADD_FAILURE() << t.status().message();
    else
      slot = t.take();
  }
  return *slot;
}

std::string streamed(const HfTokenizer &tok, const std::vector<int32_t> &ids, bool skip) {
  StreamDecoder stream(tok, skip);
  std::string text;
  for (int32_t id : ids)
    text += stream.push(id);
  return text + stream.finish();
}

class Golden : public testing::TestWithParam<std::string> {};

TEST_P(Golden, EncodeAndDecodeMatchHuggingFace) {
  const std::string name = GetParam();
  const HfTokenizer &tok = tokenizer(name);
  int checked = 0;
  for (const json &c : goldens()["cases"]) {
    if (c["tokenizer"] != name)
      continue;
    const std::string text = c["text"];
    SCOPED_TRACE(name + ": " + json(text).dump());
    auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text, true), ids);
    EXPECT_EQ(tok.encode(text, false), c["ids_no_special"].get<std::vector<int32_t>>());
    EXPECT_EQ(tok.decode(ids, true), c["decode"].get<std::string>());
    EXPECT_EQ(tok.decode(ids, false), c["decode_with_special"].get<std::string>());
    ++checked;
  }
  EXPECT_GE(checked, 40) << "goldens.json holds too few cases for " << name;
}

TEST_P(Golden, StreamDecodeConcatenatesToDecode) {
  const std::string name = GetParam();
  const HfTokenizer &tok = tokenizer(name);
  // Random ids too: byte-fallback runs that turn out not to be UTF-8 after
  // a valid start are held, not emitted in part (see StreamDecoder).
  for (const char *section : {"cases", "decode_cases"})
    for (const json &c : goldens()[section]) {
      if (c["tokenizer"] != name)
        continue;
      auto ids = c["ids"].get<std::vector<int32_t>>();
      SCOPED_TRACE(name + ": ids " + c["ids"].dump());
      EXPECT_EQ(streamed(tok, ids, true), c["decode"].get<std::string>());
      EXPECT_EQ(streamed(tok, ids, false), c["decode_with_special"].get<std::string>());
    }
}

TEST_P(Golden, RandomIdsDecodeAsHuggingFace) {
  const std::string name = GetParam();
  const HfTokenizer &tok = tokenizer(name);
  for (const json &c : goldens()["decode_cases"]) {
    if (c["tokenizer"] != name)
      continue;
    auto ids = c["ids"].get<std::vector<int32_t>>();
    SCOPED_TRACE(name + ": ids " + c["ids"].dump());
    EXPECT_EQ(tok.decode(ids, true), c["decode"].get<std::string>());
    EXPECT_EQ(tok.decode(ids, false), c["decode_with_special"].get<std::string>());
  }
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const json &n : goldens()["tokenizers"])
    out.push_back(n.get<std::string>());
  return out;
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Golden, testing::ValuesIn(names()),
                         [](const testing::TestParamInfo<std::string> &info) { return info.param; });

TEST(HfTokenizer, StreamHoldsPartialCharacters) {
  const HfTokenizer &tok = tokenizer("qwen2");
  // "😀" is four bytes; byte-level BPE spells it in several tokens.
  std::vector<int32_t> ids = tok.encode("😀", false);
  ASSERT_GT(ids.size(), 1u);
  StreamDecoder stream(tok);
  for (size_t i = 0; i + 1 < ids.size(); ++i)
    EXPECT_EQ(stream.push(ids[i]), "") << "emitted a partial character at token " << i;
  EXPECT_EQ(stream.push(ids.back()), "😀");
  EXPECT_EQ(stream.finish(), "");
}

TEST(HfTokenizer, StreamHoldsAByteRunUntilItEnds) {
  const HfTokenizer &tok = tokenizer("llama");
  // 'd' as <0x64>, then two bytes that make the run invalid: decode
  // replaces all three, so the 'd' must not have gone out on its own.
  std::vector<int32_t> ids = tok.encode("kind", false);
  for (const char *b : {"<0x64>", "<0xA4>", "<0xF7>"})
    ids.push_back(*tok.tokenToId(b));
  for (int32_t id : tok.encode(" him", false))
    ids.push_back(id);
  EXPECT_EQ(streamed(tok, ids, true), tok.decode(ids));
  EXPECT_NE(tok.decode(ids).find("kind\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"), std::string::npos);
}

TEST(HfTokenizer, StreamFinishReplacesIncompleteCharacter) {
  const HfTokenizer &tok = tokenizer("llama");
  // "<0xE6>" alone starts a three-byte character that never completes.
  auto byte = tok.tokenToId("<0xE6>");
  ASSERT_TRUE(byte.has_value());
  StreamDecoder stream(tok);
  EXPECT_EQ(stream.push(*byte), "");
  EXPECT_EQ(stream.finish(), tok.decode({*byte}));
  EXPECT_EQ(tok.decode({*byte}), "\xEF\xBF\xBD");
}

TEST(HfTokenizer, VocabularyLookups) {
  std::ifstream in(dataPath("qwen2.tokenizer.json"));
  json spec = json::parse(in);
  const HfTokenizer &tok = tokenizer("qwen2");
  for (const json &added : spec["added_tokens"]) {
    std::string content = added["content"];
    EXPECT_EQ(tok.tokenToId(content), added["id"].get<int32_t>()) << content;
    EXPECT_EQ(tok.idToToken(added["id"].get<int32_t>()), content);
    EXPECT_EQ(tok.isSpecial(added["id"].get<int32_t>()), added["special"].get<bool>());
  }
  for (auto it = spec["model"]["vocab"].begin(); it != spec["model"]["vocab"].end(); ++it) {
    EXPECT_EQ(tok.tokenToId(it.key()), it.value().get<int32_t>());
    EXPECT_EQ(tok.idToToken(it.value().get<int32_t>()), it.key());
  }
  EXPECT_EQ(tok.vocabSize(), int64_t(spec["model"]["vocab"].size()));
  EXPECT_FALSE(tok.idToToken(-1).has_value());
  EXPECT_FALSE(tok.tokenToId("definitely not a token").has_value());
}

TEST(HfTokenizer, InvalidUtf8InputIsReplacedNotFatal) {
  const HfTokenizer &tok = tokenizer("qwen2");
  EXPECT_EQ(tok.encode("a\xFF" "b", false), tok.encode("a\xEF\xBF\xBD" "b", false));
}

} // namespace
