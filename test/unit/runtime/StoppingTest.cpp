// Where generated sequences end: end-of-sequence tokens, stop strings (cut
// off, even across tokens), the ignore switch. Expected values are worked
// out by hand from the byte tokenizer (token = byte + 3).
#include "moe/runtime/Stopping.h"

#include <gtest/gtest.h>

namespace {

using moe::rt::ByteTokenizer;
using moe::rt::FinishReason;
using moe::rt::StopRules;

std::vector<int32_t> bytes(const std::string &text) { return ByteTokenizer().encode(text); }

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
  StopRules rules({1, 13}, {}, nullptr);
  std::vector<int32_t> generated;
  EXPECT_EQ(feed(rules, {50, 60, 13, 70}, generated), FinishReason::Eos);
  EXPECT_EQ(generated, (std::vector<int32_t>{50, 60, 13}));
  generated.clear();
  EXPECT_EQ(feed(StopRules({}, {}, nullptr), {50, 13, 1}, generated), std::nullopt);
  EXPECT_EQ(generated.size(), 3u);
}

TEST(Stopping, StopStringIsCutOffAcrossTokens) {
  StopRules rules({}, {"LORD", "\n\n"}, std::make_shared<ByteTokenizer>());
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
  StopRules rules({}, {"LORD"}, std::make_shared<ByteTokenizer>());
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
  StopRules rules({13}, {"\n"}, std::make_shared<ByteTokenizer>());
  std::vector<int32_t> generated;
  EXPECT_EQ(feed(rules, bytes("ab\n"), generated), FinishReason::Eos);
  EXPECT_EQ(generated, bytes("ab\n"));
}

TEST(Stopping, ReasonNames) {
  EXPECT_STREQ(moe::rt::finishReasonName(FinishReason::Length), "length");
  EXPECT_STREQ(moe::rt::finishReasonName(FinishReason::Eos), "eos");
  EXPECT_STREQ(moe::rt::finishReasonName(FinishReason::Stop), "stop");
}

} // namespace
