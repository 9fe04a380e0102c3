//===- HfTokenizer.h - Hugging Face tokenizer.json tokenizers ---*- C++ -*-===//
//
// Loads a Hugging Face `tokenizer.json` and encodes/decodes exactly as the
// `tokenizers` library does, for the BPE tokenizers of Qwen2/Qwen3-MoE,
// DeepSeek-V2/V3 (byte-level BPE with split regexes) and Mixtral/Llama
// (SentencePiece-style BPE with byte fallback), added and special tokens
// included. Components outside that set (Unigram, WordPiece, Precompiled
// normalizers, ...) are refused by name when the file is loaded, never
// ignored. The sources are in runtime/text/tokenizer.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_HFTOKENIZER_H
#define MOE_RUNTIME_HFTOKENIZER_H

#include "moe/abi/Status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moe::rt {

class HfTokenizer {
public:
  /// Parses the text of a tokenizer.json; an error names the unsupported
  /// component or the malformed field.
  static Expected<std::unique_ptr<HfTokenizer>> fromJson(std::string_view tokenizerJson);
  static Expected<std::unique_ptr<HfTokenizer>> fromFile(const std::string &path);
  ~HfTokenizer();

  /// `tokenizer.encode(text, add_special_tokens=...).ids`. Invalid UTF-8 in
  /// `text` is first replaced by U+FFFD (Python strings cannot hold it).
  /// Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool addSpecialTokens = true) const;
  /// `tokenizer.decode(ids, skip_special_tokens=...)`; unknown ids are
  /// skipped, as Hugging Face does.
  std::string decode(const std::vector<int32_t> &ids, bool skipSpecialTokens = true) const;

  std::optional<int32_t> tokenToId(std::string_view token) const;
  std::optional<std::string> idToToken(int32_t id) const;
  /// The model's vocabulary plus the added tokens not in it.
  int64_t vocabSize() const;
  /// Whether `id` is an added token marked `special`.
  bool isSpecial(int32_t id) const;

private:
  struct Impl;
  explicit HfTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Decodes ids one at a time for streaming generation: each push returns the
/// text that became complete, never a partial UTF-8 sequence, and the pieces
/// of push()... finish() concatenate to decode(all ids). Like the
/// `tokenizers` DecodeStream, it decodes a short window of recent ids, so
/// context-dependent decoders (the SentencePiece leading-space strip) stay
/// right. Unlike it, a run of byte-fallback tokens is held until it ends, so
/// that one that turns out not to be UTF-8 (decode replaces it whole, one
/// U+FFFD per byte) is never emitted in part.
class StreamDecoder {
public:
  explicit StreamDecoder(const HfTokenizer &tokenizer, bool skipSpecialTokens = true);
  /// The text completed by `id`; empty while a character is still partial.
  std::string push(int32_t id);
  /// What is left (an incomplete character becomes U+FFFD, as decode does).
  std::string finish();

private:
  const HfTokenizer &tokenizer_;
  bool skipSpecialTokens_;
  std::vector<int32_t> window_; ///< recent ids, decoded together
  std::string prefix_;          ///< decode of window_[0, prefixIndex_)
  size_t prefixIndex_ = 0;
};

} // namespace moe::rt

#endif
