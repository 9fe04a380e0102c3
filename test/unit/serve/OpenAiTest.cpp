//===- OpenAiTest.cpp - request bodies into engine requests, logprobs out -===//
//
// What moe-serve reads from a body (against the fields' definitions in
// OpenAI's and vLLM's APIs) and how it writes logprobs back. The model is
// the byte tokenizer (token = byte + 3) with a one-line chat template, so
// every expected prompt is written out by hand.
//
//===----------------------------------------------------------------------===//
#include "moe/serve/OpenAi.h"

#include <gtest/gtest.h>

using namespace moe;
using namespace moe::serve;
using json = nlohmann::ordered_json;

namespace {

class OpenAiTest : public ::testing::Test {
protected:
  OpenAiTest() {
    chat.emplace(rt::ChatTemplate::parse(
                     "{% for m in messages %}{{ m['role'] }}:{{ m['content'] }};{% endfor %}")
                     .take());
    model.name = "m";
    model.tokenizer = &tokenizer;
    model.chatTemplate = &*chat;
    model.eosTokens = {1};
    model.vocabSize = 259;
    model.maxContext = 64;
    model.maxPromptTokens = 48;
  }
  /// The body read as `chat` or not; the error's message, or "".
  std::string parse(const json &body, bool isChat = false) {
    request = ApiRequest();
    auto e = parseRequest(body.dump(), isChat, model, request);
    return e ? e->message : "";
  }
  std::vector<int32_t> bytes(const std::string &s) { return tokenizer.encode(s); }
  /// A prompt string as a completion reads it: the start token first.
  std::vector<int32_t> prompt(const std::string &s) { return tokenizer.encode(s, true); }

  rt::ByteTokenizer tokenizer;
  std::optional<rt::ChatTemplate> chat;
  ModelInfo model;
  ApiRequest request;
};

const json kBase = {{"model", "m"}, {"prompt", "ab"}};

} // namespace

TEST_F(OpenAiTest, DefaultMaxTokensIsCutToTheContext) {
  // 16 by default; a 60-token prompt (59 bytes and the start token)
  // leaves 4 of the 64.
  model.maxPromptTokens = 64;
  ASSERT_EQ(parse(kBase), "");
  EXPECT_EQ(request.prompts[0].maxNewTokens, 16);
  ASSERT_EQ(parse({{"model", "m"}, {"prompt", std::string(59, 'x')}}), "");
  EXPECT_EQ(request.prompts[0].prompt.size(), 60u);
  EXPECT_EQ(request.prompts[0].maxNewTokens, 4);
  // Asked for explicitly, past the context: refused.
  EXPECT_NE(parse({{"model", "m"}, {"prompt", std::string(60, 'x')}, {"max_tokens", 5}})
                .find("exceed the model's context"),
            std::string::npos);
  // A chat takes the rest of the context.
  ASSERT_EQ(parse({{"model", "m"}, {"messages", {{{"role", "u"}, {"content", "hi"}}}}}, true), "");
  EXPECT_EQ(request.prompts[0].prompt, bytes("u:hi;"));
  EXPECT_EQ(request.prompts[0].maxNewTokens, 64 - 5);
}

TEST_F(OpenAiTest, PromptsInEveryFormAndChoicesSeededInOrder) {
  ASSERT_EQ(parse({{"model", "m"}, {"prompt", {"a", "bc"}}, {"n", 3}, {"seed", 100}}), "");
  ASSERT_EQ(request.prompts.size(), 2u);
  EXPECT_EQ(request.prompts[1].prompt, prompt("bc"));
  std::vector<rt::GenerationRequest> all = choices(request);
  ASSERT_EQ(all.size(), 6u);
  for (size_t c = 0; c < 6; ++c) {
    EXPECT_EQ(all[c].prompt, prompt(c < 3 ? "a" : "bc")) << c;
    EXPECT_EQ(all[c].sampling.seed, 100 + c % 3) << c;
  }
  ASSERT_EQ(parse({{"model", "m"}, {"prompt", {{5, 6}, {7}}}}), "");
  EXPECT_EQ(request.prompts[1].prompt, std::vector<int32_t>{7});
  EXPECT_EQ(request.promptTexts[0], tokenizer.decode({5, 6}));
  EXPECT_NE(parse({{"model", "m"}, {"prompt", {1, 2, 259}}}).find("outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"prompt", json::array()}}).find("\"prompt\" must be"),
            std::string::npos);
  // At most 64 choices a request.
  EXPECT_NE(parse({{"model", "m"}, {"prompt", json(std::vector<std::string>(33, "a"))}, {"n", 2}})
                .find("make 66 choices"),
            std::string::npos);
}

