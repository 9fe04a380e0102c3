//===- HfConfig.cpp - a Hugging Face MoE config.json, normalised ----------===//
#include "compiler/import/HfConfig.h"
#include "compiler/import/Safetensors.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

using json = nlohmann::json;

namespace moe {

namespace {

/// Typed access to config.json with one-line errors that name file and key.
class Reader {
public:
  Reader(const json &j, const std::string &path, const std::string &type)
      : j_(j), path_(path), type_(type) {}

  [[noreturn]] void fail(const std::string &what) const {
    throw InputError(path_ + ": " + what);
  }

  bool has(const char *key) const {
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }

  int64_t integer(const char *key) const {
    if (!has(key))
      fail("missing key '" + std::string(key) + "' (required for model_type " +
           type_ + ")");
    return asInteger(key, j_.at(key));
  }
  int64_t integer(const char *key, int64_t dflt) const {
    return has(key) ? asInteger(key, j_.at(key)) : dflt;
  }
  /// A required integer > 0.
  int64_t positive(const char *key) const { return check(key, integer(key)); }
  int64_t positive(const char *key, int64_t dflt) const {
    return check(key, integer(key, dflt));
  }

  double number(const char *key, double dflt) const {
    if (!has(key))
      return dflt;
    const json &v = j_.at(key);
    if (!v.is_number())
      mistyped(key, "a number", v);
    return v.get<double>();
  }
  bool boolean(const char *key, bool dflt) const {
    if (!has(key))
      return dflt;
    const json &v = j_.at(key);
    if (!v.is_boolean())
      mistyped(key, "true or false", v);
    return v.get<bool>();
  }
  std::string string(const char *key, const std::string &dflt) const {
    if (!has(key))
      return dflt;
    const json &v = j_.at(key);
    if (!v.is_string())
      mistyped(key, "a string", v);
    return v.get<std::string>();
  }
  std::vector<int64_t> integers(const char *key) const {
    std::vector<int64_t> out;
    if (!has(key))
      return out;
    const json &v = j_.at(key);
    if (!v.is_array())
      mistyped(key, "a list of integers", v);
    for (const json &e : v)
      out.push_back(asInteger(key, e));
    return out;
  }
  const json &object(const char *key) const {
    static const json null;
    if (!has(key))
      return null;
    const json &v = j_.at(key);
    if (!v.is_object())
      mistyped(key, "an object", v);
    return v;
  }

private:
  [[noreturn]] void mistyped(const char *key, const char *wanted,
                             const json &got) const {
    std::string text = got.dump();
    if (text.size() > 40)
      text = text.substr(0, 37) + "...";
    fail("key '" + std::string(key) + "' must be " + wanted + ", got " + text);
  }
  int64_t asInteger(const char *key, const json &v) const {
    if (!v.is_number_integer())
      mistyped(key, "an integer", v);
    return v.get<int64_t>();
  }
  int64_t check(const char *key, int64_t v) const {
    if (v <= 0)
      fail("key '" + std::string(key) + "' must be positive, got " +
           std::to_string(v));
    if (v > largest(key))
      fail("key '" + std::string(key) + "' is " + std::to_string(v) +
           ", above the largest this compiler accepts (" + std::to_string(largest(key)) + ")");
    return v;
  }
  /// Bounds that keep every tensor's element count (at most experts x 2^20
  /// x 2^20) and every loop over layers and experts far from overflow or
  /// hours of work; real checkpoints are orders of magnitude inside them.
  static int64_t largest(const std::string &key) {
    if (key == "num_hidden_layers")
      return 1024;
    if (key == "num_local_experts" || key == "num_experts" || key == "n_routed_experts" ||
        key == "n_shared_experts")
      return 16384;
    if (key == "max_position_embeddings" || key == "sliding_window")
      return int64_t(1) << 24;
    return int64_t(1) << 20;
  }

