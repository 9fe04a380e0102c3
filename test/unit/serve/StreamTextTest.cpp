//===- StreamTextTest.cpp - text released as tokens arrive ----------------===//
//
// What moe-serve streams must add up to what it answers without streaming:
// whole UTF-8 characters only, nothing of a stop string, everything else.
// Tokens are bytes (the byte tokenizer), so every split point is tried.
#include "moe/serve/StreamText.h"

#include <gtest/gtest.h>

namespace {

using moe::rt::ByteTokenizer;
using moe::rt::FinishReason;
using moe::serve::StreamText;

/// A byte token standing for the model's end-of-sequence token in these
/// tests ('#'), so that its text would show if it were not dropped.
constexpr int32_t kEos = '#' + ByteTokenizer::kOffset;

/// Feeds `text` one byte token at a time (then the tokens `after`), then
/// finishes for `reason`; the pieces released.
std::vector<std::string> feed(const std::string &text, std::vector<std::string> stops,
                              FinishReason reason, moe::rt::StopOptions options = {},
                              std::vector<int32_t> after = {}) {
  ByteTokenizer bytes;
  options.strings = std::move(stops);
  StreamText s(bytes, options, /*eos=*/{kEos});
  std::vector<std::string> pieces;
  std::vector<int32_t> ids = bytes.encode(text);
  ids.insert(ids.end(), after.begin(), after.end());
  for (int32_t id : ids)
    pieces.push_back(s.add({id}));
  pieces.push_back(s.finish(reason));
  std::string all;
  for (const std::string &p : pieces)
    all += p;
  EXPECT_EQ(all, s.released());
  return pieces;
}

std::string joined(const std::vector<std::string> &pieces) {
  std::string all;
  for (const std::string &p : pieces)
    all += p;
  return all;
}

bool wholeUtf8(const std::string &s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    size_t n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (n == 0 || i + n > s.size())
      return false;
    i += n;
  }
  return true;
}

TEST(StreamText, ReleasesWholeCharactersAndEverythingInTheEnd) {
  const std::string text = "h\xC3\xA9llo \xF0\x9F\x98\x80 \xE4\xB8\x96";
  std::vector<std::string> pieces = feed(text, {}, FinishReason::Length);
  EXPECT_EQ(joined(pieces), text);
  for (const std::string &p : pieces)
    EXPECT_TRUE(wholeUtf8(p)) << p;
  EXPECT_EQ(pieces[1], "");          // the first byte of é alone: held
  EXPECT_EQ(pieces[2], "\xC3\xA9");  // released with its second
}

TEST(StreamText, NothingOfAStopStringIsReleased) {
  std::vector<std::string> pieces = feed("the LORD said", {"LORD"}, FinishReason::Stop);
  EXPECT_EQ(joined(pieces), "the ");
  // The engine stops at the D; the rest never comes. Held back so far:
  // "LOR" could begin the stop string.
  pieces = feed("the LORD", {"LORD"}, FinishReason::Stop);
  EXPECT_EQ(joined(pieces), "the ");
}

TEST(StreamText, HeldTextThatIsNoStopIsReleasedLater) {
  std::vector<std::string> pieces = feed("the LOT is", {"LORD"}, FinishReason::Length);
  EXPECT_EQ(joined(pieces), "the LOT is");
  // "the LO" is released only once the T shows no LORD begins there.
  std::string soFar;
  for (size_t i = 0; i < 6; ++i)
    soFar += pieces[i];
  EXPECT_EQ(soFar, "the");
}

TEST(StreamText, TheEarliestStopStringCuts) {
  EXPECT_EQ(joined(feed("a\n\nb LORD", {"LORD", "\n\n"}, FinishReason::Stop)), "a");
  EXPECT_EQ(joined(feed("a LORD\n\n", {"LORD", "\n\n"}, FinishReason::Stop)), "a ");
}

TEST(StreamText, TheTextOfTheTokenThatEndedTheSequenceIsLeftOut) {
  // '#' is the end-of-sequence token here: held back as it comes, dropped
  // when the sequence ended on it, shown when it did not (ignore_eos).
  std::vector<std::string> pieces = feed("amen", {}, FinishReason::Eos, {}, {kEos});
  EXPECT_EQ(joined(pieces), "amen");
  EXPECT_EQ(pieces.back(), "");
  moe::rt::StopOptions ignore;
  ignore.ignoreEos = true;
  EXPECT_EQ(joined(feed("a#b", {}, FinishReason::Length, ignore)), "a#b");
  // An end token in the middle (it did not end the sequence: ignored, or
  // masked below min_tokens) is text like any other.
  EXPECT_EQ(joined(feed("a#b", {}, FinishReason::Length)), "a#b");
  moe::rt::StopOptions keep;
  keep.includeStopString = true;
  EXPECT_EQ(joined(feed("amen", {}, FinishReason::Eos, keep, {kEos})), "amen#");
}

TEST(StreamText, StopTokenIdsEndLikeTheEndOfSequence) {
  moe::rt::StopOptions stop;
  stop.stopTokenIds = {'!' + ByteTokenizer::kOffset};
  EXPECT_EQ(joined(feed("hi!", {}, FinishReason::Eos, stop)), "hi");
}

TEST(StreamText, AKeptStopStringEndsTheText) {
  moe::rt::StopOptions keep;
  keep.includeStopString = true;
  std::vector<std::string> pieces = feed("the LORD said", {"LORD"}, FinishReason::Stop, keep);
  EXPECT_EQ(joined(pieces), "the LORD");
  // Streamed, the stop string is still held back until the end.
  std::string beforeEnd;
  for (size_t i = 0; i + 1 < pieces.size(); ++i)
    beforeEnd += pieces[i];
  EXPECT_EQ(beforeEnd.find("LORD"), std::string::npos);
}

TEST(StreamText, TokensCountAsReleasedOnceTheirTextIs) {
  ByteTokenizer bytes;
  moe::rt::StopOptions options;
  options.strings = {"xyz"};
  StreamText s(bytes, options, {kEos});
  s.add(bytes.encode("ab"));
  EXPECT_EQ(s.tokensReleased(), 0u); // the last two bytes may begin "xyz": held
  s.add(bytes.encode("cd"));
  EXPECT_EQ(s.released(), "ab");
  EXPECT_EQ(s.tokensReleased(), 2u);
  s.finish(FinishReason::Length);
  EXPECT_EQ(s.tokensReleased(), 4u);
}

} // namespace