TEST_F(OpenAiTest, SamplingAndStoppingFieldsReachTheEngine) {
  ASSERT_EQ(parse({{"model", "m"},
                   {"prompt", "ab"},
                   {"temperature", 0.5},
                   {"top_p", 0.9},
                   {"top_k", -1},
                   {"min_p", 0.05},
                   {"presence_penalty", 1.5},
                   {"frequency_penalty", -0.5},
                   {"repetition_penalty", 1.2},
                   {"stop", {"x", "yz"}},
                   {"stop_token_ids", {7, 8}},
                   {"min_tokens", 3},
                   {"include_stop_str_in_output", true},
                   {"ignore_eos", true}}),
            "");
  const rt::GenerationRequest &g = request.prompts[0];
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.topP, 0.9f);
  EXPECT_EQ(g.sampling.topK, 0);
  EXPECT_FLOAT_EQ(g.sampling.minP, 0.05f);
  EXPECT_FLOAT_EQ(g.sampling.presencePenalty, 1.5f);
  EXPECT_FLOAT_EQ(g.sampling.frequencyPenalty, -0.5f);
  EXPECT_FLOAT_EQ(g.sampling.repetitionPenalty, 1.2f);
  EXPECT_EQ(g.stop.strings, (std::vector<std::string>{"x", "yz"}));
  EXPECT_EQ(g.stop.stopTokenIds, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(g.stop.minTokens, 3);
  EXPECT_TRUE(g.stop.includeStopString);
  EXPECT_TRUE(g.stop.ignoreEos);
  // OpenAI's default temperature is 1, not greedy.
  ASSERT_EQ(parse(kBase), "");
  EXPECT_FLOAT_EQ(request.prompts[0].sampling.temperature, 1.0f);
  // Ranges are the APIs'.
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "a"}, {"repetition_penalty", 0}}).find("(0, 10]"),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "a"}, {"presence_penalty", 2.5}}).find("[-2, 2]"),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "a"}, {"min_tokens", 20}, {"max_tokens", 10}})
                .find("\"min_tokens\" (20) exceeds"),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "a"}, {"stop_token_ids", {300}}})
                .find("stop token id 300"),
            std::string::npos);
}

TEST_F(OpenAiTest, LogprobsAndEcho) {
  ASSERT_EQ(parse({{"model", "m"}, {"prompt", "ab"}, {"logprobs", 3}, {"echo", true},
                   {"max_tokens", 0}}),
            "");
  EXPECT_EQ(request.logprobs, 3);
  EXPECT_TRUE(request.echo);
  EXPECT_EQ(request.prompts[0].logprobs, 3);
  EXPECT_EQ(request.prompts[0].promptLogprobs, 3);
  EXPECT_EQ(request.prompts[0].maxNewTokens, 0);
  // Scoring only needs echo and logprobs both.
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "ab"}, {"max_tokens", 0}}).find("only scores"),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "ab"}, {"logprobs", 21}}).find("[0, 20]"),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "ab"}, {"logprobs", true}}).find("chat form"),
            std::string::npos);
  // Chat: a flag and a count.
  const json messages = {{{"role", "u"}, {"content", "hi"}}};
  ASSERT_EQ(parse({{"model", "m"}, {"messages", messages}, {"logprobs", true},
                   {"top_logprobs", 2}},
                  true),
            "");
  EXPECT_EQ(request.logprobs, 2);
  EXPECT_FALSE(request.prompts[0].promptLogprobs);
  EXPECT_NE(parse({{"model", "m"}, {"messages", messages}, {"top_logprobs", 2}}, true)
                .find("needs \"logprobs\": true"),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"messages", messages}, {"echo", true}}, true)
                .find("unknown field \"echo\""),
            std::string::npos);
}

TEST_F(OpenAiTest, FieldsThatCannotChangeTheAnswerAreAcceptedAndNamed) {
  const json messages = {{{"role", "u"}, {"content", "hi"}}};
  ASSERT_EQ(parse({{"model", "m"},
                   {"messages", messages},
                   {"metadata", {{"k", "v"}}},
                   {"store", false},
                   {"user", "u1"},
                   {"reasoning_effort", "low"},
                   {"parallel_tool_calls", false},
                   {"service_tier", "auto"},
                   {"response_format", {{"type", "text"}}},
                   {"tool_choice", "auto"},
                   {"logit_bias", json::object()},
                   {"stream", true},
                   {"stream_options", {{"include_usage", true}}}},
                  true),
            "");
  EXPECT_EQ(request.ignored, (std::vector<std::string>{"metadata", "store", "user",
                                                       "reasoning_effort",
                                                       "parallel_tool_calls", "service_tier"}));
  EXPECT_TRUE(request.includeUsage);
}

