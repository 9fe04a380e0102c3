//===- PostProcessor.cpp - tokenizer.json post-processors -----------------===//
#include "PostProcessor.h"

namespace moe::rt::tok {

namespace {

class Sequence final : public PostProcessor {
public:
  std::vector<std::unique_ptr<PostProcessor>> steps;
  void process(std::vector<int32_t> &ids) const override {
    for (const auto &step : steps)
      step->process(ids);
  }
};

/// ByteLevel only trims offsets: ids pass unchanged.
class Identity final : public PostProcessor {
public:
  void process(std::vector<int32_t> &) const override {}
};

/// The single-sequence template: before + the sequence + after. Bert and
/// Roberta processing are the template [cls] $A [sep].
class Template final : public PostProcessor {
public:
  Template(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t> &ids) const override {
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

private:
  std::vector<int32_t> before_, after_;
};

Expected<std::vector<int32_t>> specialIds(const Json &specialTokens, const std::string &name,
                                          const std::string &where) {
  if (!specialTokens.is_object() || !specialTokens.contains(name))
    return jsonError(where, "template names special token \"" + name +
                                "\", which is not in \"special_tokens\"");
  MOE_TOK_TRY(const Json *ids, member(specialTokens[name], "ids", where));
  std::vector<int32_t> out;
  if (!ids->is_array())
    return jsonError(where, "special token \"" + name + "\" has \"ids\" " + ids->dump() +
                                ", not an array");
  for (const Json &id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      return jsonError(where, "special token \"" + name + "\" has id " + id.dump());
    out.push_back(id.get<int32_t>());
  }
  return out;
}

Expected<std::unique_ptr<PostProcessor>> parseTemplate(const Json &json, const std::string &where) {
  MOE_TOK_TRY(const Json *single, member(json, "single", where));
  MOE_TOK_TRY(const Json *specialTokens, member(json, "special_tokens", where));
  if (!single->is_array())
    return jsonError(where, "field \"single\" must be an array of pieces, found " + single->dump());
  std::vector<int32_t> before, after;
  bool seenSequence = false;
  for (const Json &piece : *single) {
    if (piece.is_object() && piece.contains("SpecialToken")) {
      MOE_TOK_TRY(std::string name, field<std::string>(piece["SpecialToken"], "id", where));
      MOE_TOK_TRY(std::vector<int32_t> ids, specialIds(*specialTokens, name, where));
      std::vector<int32_t> &side = seenSequence ? after : before;
      side.insert(side.end(), ids.begin(), ids.end());
    } else if (piece.is_object() && piece.contains("Sequence")) {
      MOE_TOK_TRY(std::string id, field<std::string>(piece["Sequence"], "id", where));
      if (id != "A" || seenSequence)
        return jsonError(where, "the single template must hold sequence A once, found " + single->dump());
      seenSequence = true;
    } else {
      return jsonError(where, "template piece " + piece.dump() +
                                  " is neither {\"SpecialToken\": ...} nor {\"Sequence\": ...}");
    }
  }
  if (!seenSequence)
    return jsonError(where, "the single template does not hold sequence A: " + single->dump());
  return std::unique_ptr<PostProcessor>(std::make_unique<Template>(std::move(before), std::move(after)));
}

/// ["[CLS]", 101] -> 101
Expected<int32_t> tokenPairId(const Json &json, const std::string &key, const std::string &where) {
  MOE_TOK_TRY(const Json *pair, member(json, key, where));
  if (!pair->is_array() || pair->size() != 2 || !(*pair)[1].is_number_integer())
    return jsonError(where, "field \"" + key + "\" must be [token, id], found " + pair->dump());
  return (*pair)[1].get<int32_t>();
}

} // namespace

Expected<std::unique_ptr<PostProcessor>> parsePostProcessor(const Json &json) {
  MOE_TOK_TRY(std::string type, typeOf(json, "post_processor"));
  std::string where = "post_processor " + type;
  if (type == "Sequence") {
    MOE_TOK_TRY(const Json *list, member(json, "processors", where));
    if (!list->is_array())
      return jsonError(where, "field \"processors\" must be an array");
    auto seq = std::make_unique<Sequence>();
    for (const Json &item : *list) {
      MOE_TOK_TRY(auto step, parsePostProcessor(item));
      seq->steps.push_back(std::move(step));
    }
    return std::unique_ptr<PostProcessor>(std::move(seq));
  }
  if (type == "ByteLevel")
    return std::unique_ptr<PostProcessor>(std::make_unique<Identity>());
  if (type == "TemplateProcessing")
    return parseTemplate(json, where);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    MOE_TOK_TRY(int32_t cls, tokenPairId(json, "cls", where));
    MOE_TOK_TRY(int32_t sep, tokenPairId(json, "sep", where));
    return std::unique_ptr<PostProcessor>(
        std::make_unique<Template>(std::vector<int32_t>{cls}, std::vector<int32_t>{sep}));
  }
  return unsupported("post_processor", type,
                     "Sequence, ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing");
}

} // namespace moe::rt::tok
