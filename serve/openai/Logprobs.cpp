//===- Logprobs.cpp - logprobs in OpenAI's two forms ----------------------===//
#include "moe/serve/OpenAi.h"

namespace moe::serve {
namespace {

using json = nlohmann::ordered_json;

/// Characters (code points) of UTF-8 text; a stray byte counts as the one
/// replacement character it is shown as.
int64_t characters(const std::string &s) {
  int64_t n = 0;
  for (char c : s)
    n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

json bytesOf(const std::string &s) {
  json b = json::array();
  for (char c : s)
    b.push_back(int(uint8_t(c)));
  return b;
}

} // namespace

LogprobsWriter::LogprobsWriter(const rt::Tokenizer &tokenizer, bool chat)
    : tokenizer_(tokenizer), chat_(chat) {
  take();
}

std::string LogprobsWriter::text(int32_t token) const { return tokenizer_.decode({token}); }

void LogprobsWriter::addFirstPromptToken(int32_t token) {
  const std::string t = text(token);
  tokens_.push_back(t);
  logprobs_.push_back(nullptr);
  tops_.push_back(nullptr);
  offsets_.push_back(offset_);
  offset_ += characters(t);
}

void LogprobsWriter::add(const rt::LogprobEntry &entry) {
  const std::string chosen = text(entry.chosen.token);
  if (chat_) {
    json tops = json::array();
    for (const rt::TokenLogprob &t : entry.top) {
      const std::string s = text(t.token);
      tops.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", bytesOf(s)}});
    }
    content_.push_back({{"token", chosen},
                        {"logprob", entry.chosen.logprob},
                        {"bytes", bytesOf(chosen)},
                        {"top_logprobs", tops}});
    return;
  }
  // The k likeliest, and the chosen token whether it is one of them or
  // not (so up to k + 1 entries, as OpenAI's legacy API and vLLM give).
  json tops = json::object();
  for (const rt::TokenLogprob &t : entry.top)
    tops[text(t.token)] = t.logprob;
  if (!tops.contains(chosen))
    tops[chosen] = entry.chosen.logprob;
  tokens_.push_back(chosen);
  logprobs_.push_back(entry.chosen.logprob);
  tops_.push_back(tops);
  offsets_.push_back(offset_);
  offset_ += characters(chosen);
}

bool LogprobsWriter::empty() const { return chat_ ? content_.empty() : tokens_.empty(); }

json LogprobsWriter::take() {
  json out = chat_ ? json{{"content", content_}}
                   : json{{"tokens", tokens_},
                          {"token_logprobs", logprobs_},
                          {"top_logprobs", tops_},
                          {"text_offset", offsets_}};
  tokens_ = logprobs_ = tops_ = offsets_ = content_ = json::array();
  return out;
}

} // namespace moe::serve