TEST_F(OpenAiTest, FieldsThatWouldChangeItAreRefusedByName) {
  const json messages = {{{"role", "u"}, {"content", "hi"}}};
  auto chatWith = [&](const char *key, json v) {
    json b = {{"model", "m"}, {"messages", messages}};
    b[key] = v;
    return parse(b, true);
  };
  EXPECT_NE(chatWith("response_format", {{"type", "json_object"}}).find("\"response_format\""),
            std::string::npos);
  EXPECT_NE(chatWith("tool_choice", "required").find("\"tool_choice\""), std::string::npos);
  EXPECT_NE(chatWith("tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}})
                .find("forcing a tool call"),
            std::string::npos);
  EXPECT_NE(chatWith("logit_bias", {{"5", 10}}).find("\"logit_bias\" is not supported"),
            std::string::npos);
  EXPECT_NE(chatWith("functions", json::array({{{"name", "f"}}})).find("\"functions\""),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "a"}, {"best_of", 2}}).find("\"best_of\""),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "a"}, {"suffix", "z"}}).find("\"suffix\""),
            std::string::npos);
  EXPECT_NE(parse({{"model", "m"}, {"prompt", "a"}, {"frobnicate", 1}}).find("unknown field"),
            std::string::npos);
}

TEST_F(OpenAiTest, DeepJsonIsRefusedBeforeAnythingWalksIt) {
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ApiRequest r;
  auto e = parseRequest("{\"model\": \"m\", \"tools\": " + deep + "}", true, model, r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("nests more than 128"), std::string::npos);
  // Deep, then a key after it: ordered_json would copy the deep value
  // (recursively) as the object grows, if it were ever built.
  e = parseRequest("{\"model\": \"m\", \"messages\": [{\"role\": \"u\", \"content\": " + deep +
                       "}], \"max_tokens\": 2}",
                   true, model, r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("nests more than 128"), std::string::npos);
  // 128 deep is still read (then refused for what it is, not its depth).
  std::string ok = std::string(127, '[') + std::string(127, ']');
  e = parseRequest("{\"model\": \"m\", \"prompt\": \"a\", \"metadata\": " + ok + "}", false,
                   model, r);
  EXPECT_FALSE(e) << e->message;
  e = parseRequest("{\"model\": \"m\", \"prompt\": \"a\", \"metadata\": [" + ok + "]}", false,
                   model, r);
  ASSERT_TRUE(e); // 129
  EXPECT_NE(e->message.find("nests more than 128"), std::string::npos);
}

TEST_F(OpenAiTest, CompletionLogprobsHoldTheChosenTokenAmongTheAlternatives) {
  LogprobsWriter w(tokenizer, /*chat=*/false);
  w.addFirstPromptToken(bytes("A")[0]);
  rt::LogprobEntry e;
  e.chosen = {bytes("b")[0], -2.5f};
  e.top = {{bytes("c")[0], -0.5f}, {bytes("d")[0], -1.0f}};
  w.add(e);
  json out = w.take();
  EXPECT_EQ(out["tokens"], json({"A", "b"}));
  EXPECT_EQ(out["token_logprobs"][0], nullptr);
  EXPECT_FLOAT_EQ(out["token_logprobs"][1].get<float>(), -2.5f);
  EXPECT_EQ(out["top_logprobs"][0], nullptr);
  EXPECT_EQ(out["top_logprobs"][1].size(), 3u); // c, d and the chosen b
  EXPECT_FLOAT_EQ(out["top_logprobs"][1]["b"].get<float>(), -2.5f);
  EXPECT_EQ(out["text_offset"], json({0, 1}));
  EXPECT_TRUE(w.empty()); // take() started anew
}

TEST_F(OpenAiTest, ChatLogprobsAreContentEntriesWithBytes) {
  LogprobsWriter w(tokenizer, /*chat=*/true);
  rt::LogprobEntry e;
  e.chosen = {int32_t(0xC3 + rt::ByteTokenizer::kOffset), -0.25f}; // half of 'é'
  e.top = {{int32_t(0xC3 + rt::ByteTokenizer::kOffset), -0.25f}};
  w.add(e);
  json out = w.take();
  ASSERT_EQ(out["content"].size(), 1u);
  const json &c = out["content"][0];
  EXPECT_EQ(c["bytes"], json({0xC3}));
  EXPECT_FLOAT_EQ(c["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(c["top_logprobs"].size(), 1u);
  EXPECT_EQ(c["top_logprobs"][0]["bytes"], json({0xC3}));
}
