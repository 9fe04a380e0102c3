//===- HfTokenizer.cpp - load tokenizer.json, encode and decode -----------===//
//
// The pipeline of Hugging Face's TokenizerImpl::encode_single_sequence:
// added tokens are cut out and the rest normalized, each piece is
// pre-tokenized and run through the model, then the post-processor adds
// the template's special tokens.
//
//===----------------------------------------------------------------------===//
#include "moe/runtime/HfTokenizer.h"

#include "moe/runtime/JsonDepth.h"

#include "AddedTokens.h"
#include "Bpe.h"
#include "Decoder.h"
#include "Normalizer.h"
#include "PostProcessor.h"
#include "PreTokenizer.h"
#include "Unicode.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace moe::rt {

using namespace tok;

struct HfTokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> preTokenizer;
  std::unique_ptr<Bpe> model;
  std::unique_ptr<Decoder> decoder;
  std::unique_ptr<PostProcessor> postProcessor;
  AddedVocabulary added;

  /// Parses `json[key]` with `parse` unless it is absent or null.
  template <typename T, typename F>
  static Status optionalComponent(const Json &json, const char *key, F parse, std::unique_ptr<T> &out) {
    auto it = json.find(key);
    if (it == json.end() || it->is_null())
      return Status::ok();
    auto parsed = parse(*it);
    if (!parsed)
      return parsed.status();
    out = parsed.take();
    return Status::ok();
  }

  static Expected<std::unique_ptr<Impl>> parse(const Json &json);
};

Expected<std::unique_ptr<HfTokenizer::Impl>> HfTokenizer::Impl::parse(const Json &json) {
  if (!json.is_object())
    return Status::error("tokenizer.json: expected an object at the top level, found " +
                         std::string(json.type_name()));
  // Components nest (a Sequence holds components) and are parsed, run and
  // quoted in errors by recursion: bound the depth before any of that.
  if (std::optional<std::string> key = memberNestedTooDeep(json))
    return Status::error("tokenizer.json: \"" + *key + "\" nests deeper than the limit of " +
                         std::to_string(kMaxJsonDepth) + " arrays and objects (the file's own included)");
  if (json.contains("version")) {
    MOE_TOK_TRY(std::string version, field<std::string>(json, "version", "tokenizer"));
    if (version != "1.0")
      return Status::error("tokenizer.json: version \"" + version + "\" is not supported (supported: 1.0)");
  }
  // Truncation and padding change the ids; the runtime applies neither.
  for (const char *key : {"truncation", "padding"})
    if (json.contains(key) && !json[key].is_null())
      return Status::error(std::string("tokenizer.json: \"") + key + "\" is set (" + json[key].dump() +
                           "); the runtime does not " + (key[0] == 't' ? "truncate" : "pad") +
                           ": set it to null");
  auto impl = std::make_unique<Impl>();
  for (Status s : {optionalComponent(json, "normalizer", parseNormalizer, impl->normalizer),
                   optionalComponent(json, "pre_tokenizer", parsePreTokenizer, impl->preTokenizer),
                   optionalComponent(json, "decoder", parseDecoder, impl->decoder),
                   optionalComponent(json, "post_processor", parsePostProcessor, impl->postProcessor)})
    if (!s)
      return s;
  MOE_TOK_TRY(const Json *model, member(json, "model", "tokenizer"));
  MOE_TOK_TRY(impl->model, Bpe::parse(*model));
  if (json.contains("added_tokens") && !json["added_tokens"].is_null()) {
    MOE_TOK_TRY(impl->added, AddedVocabulary::parse(json["added_tokens"], *impl->model, impl->normalizer.get()));
  }
  return impl;
}

HfTokenizer::HfTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HfTokenizer::~HfTokenizer() = default;

Expected<std::unique_ptr<HfTokenizer>> HfTokenizer::fromJson(std::string_view tokenizerJson) {
  try {
    Json json = Json::parse(tokenizerJson.begin(), tokenizerJson.end());
    MOE_TOK_TRY(std::unique_ptr<Impl> impl, Impl::parse(json));
    return std::unique_ptr<HfTokenizer>(new HfTokenizer(std::move(impl)));
  } catch (const nlohmann::json::parse_error &e) {
    return Status::error(std::string("tokenizer.json is not valid JSON: ") + e.what());
  } catch (const nlohmann::json::exception &e) { // a type the field checks did not foresee
    return Status::error(std::string("tokenizer.json: malformed: ") + e.what());
  }
}

Expected<std::unique_ptr<HfTokenizer>> HfTokenizer::fromFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot read tokenizer '" + path + "': " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  auto tokenizer = fromJson(text.str());
  if (!tokenizer)
    return Status::error(path + ": " + tokenizer.status().message());
  return tokenizer;
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool addSpecialTokens) const {
  std::string lossy;
  if (!isValidUtf8(text))
    text = lossy = utf8Lossy(text);
  std::vector<int32_t> ids;
  for (Segment &segment : impl_->added.extractAndNormalize(text, impl_->normalizer.get())) {
    if (segment.id) {
      ids.push_back(*segment.id);
      continue;
    }
    std::vector<Piece> pieces{{std::move(segment.text), segment.atStart}};
    if (impl_->preTokenizer)
      impl_->preTokenizer->preTokenize(pieces);
    for (const Piece &piece : pieces)
      impl_->model->tokenize(piece.text, ids);
  }
  if (addSpecialTokens && impl_->postProcessor)
    impl_->postProcessor->process(ids);
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int32_t> &ids, bool skipSpecialTokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string *token = impl_->added.idToToken(id);
    if (!token)
      token = impl_->model->idToToken(id);
    if (!token || (skipSpecialTokens && impl_->added.isSpecialContent(*token)))
      continue;
    tokens.push_back(*token);
  }
  std::string text;
  if (impl_->decoder) {
    impl_->decoder->decodeChain(tokens);
    for (const std::string &t : tokens)
      text += t;
    return text;
  }
  for (size_t i = 0; i < tokens.size(); ++i)
    text += (i ? " " : "") + tokens[i];
  return text;
}

std::optional<int32_t> HfTokenizer::tokenToId(std::string_view token) const {
  if (auto id = impl_->added.tokenToId(token))
    return id;
  return impl_->model->tokenToId(token);
}

std::optional<std::string> HfTokenizer::idToToken(int32_t id) const {
  const std::string *token = impl_->added.idToToken(id);
  if (!token)
    token = impl_->model->idToToken(id);
  if (!token)
    return std::nullopt;
  return *token;
}

int64_t HfTokenizer::vocabSize() const {
  return impl_->model->size() + impl_->added.countOutside(*impl_->model);
}

bool HfTokenizer::isSpecial(int32_t id) const { return impl_->added.isSpecialId(id); }

} // namespace moe::rt
