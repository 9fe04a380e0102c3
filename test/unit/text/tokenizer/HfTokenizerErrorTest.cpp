//===- HfTokenizerErrorTest.cpp - refusals and malformed tokenizer.json ---===//
//
// Each unsupported component is refused with its name in the message; a
// malformed or truncated file is an error, never a crash.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/HfTokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

using moe::rt::HfTokenizer;
using nlohmann::json;

namespace {

/// A minimal valid tokenizer.json: "a", "b" and the merge "a b".
json minimal() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
    "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": null,
              "continuing_subword_prefix": null, "end_of_word_suffix": null,
              "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}})");
}

/// The error of loading `spec`; a failure if it loads.
std::string errorOf(const json &spec) {
  auto tok = HfTokenizer::fromJson(spec.dump());
  if (tok)
    return "(loaded)";
  return tok.status().message();
}

TEST(HfTokenizerErrors, MinimalLoadsAndMerges) {
  auto tok = HfTokenizer::fromJson(minimal().dump());
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->encode("abba"), (std::vector<int32_t>{2, 1, 0}));
  // Legacy "a b" merges mean the same.
  json legacy = minimal();
  legacy["model"]["merges"] = {"a b"};
  auto tok2 = HfTokenizer::fromJson(legacy.dump());
  ASSERT_TRUE(tok2) << tok2.status().message();
  EXPECT_EQ((*tok2)->encode("abba"), (std::vector<int32_t>{2, 1, 0}));
}

struct Refusal {
  const char *pointer; ///< JSON pointer of the field to set
  const char *value;   ///< its new value
  const char *named;   ///< what the message must name
};

class Refused : public testing::TestWithParam<Refusal> {};

TEST_P(Refused, NamesTheComponent) {
  const Refusal &r = GetParam();
  json spec = minimal();
  spec[json::json_pointer(r.pointer)] = json::parse(r.value);
  std::string message = errorOf(spec);
  EXPECT_NE(message, "(loaded)") << r.pointer << " = " << r.value;
  EXPECT_NE(message.find(r.named), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "errors are one line: " << message;
}

INSTANTIATE_TEST_SUITE_P(
    Components, Refused,
    testing::Values(
        Refusal{"/model/type", R"("Unigram")", "model type \"Unigram\" is not supported"},
        Refusal{"/model/type", R"("WordPiece")", "\"WordPiece\""},
        Refusal{"/model/type", R"("WordLevel")", "\"WordLevel\""},
        Refusal{"/model/dropout", "0.1", "dropout"},
        Refusal{"/model/continuing_subword_prefix", R"("##")", "continuing_subword_prefix"},
        Refusal{"/model/end_of_word_suffix", R"("</w>")", "end_of_word_suffix"},
        Refusal{"/normalizer", R"({"type": "Precompiled", "precompiled_charsmap": ""})",
                "normalizer type \"Precompiled\""},
        Refusal{"/normalizer", R"({"type": "BertNormalizer"})", "\"BertNormalizer\""},
        Refusal{"/normalizer", R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Nmt"}]})",
                "\"Nmt\""},
        Refusal{"/pre_tokenizer", R"({"type": "BertPreTokenizer"})", "pre_tokenizer type \"BertPreTokenizer\""},
        Refusal{"/pre_tokenizer", R"({"type": "UnicodeScripts"})", "\"UnicodeScripts\""},
        Refusal{"/decoder", R"({"type": "WordPiece", "prefix": "##", "cleanup": true})",
                "decoder type \"WordPiece\""},
        Refusal{"/decoder", R"({"type": "CTC"})", "\"CTC\""},
        Refusal{"/post_processor", R"({"type": "Mystery"})", "post_processor type \"Mystery\""},
        Refusal{"/truncation", R"({"max_length": 8})", "truncation"},
        Refusal{"/padding", R"({"strategy": "BatchLongest"})", "padding"},
        Refusal{"/version", R"("2.0")", "version \"2.0\""}));

TEST(HfTokenizerErrors, MalformedFieldsAreErrors) {
  struct Case {
    const char *pointer, *value, *named;
  };
  for (const Case &c : std::vector<Case>{
           {"/model/vocab", R"(["a", "b"])", "vocab"},
           {"/model/vocab/a", R"("zero")", "vocab entry \"a\""},
           {"/model/vocab/a", "-1", "vocab entry \"a\""},
           {"/model/merges", R"(["a c"])", "\"c\", which is not in the vocab"},
           {"/model/merges", R"(["b a"])", "makes \"ba\""},
           {"/model/merges", R"(["ab"])", "not two tokens"},
           {"/model/merges", R"([["a"]])", "merge 1"},
           {"/model/merges", R"("a b")", "merges"},
           {"/model/unk_token", R"("<unk>")", "unk_token \"<unk>\" is not in the vocab"},
           {"/model/fuse_unk", R"("yes")", "fuse_unk"},
           {"/added_tokens", R"([{"id": 3, "content": "x"}])", "single_word"},
           {"/added_tokens", R"({"x": 1})", "added_tokens"},
           {"/pre_tokenizer", R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false})",
            "does not compile"},
           {"/pre_tokenizer", R"({"type": "Split", "pattern": {"Glob": "*"}, "behavior": "Isolated", "invert": false})",
            "pattern"},
           {"/pre_tokenizer", R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways", "invert": false})",
            "Sideways"},
           {"/pre_tokenizer", R"({"type": "Metaspace", "replacement": "ab"})", "one character"},
           {"/pre_tokenizer", R"({"type": "ByteLevel"})", "add_prefix_space"},
           {"/decoder", R"({"type": "Strip", "content": " ", "start": "1", "stop": 0})", "start"},
           {"/post_processor", R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {}})",
            "\"<s>\""},
           {"/normalizer", R"("NFC")", "normalizer"},
           {"/model", "[]", "model"},
       }) {
    json spec = minimal();
    spec[json::json_pointer(c.pointer)] = json::parse(c.value);
    std::string message = errorOf(spec);
    EXPECT_NE(message.find(c.named), std::string::npos)
        << c.pointer << " = " << c.value << ": " << message;
  }
  json noModel = minimal();
  noModel.erase("model");
  EXPECT_NE(errorOf(noModel).find("\"model\" is missing"), std::string::npos) << errorOf(noModel);
}

TEST(HfTokenizerErrors, TruncatedOrCorruptJsonIsAnError) {
  std::ifstream in(std::string(MOE_TOKENIZER_DATA_DIR) + "/llama.tokenizer.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string full = text.str();
  ASSERT_TRUE(HfTokenizer::fromJson(full));
  // Cut everywhere up to a few hundred bytes, then at sparser points.
  for (size_t cut = 0; cut < full.size() - 2; cut += cut < 400 ? 1 : 997) {
    auto tok = HfTokenizer::fromJson(std::string_view(full).substr(0, cut));
    ASSERT_FALSE(tok) << "a file cut at byte " << cut << " loaded";
    EXPECT_FALSE(tok.status().message().empty());
  }
  for (const char *bad : {"", "null", "42", "[]", "{\"model\": null}", "\xFF\xFE", "{\"model\": {\"vocab\": {}}}"})
    EXPECT_FALSE(HfTokenizer::fromJson(bad)) << bad;
  EXPECT_FALSE(HfTokenizer::fromFile("/nonexistent/tokenizer.json"));
}

} // namespace