  const json &j_;
  std::string path_, type_;
};

void readGqaAttention(const Reader &r, HfConfig &c) {
  c.numHeads = r.positive("num_attention_heads");
  c.numKvHeads = r.positive("num_key_value_heads", c.numHeads);
  if (c.numHeads % c.numKvHeads != 0)
    r.fail("num_attention_heads " + std::to_string(c.numHeads) +
           " is not a multiple of num_key_value_heads " +
           std::to_string(c.numKvHeads));
  if (!r.has("head_dim") && c.hiddenSize % c.numHeads != 0)
    r.fail("hidden_size " + std::to_string(c.hiddenSize) +
           " is not a multiple of num_attention_heads " +
           std::to_string(c.numHeads) + "; set 'head_dim'");
  c.headDim = r.positive("head_dim", c.hiddenSize / c.numHeads);
}

/// MLA dimensions and the softmax scale, YaRN mscale included (as in
/// transformers' DeepseekV3Attention).
void readMlaAttention(const Reader &r, HfConfig &c) {
  c.mla = true;
  c.numHeads = r.positive("num_attention_heads");
  c.numKvHeads = c.numHeads;
  c.qLoraRank = r.has("q_lora_rank") ? r.positive("q_lora_rank") : 0;
  c.kvLoraRank = r.positive("kv_lora_rank");
  c.qkNopeHeadDim = r.positive("qk_nope_head_dim");
  c.qkRopeHeadDim = r.positive("qk_rope_head_dim");
  c.vHeadDim = r.positive("v_head_dim");
  if (c.qkRopeHeadDim % 2 != 0)
    r.fail("qk_rope_head_dim must be even, got " +
           std::to_string(c.qkRopeHeadDim));
  c.headDim = c.qkNopeHeadDim + c.qkRopeHeadDim;
  c.softmaxScale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
  if (c.ropeScaling.is_object()) {
    double mscaleAllDim = c.ropeScaling.value("mscale_all_dim", 0.0);
    double factor = c.ropeScaling.value("factor", 1.0);
    if (mscaleAllDim != 0 && factor > 1) {
      double mscale = 0.1 * mscaleAllDim * std::log(factor) + 1.0;
      c.softmaxScale *= mscale * mscale;
    }
  }
}

/// RoPE base and scaling: transformers v4 writes `rope_theta` and
/// `rope_scaling`; v5 writes one `rope_parameters` object holding both.
void readRope(const Reader &r, HfConfig &c) {
  double dflt = c.family == Family::Mixtral ? 1e6 : 1e4;
  json scaling = r.object("rope_scaling");
  c.ropeTheta = r.number("rope_theta", dflt);
  const json &params = r.object("rope_parameters");
  if (!params.is_null()) {
    scaling = params;
    json theta = params.value("rope_theta", json(c.ropeTheta));
    if (!theta.is_number())
      r.fail("rope_parameters.rope_theta must be a number, got " + theta.dump());
    c.ropeTheta = theta.get<double>();
  }
  if (c.ropeTheta <= 0)
    r.fail("rope_theta must be positive, got " + std::to_string(c.ropeTheta));
  if (scaling.is_null())
    return;
  json kind = scaling.contains("rope_type") ? scaling["rope_type"]
                                            : scaling.value("type", json());
  if (!kind.is_string())
    r.fail("rope scaling needs a string 'rope_type' (or 'type'), got " +
           scaling.dump());
  if (kind == "default")
    return;
  auto factor = scaling.find("factor");
  if (factor != scaling.end() && (!factor->is_number() || *factor <= 0))
    r.fail("rope scaling factor must be a positive number, got " +
           factor->dump());
  scaling.erase("rope_theta");
  c.ropeScaling = scaling;
}

void readRouter(const Reader &r, HfConfig &c, const char *expertsKey) {
  c.numExperts = r.positive(expertsKey);
  c.topK = r.positive("num_experts_per_tok");
  if (c.topK > c.numExperts)
    r.fail("num_experts_per_tok " + std::to_string(c.topK) + " exceeds " +
           expertsKey + " " + std::to_string(c.numExperts));
  c.moeIntermediateSize = r.positive("moe_intermediate_size");
}

void readQwen(const Reader &r, HfConfig &c) {
  readGqaAttention(r, c);
  c.intermediateSize = r.positive("intermediate_size");
  readRouter(r, c, r.has("num_experts") ? "num_experts" : "num_local_experts");
  c.normTopkProb = r.boolean("norm_topk_prob", false);
  int64_t step = r.positive("decoder_sparse_step", 1);
  std::vector<int64_t> denseOnly = r.integers("mlp_only_layers");
  for (int64_t i = 0; i < c.numLayers; ++i)
    c.sparseLayer.push_back((i + 1) % step == 0 &&
                            std::find(denseOnly.begin(), denseOnly.end(), i) ==
                                denseOnly.end());
  if (r.boolean("use_sliding_window", false))
    c.slidingWindow = r.positive("sliding_window");
  if (c.family == Family::Qwen2Moe) {
    c.qkvBias = r.boolean("qkv_bias", true);
    c.sharedIntermediateSize = r.positive("shared_expert_intermediate_size");
    c.sharedExpertGate = true;
  } else {
    c.qkvBias = r.boolean("attention_bias", false);
    c.qkNorm = true;
  }
}

void readDeepseek(const Reader &r, HfConfig &c) {
  readMlaAttention(r, c);
  if (r.boolean("attention_bias", false))
    r.fail("attention_bias true is not supported for MLA models");
  c.intermediateSize = r.positive("intermediate_size");
  readRouter(r, c, "n_routed_experts");
  bool v3 = c.family == Family::DeepseekV3;
  c.sharedIntermediateSize =
      (r.has("n_shared_experts") && r.integer("n_shared_experts") != 0
           ? r.positive("n_shared_experts")
           : 0) *
      c.moeIntermediateSize;
  c.routedScalingFactor = r.number("routed_scaling_factor", v3 ? 2.5 : 1.0);
  if (c.routedScalingFactor <= 0)
    r.fail("routed_scaling_factor must be positive");
  // As in transformers: V3 always scores with sigmoid and selects with the
  // correction bias (noaux_tc); V2 always uses softmax and never renormalises.
  // scoring_func (and V3's topk_method) are read by neither.
  c.scoring = v3 ? "sigmoid" : "softmax";
  c.normTopkProb = v3 && r.boolean("norm_topk_prob", true);
  c.topkMethod = v3 ? "noaux_tc" : r.string("topk_method", "greedy");
  if (c.topkMethod != "greedy" && c.topkMethod != "group_limited_greedy" &&
      c.topkMethod != "noaux_tc")
    r.fail("topk_method '" + c.topkMethod +
           "' is not greedy or group_limited_greedy");
  if (c.topkMethod == "noaux_tc" && !v3)
    r.fail("topk_method noaux_tc needs model_type deepseek_v3");
  if (c.topkMethod != "greedy") {
    c.nGroup = r.positive("n_group");
    c.topkGroup = r.positive("topk_group");
    if (c.numExperts % c.nGroup != 0)
      r.fail("n_group " + std::to_string(c.nGroup) + " does not divide " +
             std::to_string(c.numExperts) + " routed experts");
    if (c.topkGroup > c.nGroup)
      r.fail("topk_group " + std::to_string(c.topkGroup) + " exceeds n_group " +
             std::to_string(c.nGroup));
    if (c.topK > c.topkGroup * (c.numExperts / c.nGroup))
      r.fail("num_experts_per_tok " + std::to_string(c.topK) +
             " exceeds the " + std::to_string(c.topkGroup * (c.numExperts / c.nGroup)) +
             " experts of topk_group " + std::to_string(c.topkGroup) + " groups");
  }
  int64_t firstDense = r.integer("first_k_dense_replace", v3 ? 3 : 0);
  if (firstDense < 0)
    r.fail("first_k_dense_replace must be >= 0, got " + std::to_string(firstDense));
  int64_t freq = r.positive("moe_layer_freq", 1);
  for (int64_t i = 0; i < c.numLayers; ++i)
    c.sparseLayer.push_back(i >= firstDense && i % freq == 0);
}

/// FP8 checkpoints with block scales (DeepSeek-V3, Qwen3 FP8): the block
/// size of their `*_scale_inv` tensors.
void readQuantization(const Reader &r, HfConfig &c) {
  const json &quant = r.object("quantization_config");
  if (!quant.is_null()) {
    std::string method = quant.value("quant_method", "");
    if (method != "fp8")
      r.fail("quantization_config.quant_method '" + method +
             "' is not supported (only fp8 block scales)");
    json block = quant.value("weight_block_size", json::array({128, 128}));
    if (!block.is_array() || block.size() != 2 || !block[0].is_number_integer() ||
        !block[1].is_number_integer() || block[0] <= 0 || block[1] <= 0 ||
        block[0] > (1 << 20) || block[1] > (1 << 20))
      r.fail("quantization_config.weight_block_size must be two positive "
             "integers, got " + block.dump());
    c.fp8Block = {block[0].get<int64_t>(), block[1].get<int64_t>()};
  }
}

} // namespace

HfConfig HfConfig::parse(const json &j, const std::string &path) {
  if (!j.is_object())
    throw InputError(path + ": must be a JSON object");
  HfConfig c;
  c.path = path;
  Reader any(j, path, "?");
  c.modelType = any.string("model_type", "");
  if (c.modelType.empty())
    any.fail("missing key 'model_type'");
  static const std::pair<const char *, Family> families[] = {
      {"mixtral", Family::Mixtral},
      {"qwen2_moe", Family::Qwen2Moe},
      {"qwen3_moe", Family::Qwen3Moe},
      {"deepseek_v2", Family::DeepseekV2},
      {"deepseek_v3", Family::DeepseekV3}};
  auto it = std::find_if(std::begin(families), std::end(families),
                         [&](auto &f) { return c.modelType == f.first; });
  if (it == std::end(families))
    any.fail("unsupported model_type '" + c.modelType +
             "'; supported: mixtral, qwen2_moe, qwen3_moe, deepseek_v2, "
             "deepseek_v3");
  c.family = it->second;

  Reader r(j, path, c.modelType);
  c.vocabSize = r.positive("vocab_size");
  c.hiddenSize = r.positive("hidden_size");
  c.numLayers = r.positive("num_hidden_layers");
  c.maxPositions = r.positive("max_position_embeddings", 4096);
  c.rmsNormEps = r.number("rms_norm_eps", 1e-6);
  if (c.rmsNormEps <= 0)
    r.fail("rms_norm_eps must be positive");
  c.tieWordEmbeddings = r.boolean("tie_word_embeddings", false);
  c.torchDtype = r.string("torch_dtype", r.string("dtype", "bfloat16"));
  if (r.has("eos_token_id") && j.at("eos_token_id").is_number_integer())
    c.eosTokenId = r.integer("eos_token_id");
  readRope(r, c);
  readQuantization(r, c);

  switch (c.family) {
  case Family::Mixtral:
    readGqaAttention(r, c);
    c.moeIntermediateSize = r.positive("intermediate_size");
    c.numExperts = r.positive("num_local_experts");
    c.topK = r.positive("num_experts_per_tok");
    if (c.topK > c.numExperts)
      r.fail("num_experts_per_tok " + std::to_string(c.topK) +
             " exceeds num_local_experts " + std::to_string(c.numExperts));
    c.normTopkProb = true;
    c.sparseLayer.assign(c.numLayers, true);
    if (r.has("sliding_window"))
      c.slidingWindow = r.positive("sliding_window");
    break;
  case Family::Qwen2Moe:
  case Family::Qwen3Moe:
    readQwen(r, c);
    break;
  case Family::DeepseekV2:
  case Family::DeepseekV3:
    readDeepseek(r, c);
    break;
  }
  return c;
}

HfConfig HfConfig::load(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    throw InputError(path + ": cannot open (is this a Hugging Face model "
                            "directory?)");
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw InputError(path + ": not valid JSON");
  HfConfig c = parse(j, path);
  std::string tokPath =
      (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  std::ifstream tok(tokPath);
  json t = tok ? json::parse(tok, nullptr, false) : json();
  if (t.is_object() && t.value("tokenizer_class", "") == "ByT5Tokenizer")
    c.tokenizer = "byt5";
  return c;
}

std::string HfConfig::defaultDtype() const {
  if (torchDtype == "float32")
    return "F32";
  if (torchDtype == "float16")
    return "F16";
  return "BF16";
}

} // namespace moe
