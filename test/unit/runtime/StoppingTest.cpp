// Where generated sequences end: end-of-sequence tokens, stop token ids,
// stop strings (cut off, even across tokens, or kept), the ignore switch,
// min tokens. Expected values are worked out by hand from the byte
// tokenizer (token = byte + 3).
#include "moe/runtime/Stopping.h"

#include <gtest/gtest.h>

namespace {

using moe::rt::ByteTokenizer;
using moe::rt::FinishReason;
using moe::rt::StopOptions;
using moe::rt::StopRules;

std::vector<int32_t> bytes(const std::string &text) { return ByteTokenizer().encode(text); }

StopOptions strings(std::vector<std::string> s) {
  StopOptions o;
  o.strings = std::move(s);
  return o;
}

/// Feeds `tokens` one by one as a generator would; returns where it ended.
std::optional<FinishReason> feed(const StopRules &rules, const std::vector<int32_t> &tokens,
                                 std::vector<int32_t> &generated) {
  for (int32_t t : tokens) {
    generated.push_back(t);
    if (auto reason = rules.check(generated))
      return reason;
  }
  return std::nullopt;
}

TEST(Stopping, EndOfSequenceTokensEndAndStay) {
  StopRules rules({1, 13}, StopOptions{}, nullptr);
  std::vector<int32_t> generated;
  EXPECT_EQ(feed(rules, {50, 60, 13, 70}, generated), FinishReason::Eos);
  EXPECT_EQ(generated, (std::vector<int32_t>{50, 60, 13}));
  generated.clear();
  EXPECT_EQ(feed(StopRules({}, StopOptions{}, nullptr), {50, 13, 1}, generated), std::nullopt);
  EXPECT_EQ(generated.size(), 3u);
  StopOptions ignore;
  ignore.ignoreEos = true;
  generated.clear();
  EXPECT_EQ(feed(StopRules({1, 13}, ignore, nullptr), {50, 13, 1}, generated), std::nullopt);
}

TEST(Stopping, StopTokenIdsEndLikeEosEvenWhenEosIsIgnored) {
  StopOptions o;
  o.stopTokenIds = {60};
  o.ignoreEos = true;
  StopRules rules({1}, o, nullptr);
  std::vector<int32_t> generated;
  EXPECT_EQ(feed(rules, {50, 1, 60, 70}, generated), FinishReason::Eos);
  EXPECT_EQ(generated, (std::vector<int32_t>{50, 1, 60}));
}

TEST(Stopping, StopStringIsCutOffAcrossTokens) {
  StopRules rules({}, strings({"LORD", "\n\n"}), std::make_shared<ByteTokenizer>());
  std::vector<int32_t> generated;
  EXPECT_EQ(feed(rules, bytes("the LORD said"), generated), FinishReason::Stop);
  EXPECT_EQ(ByteTokenizer().decode(generated), "the ");
  generated.clear();
  EXPECT_EQ(feed(rules, bytes("a\n\nb"), generated), FinishReason::Stop);
  EXPECT_EQ(ByteTokenizer().decode(generated), "a");
  generated.clear();
  EXPECT_EQ(feed(rules, bytes("LOR D"), generated), std::nullopt);
}

TEST(Stopping, SpecialTokensInsideAStopStringAreDroppedWithIt) {
  // 2 (unk) decodes to nothing: "LO" <unk> "RD" still spells LORD.
  StopRules rules({}, strings({"LORD"}), std::make_shared<ByteTokenizer>());
  std::vector<int32_t> generated = bytes("xx");
  std::vector<int32_t> tail = bytes("LO");
  tail.push_back(2);
  for (int32_t t : bytes("RD"))
    tail.push_back(t);
  EXPECT_EQ(feed(rules, tail, generated), FinishReason::Stop);
  EXPECT_EQ(generated, bytes("xx"));
}

TEST(Stopping, EosWinsOverAStopStringEndingWithIt) {
  // Token 13 is '\n' and an end-of-sequence token: it ends as eos, kept.
  StopRules rules({13}, strings({"\n"}), std::make_shared<ByteTokenizer>());
  std::vector<int32_t> generated;
  EXPECT_EQ(feed(rules, bytes("ab\n"), generated), FinishReason::Eos);
  EXPECT_EQ(generated, bytes("ab\n"));
}

TEST(Stopping, IncludedStopStringsKeepTheirTokens) {
  StopOptions o = strings({"LORD"});
  o.includeStopString = true;
  StopRules rules({}, o, std::make_shared<ByteTokenizer>());
  std::vector<int32_t> generated;
  EXPECT_EQ(feed(rules, bytes("the LORD said"), generated), FinishReason::Stop);
  EXPECT_EQ(ByteTokenizer().decode(generated), "the LORD");
}

// vLLM's min_tokens: until 4 tokens are out a stop string does not end the
// sequence, and one that was complete by then never does ("ab" in tokens
// 1-2); one that ends after it does, even when it began before ("cd" in
// tokens 4-5).
TEST(Stopping, MinTokensHoldStopStringsBack) {
  StopOptions o = strings({"ab", "cd"});
  o.minTokens = 4;
  StopRules rules({}, o, std::make_shared<ByteTokenizer>());
  std::vector<int32_t> generated;
  EXPECT_EQ(feed(rules, bytes("abxxy"), generated), std::nullopt);
  generated.clear();
  EXPECT_EQ(feed(rules, bytes("abxcdy"), generated), FinishReason::Stop);
  EXPECT_EQ(ByteTokenizer().decode(generated), "abx");
  // Within the first 4 tokens "cd" is held back, and stays so.
  generated.clear();
  EXPECT_EQ(feed(rules, bytes("cdxxcd"), generated), FinishReason::Stop);
  EXPECT_EQ(ByteTokenizer().decode(generated), "cdxx");
}

TEST(Stopping, MinTokensMaskEndOfSequenceAndStopTokens) {
  StopOptions o;
  o.stopTokenIds = {60};
  o.ignoreEos = true; // vLLM masks the model's end tokens all the same
  o.minTokens = 3;
  moe::rt::MinTokens min = StopRules({1, 13}, o, nullptr).minTokens();
  EXPECT_EQ(min.count, 3);
  EXPECT_EQ(min.endTokens, (std::vector<int32_t>{1, 13, 60}));
  o.minTokens = 0;
  EXPECT_TRUE(StopRules({1, 13}, o, nullptr).minTokens().endTokens.empty());
}

TEST(Stopping, ReasonNames) {
  EXPECT_STREQ(moe::rt::finishReasonName(FinishReason::Length), "length");
  EXPECT_STREQ(moe::rt::finishReasonName(FinishReason::Eos), "eos");
  EXPECT_STREQ(moe::rt::finishReasonName(FinishReason::Stop), "stop");
}

} // namespace
