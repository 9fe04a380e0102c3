//===- HfTokenizerNestingTest.cpp - deep tokenizer.json is refused --------===//
//
// A tokenizer.json comes with a downloaded checkpoint: untrusted. Its
// components nest through "Sequence" and are parsed, run and quoted in
// errors by recursion, so the file may nest at most kMaxJsonDepth arrays
// and objects (moe/runtime/JsonDepth.h). At the limit a nested component
// behaves as the same component alone; past it, or 100,000 deep, loading
// fails with the key named, never a crash.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/HfTokenizer.h"
#include "moe/runtime/JsonDepth.h"

#include <gtest/gtest.h>

#include <string>

using moe::rt::HfTokenizer;
using moe::rt::kMaxJsonDepth;

namespace {

const int kDeep = 100000;

std::string repeat(const std::string &s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += s;
  return out;
}

/// The text of a small tokenizer.json ("a", "b", "ab" and the merge "a b")
/// with `extra` members (", \"key\": value", ...). Deep files are written as
/// text: building them with nlohmann would copy and dump by recursion.
std::string tokenizerJson(const std::string &extra) {
  return R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
              "ignore_merges": false, "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]})" +
         extra + "}";
}

/// `leaf` inside `sequences` Sequence components whose list is `listKey`.
std::string inSequences(const std::string &listKey, const std::string &leaf, int sequences) {
  return repeat(R"({"type": "Sequence", ")" + listKey + R"(": [)", sequences) + leaf + repeat("]}", sequences);
}

std::string tooDeep(const std::string &key) {
  return "tokenizer.json: \"" + key + "\" nests deeper than the limit of " + std::to_string(kMaxJsonDepth) +
         " arrays and objects (the file's own included)";
}

struct Component {
  const char *key, *listKey, *leaf;
};

void PrintTo(const Component &c, std::ostream *os) { *os << c.key; }

class NestedComponent : public testing::TestWithParam<Component> {};

TEST_P(NestedComponent, AtTheLimitBehavesAsItsLeafAndPastItIsRefused) {
  const Component &c = GetParam();
  // The file, the component and, per Sequence, its list and the next
  // component: 2 + 2 * sequences levels.
  int sequences = (kMaxJsonDepth - 2) / 2;
  ASSERT_EQ(2 + 2 * sequences, kMaxJsonDepth);
  auto withComponent = [&](const std::string &component) {
    return HfTokenizer::fromJson(tokenizerJson(std::string(", \"") + c.key + "\": " + component));
  };
  auto alone = withComponent(c.leaf);
  ASSERT_TRUE(alone) << alone.status().message();
  auto nested = withComponent(inSequences(c.listKey, c.leaf, sequences));
  ASSERT_TRUE(nested) << nested.status().message();
  for (const char *text : {"ab ba", "AB BA", "abba", ""}) {
    EXPECT_EQ((*nested)->encode(text), (*alone)->encode(text)) << text;
    EXPECT_EQ((*nested)->decode((*alone)->encode(text)), (*alone)->decode((*alone)->encode(text))) << text;
  }
  for (int deeper : {sequences + 1, kDeep}) {
    auto refused = withComponent(inSequences(c.listKey, c.leaf, deeper));
    ASSERT_FALSE(refused) << deeper;
    EXPECT_EQ(refused.status().message(), tooDeep(c.key));
  }
}

INSTANTIATE_TEST_SUITE_P(Sequences, NestedComponent,
                         testing::Values(Component{"normalizer", "normalizers", R"({"type": "Lowercase"})"},
                                         Component{"pre_tokenizer", "pretokenizers", R"({"type": "Whitespace"})"},
                                         Component{"decoder", "decoders", R"({"type": "Fuse"})"},
                                         Component{"post_processor", "processors", R"({"type": "ByteLevel"})"}),
                         [](const testing::TestParamInfo<Component> &info) { return std::string(info.param.key); });

TEST(HfTokenizerNesting, TheLimitCountsEveryLevelOfTheFile) {
  // Arrays under a member nobody reads: the file is one level.
  auto arrays = [](int levels) { return repeat("[", levels) + repeat("]", levels); };
  auto atLimit = HfTokenizer::fromJson(tokenizerJson(", \"unread\": " + arrays(kMaxJsonDepth - 1)));
  ASSERT_TRUE(atLimit) << atLimit.status().message();
  EXPECT_EQ((*atLimit)->encode("abba"), (std::vector<int32_t>{2, 1, 0}));
  for (int levels : {kMaxJsonDepth, kDeep}) {
    auto refused = HfTokenizer::fromJson(tokenizerJson(", \"unread\": " + arrays(levels)));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.status().message(), tooDeep("unread"));
  }
  // Fields quoted whole in an error message (dumped by recursion) are
  // measured first too.
  std::string truncation = tokenizerJson("");
  truncation.replace(truncation.find("\"truncation\": null"), 18, "\"truncation\": " + arrays(kDeep));
  auto refused = HfTokenizer::fromJson(truncation);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().message(), tooDeep("truncation"));
}

} // namespace
