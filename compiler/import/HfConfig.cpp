//===- HfConfig.cpp - a Hugging Face MoE config.json, normalised ----------===//
#include "compiler/import/HfConfig.h"
#include "compiler/import/ConfigReader.h"
#include "compiler/import/Safetensors.h"
#include "moe/abi/File.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

using json = nlohmann::json;

namespace moe {

namespace {

using config::Reader;

/// Replaces transformers' attribute_map aliases by the keys they stand for
/// (recording in `spelled` how the file named them), then refuses any key
/// the model type's table does not hold.
json checkKeys(const json &config, Family family, const Reader &r,
               std::map<std::string, std::string> &spelled) {
  json j = config;
  for (const ConfigKey &k : configKeys(family)) {
    if (k.role != KeyRole::Alias || !j.contains(k.name))
      continue;
    if (j.contains(k.note) && j[k.note] != j[k.name])
      r.fail("keys '" + std::string(k.name) + "' and '" + k.note +
             "' name the same setting but differ (" + j[k.name].dump() + " vs " +
             j[k.note].dump() + ")");
    j[k.note] = j[k.name];
    j.erase(k.name);
    spelled[k.note] = k.name;
  }
  for (auto &[key, value] : j.items())
    if (!value.is_null() && !findConfigKey(family, key))
      r.fail("key '" + key + "' is not known for model_type " + familyName(family) +
             ": it may change the model, and the importer would ignore it; remove it from "
             "config.json if it does not (keys: docs/importer.md)");
  return j;
}

void readActivation(const Reader &r) {
  std::string act = r.string("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    r.refuse("hidden_act", "only silu (swish) is implemented");
}

void readGqaAttention(const Reader &r, HfConfig &c) {
  c.numHeads = r.positive("num_attention_heads");
  // transformers' class defaults when the key is absent (null: the heads).
  const int64_t kvDefault = c.family == Family::Mixtral    ? 8
                            : c.family == Family::Qwen2Moe ? 16
                                                           : 4;
  c.numKvHeads = r.has("num_key_value_heads")
                     ? r.positive("num_key_value_heads")
                     : (r.isNull("num_key_value_heads") ? c.numHeads : kvDefault);
  if (c.numHeads % c.numKvHeads != 0)
    r.fail("num_attention_heads " + std::to_string(c.numHeads) +
           " is not a multiple of num_key_value_heads " +
           std::to_string(c.numKvHeads));
  if (!r.has("head_dim") && c.hiddenSize % c.numHeads != 0)
    r.fail("hidden_size " + std::to_string(c.hiddenSize) +
           " is not a multiple of num_attention_heads " +
           std::to_string(c.numHeads) + "; set 'head_dim'");
  c.headDim = r.positive("head_dim", c.hiddenSize / c.numHeads);
  if (c.headDim % 2 != 0)
    r.fail("head_dim must be even for RoPE, got " + std::to_string(c.headDim));
}

/// MLA dimensions and the softmax scale, YaRN mscale included (as in
/// transformers' DeepseekV3Attention).
void readMlaAttention(const Reader &r, HfConfig &c) {
  c.mla = true;
  c.numHeads = r.positive("num_attention_heads");
  c.numKvHeads = c.numHeads;
  if (r.has("num_key_value_heads") && r.integer("num_key_value_heads") != c.numHeads)
    r.refuse("num_key_value_heads", "MLA expands the latent to every head, so it must equal "
                                    "num_attention_heads " + std::to_string(c.numHeads));
  c.qLoraRank = r.has("q_lora_rank") ? r.positive("q_lora_rank") : 0;
  c.kvLoraRank = r.positive("kv_lora_rank");
  c.qkNopeHeadDim = r.positive("qk_nope_head_dim");
  c.qkRopeHeadDim = r.positive("qk_rope_head_dim");
  c.vHeadDim = r.positive("v_head_dim");
  if (c.qkRopeHeadDim % 2 != 0)
    r.fail("qk_rope_head_dim must be even, got " +
           std::to_string(c.qkRopeHeadDim));
  c.headDim = c.qkNopeHeadDim + c.qkRopeHeadDim;
  if (r.has("qk_head_dim") && r.integer("qk_head_dim") != c.headDim)
    r.refuse("qk_head_dim", "must equal qk_nope_head_dim + qk_rope_head_dim = " +
                                std::to_string(c.headDim));
  c.softmaxScale = 1.0 / std::sqrt(static_cast<double>(c.headDim));
  if (c.ropeScaling.is_object()) {
    double mscaleAllDim = c.ropeScaling.value("mscale_all_dim", 0.0);
    double factor = c.ropeScaling.value("factor", 1.0);
    if (mscaleAllDim != 0 && factor > 1) {
      double mscale = 0.1 * mscaleAllDim * std::log(factor) + 1.0;
      c.softmaxScale *= mscale * mscale;
    }
  }
  // transformers: q_a_proj, kv_a_proj_with_mqa and o_proj carry the bias.
  c.qkvBias = c.oBias = r.boolean("attention_bias", false);
}

/// The keys each RoPE type may hold, as transformers validates them.
const std::vector<std::string> &ropeKeys(const std::string &type) {
  static const std::vector<std::string> none;
  static const std::map<std::string, std::vector<std::string>> keys = {
      {"default", {"rope_type", "type", "rope_theta", "partial_rotary_factor"}},
      {"linear", {"rope_type", "type", "rope_theta", "partial_rotary_factor", "factor"}},
      {"yarn",
       {"rope_type", "type", "rope_theta", "partial_rotary_factor", "factor",
        "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
        "mscale", "mscale_all_dim", "truncate"}}};
  auto it = keys.find(type);
  return it == keys.end() ? none : it->second;
}

/// RoPE base and scaling. transformers v4 writes `rope_theta` and
/// `rope_scaling`; v5 one `rope_parameters` object holding both. As v5 reads
/// them: `rope_scaling`, when set, replaces `rope_parameters`, and the
/// object's own `rope_theta` wins over the top-level one.
void readRope(const Reader &r, HfConfig &c) {
  double dflt = c.family == Family::Mixtral ? 1e6 : 1e4;
  c.ropeTheta = r.number("rope_theta", dflt);
  const json &legacy = r.object("rope_scaling");
  json scaling = !legacy.is_null() && !legacy.empty() ? legacy : r.object("rope_parameters");
  const char *from = !legacy.is_null() && !legacy.empty() ? "rope_scaling" : "rope_parameters";
  double partial = r.number("partial_rotary_factor", 1.0);
  if (scaling.is_object()) {
    json theta = scaling.value("rope_theta", json(c.ropeTheta));
    if (!theta.is_number())
      r.fail(std::string(from) + ".rope_theta must be a number, got " + theta.dump());
    c.ropeTheta = theta.get<double>();
    json p = scaling.value("partial_rotary_factor", json(partial));
    if (!p.is_number())
      r.fail(std::string(from) + ".partial_rotary_factor must be a number, got " + p.dump());
    partial = p.get<double>();
  }
  if (c.ropeTheta <= 0)
    r.fail("rope_theta must be positive, got " + std::to_string(c.ropeTheta));
  if (partial != 1.0)
    r.fail("partial_rotary_factor " + json(partial).dump() +
           " is not supported: RoPE is applied to whole heads (1.0) only");
  if (scaling.is_null() || scaling.empty())
    return;
  json kind = scaling.contains("rope_type") ? scaling["rope_type"]
                                            : scaling.value("type", json("default"));
  if (!kind.is_string())
    r.fail(std::string(from) + " needs a string 'rope_type' (or 'type'), got " + scaling.dump());
  const std::vector<std::string> &allowed = ropeKeys(kind.get<std::string>());
  if (allowed.empty())
    r.fail(std::string(from) + ".rope_type '" + kind.get<std::string>() +
           "' is not supported (supported: default, linear, yarn)");
  for (auto &[key, value] : scaling.items())
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      r.fail(std::string(from) + "." + key + " is not known for rope_type '" +
             kind.get<std::string>() + "' (known: " +
             [&] {
               std::string s;
               for (const std::string &a : allowed)
                 s += (s.empty() ? "" : ", ") + a;
               return s;
             }() + ")");
  if (kind == "default")
    return;
  auto factor = scaling.find("factor");
  if (factor == scaling.end() || !factor->is_number() || *factor <= 0)
    r.fail(std::string(from) + " of type " + kind.get<std::string>() +
           " needs a positive number 'factor', got " +
           (factor == scaling.end() ? std::string("none") : factor->dump()));
  scaling.erase("rope_theta");
  scaling.erase("partial_rotary_factor");
  c.ropeScaling = scaling;
}

void readRouter(const Reader &r, HfConfig &c, const char *expertsKey) {
  c.numExperts = r.positive(expertsKey);
  c.topK = r.positive("num_experts_per_tok");
  if (c.topK > c.numExperts)
    r.fail("num_experts_per_tok " + std::to_string(c.topK) + " exceeds " +
           r.name(expertsKey) + " " + std::to_string(c.numExperts));
}

/// Per-layer sliding windows of Qwen2-MoE: `layer_types` when given, else
/// transformers' default (every other layer below max_window_layers).
void readQwen2Windows(const Reader &r, HfConfig &c) {
  bool on = r.boolean("use_sliding_window", false);
  int64_t below = r.integer("max_window_layers", 28);
  c.slidingLayer.assign(size_t(c.numLayers), false);
  if (r.has("layer_types")) {
    const json &types = r.raw("layer_types");
    if (!types.is_array() || int64_t(types.size()) != c.numLayers)
      r.fail("layer_types must list one type per layer (" + std::to_string(c.numLayers) + ")");
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] != "full_attention" && types[i] != "sliding_attention")
        r.fail("layer_types[" + std::to_string(i) + "] is " + types[i].dump() +
               "; known: full_attention, sliding_attention");
      c.slidingLayer[i] = types[i] == "sliding_attention";
    }
  } else if (on) {
    for (int64_t i = 0; i < c.numLayers; ++i)
      c.slidingLayer[size_t(i)] = (i + 1) % 2 != 0 && i < below;
  }
  bool any = std::find(c.slidingLayer.begin(), c.slidingLayer.end(), true) != c.slidingLayer.end();
  if (any && !on)
    r.fail("layer_types has sliding_attention layers but use_sliding_window is false "
           "(transformers then uses a window of 0)");
  if (any)
    c.slidingWindow = r.positive("sliding_window");
}

void readQwen(const Reader &r, HfConfig &c) {
  readGqaAttention(r, c);
  c.intermediateSize = r.positive("intermediate_size");
  c.moeIntermediateSize = r.positive("moe_intermediate_size");
  readRouter(r, c, c.family == Family::Qwen2Moe ? "num_experts" : "num_local_experts");
  c.normTopkProb = r.boolean("norm_topk_prob", false);
  int64_t step = r.positive("decoder_sparse_step", 1);
  std::vector<int64_t> denseOnly = r.integers("mlp_only_layers");
  for (int64_t i = 0; i < c.numLayers; ++i)
    c.sparseLayer.push_back((i + 1) % step == 0 &&
                            std::find(denseOnly.begin(), denseOnly.end(), i) ==
                                denseOnly.end());
  if (c.family == Family::Qwen2Moe) {
    readQwen2Windows(r, c);
    c.qkvBias = r.boolean("qkv_bias", true);
    c.sharedIntermediateSize = r.positive("shared_expert_intermediate_size");
    c.sharedExpertGate = true;
  } else {
    bool on = r.boolean("use_sliding_window", false);
    c.slidingLayer.assign(size_t(c.numLayers), on);
    if (on)
      c.slidingWindow = r.positive("sliding_window");
    c.qkvBias = c.oBias = r.boolean("attention_bias", false);
    c.qkNorm = true;
  }
}

/// Keys of DeepSeek's own code that transformers does not read: accepted
/// only at the value transformers' behaviour corresponds to.
void readDeepseekRemoteKeys(const Reader &r, const HfConfig &c, bool v3) {
  const char *scoring = v3 ? "sigmoid" : "softmax";
  if (r.has("scoring_func") && r.string("scoring_func", "") != scoring)
    r.refuse("scoring_func", std::string("transformers' ") + familyName(c.family) +
                                 " always scores with " + scoring);
  if (r.has("moe_layer_freq") && r.integer("moe_layer_freq") != 1)
    r.refuse("moe_layer_freq", "transformers makes every layer after first_k_dense_replace "
                               "sparse (moe_layer_freq 1); other values are not implemented");
  if (!v3 && r.boolean("norm_topk_prob", false))
    r.refuse("norm_topk_prob", "transformers' deepseek_v2 never renormalises the top-k "
                               "weights; DeepSeek's own code would");
  if (v3 && r.has("topk_method") && r.string("topk_method", "") != "noaux_tc")
    r.refuse("topk_method", "transformers' deepseek_v3 always selects with the correction "
                            "bias (noaux_tc)");
}

void readDeepseek(const Reader &r, HfConfig &c) {
  bool v3 = c.family == Family::DeepseekV3;
  readMlaAttention(r, c);
  // transformers 5 sizes deepseek_v3's RoPE by head_dim (default
  // qk_rope_head_dim) and fails on any other value; 4.x overwrote it.
  if (v3 && r.has("head_dim") && r.integer("head_dim") != c.qkRopeHeadDim)
    r.refuse("head_dim", "transformers' deepseek_v3 sizes RoPE by it, so it must equal "
                         "qk_rope_head_dim " + std::to_string(c.qkRopeHeadDim));
  readDeepseekRemoteKeys(r, c, v3);
  if (!v3 && r.boolean("mlp_bias", false))
    r.refuse("mlp_bias", "MLP projections with biases are not implemented");
  c.ropeInterleave = !v3 || r.boolean("rope_interleave", true);
  c.intermediateSize = r.positive("intermediate_size");
  c.moeIntermediateSize = r.positive("moe_intermediate_size");
  readRouter(r, c, "n_routed_experts");
  int64_t shared = r.integer("n_shared_experts", v3 ? 1 : 2); // transformers' defaults
  if (shared < 0)
    r.refuse("n_shared_experts", "must be >= 0");
  c.sharedIntermediateSize = (shared ? r.positive("n_shared_experts", shared) : 0) *
                             c.moeIntermediateSize;
  c.routedScalingFactor = r.number("routed_scaling_factor", v3 ? 2.5 : 1.0);
  if (c.routedScalingFactor <= 0)
    r.fail("routed_scaling_factor must be positive");
  // As in transformers: V3 always scores with sigmoid and selects with the
  // correction bias (noaux_tc); V2 always uses softmax and never renormalises.
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
    // V3's class defaults are 8 and 4; V2 has none (transformers fails).
    c.nGroup = v3 ? r.positive("n_group", 8) : r.positive("n_group");
    c.topkGroup = v3 ? r.positive("topk_group", 4) : r.positive("topk_group");
    if (c.numExperts % c.nGroup != 0)
      r.fail("n_group " + std::to_string(c.nGroup) + " does not divide " +
             std::to_string(c.numExperts) + " routed experts");
    if (v3 && c.numExperts / c.nGroup < 2)
      r.fail("n_group " + std::to_string(c.nGroup) + " leaves fewer than 2 of the " +
             std::to_string(c.numExperts) + " routed experts per group (the group score "
             "sums the best two)");
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
  for (int64_t i = 0; i < c.numLayers; ++i)
    c.sparseLayer.push_back(i >= firstDense);
  c.slidingLayer.assign(size_t(c.numLayers), false);
  if (v3) {
    c.mtpLayers = r.integer("num_nextn_predict_layers", 0);
    if (c.mtpLayers < 0 || c.mtpLayers > 1024)
      r.fail("num_nextn_predict_layers must be in [0, 1024], got " + std::to_string(c.mtpLayers));
  }
}

void readMixtral(const Reader &r, HfConfig &c) {
  readGqaAttention(r, c);
  c.moeIntermediateSize = r.positive("intermediate_size");
  readRouter(r, c, "num_local_experts");
  c.normTopkProb = true;
  c.sparseLayer.assign(size_t(c.numLayers), true);
  c.slidingLayer.assign(size_t(c.numLayers), r.has("sliding_window"));
  if (r.has("sliding_window"))
    c.slidingWindow = r.positive("sliding_window");
}

/// Keys of a GPTQ or AWQ quantization_config that say how the checkpoint
/// was made (calibration, the tool, its kernels, which layers it skipped:
/// the tensors tell) but not how its tensors read.
const std::set<std::string> kInt4Informational = {
    "damp_percent", "damp_auto_increment", "true_sequential", "static_groups",
    "model_name_or_path", "model_file_base_name", "meta", "tokenizer", "dataset",
    "use_cuda_fp16", "model_seqlen", "block_name_to_quantize",
    "module_name_preceding_first_block", "batch_size", "pad_token_id", "use_exllama",
    "max_input_length", "exllama_config", "cache_block_outputs",
    "modules_in_block_to_quantize", "backend", "mse", "v2", "v2_alpha", "lm_head",
    "modules_to_not_convert", "do_fuse", "fuse_max_seq_len", "modules_to_fuse",
    "disable_exllama"};

/// Typed access to quantization_config's keys, refusing by name.
struct QuantKeys {
  const Reader &r;
  const json &quant;
  [[noreturn]] void refuse(const std::string &key, const std::string &why) const {
    r.fail("quantization_config." + key + " " + quant[key].dump() + " is not supported: " + why);
  }
  /// The key's value when it has the type asked for (dflt when absent).
  json typed(const char *key, json dflt, bool ok(const json &), const char *want) const {
    if (!quant.contains(key) || quant[key].is_null())
      return dflt;
    if (!ok(quant[key]))
      refuse(key, std::string("it must be ") + want);
    return quant[key];
  }
  bool boolean(const char *key, bool dflt) const {
    return typed(key, dflt, [](const json &v) { return v.is_boolean(); }, "true or false")
        .get<bool>();
  }
  std::string string(const char *key, const std::string &dflt) const {
    return typed(key, dflt, [](const json &v) { return v.is_string(); }, "a string")
        .get<std::string>();
  }
};

/// GPTQ and AWQ at 4 bits. Symmetric GPTQ becomes the plan's int4; GPTQ
/// with sym false and AWQ (zero points per group) become int8 q - z, exact.
/// Whether each GPTQ layer's groups are in order (a desc_act checkpoint may
/// still have them so) is checked on its g_idx.
void readInt4(const Reader &r, const json &quant, const std::string &method, HfConfig &c) {
  const bool awq = method == "awq";
  const std::set<std::string> semantic =
      awq ? std::set<std::string>{"quant_method", "bits", "group_size", "zero_point", "version"}
          : std::set<std::string>{"quant_method", "bits", "group_size", "sym", "desc_act",
                                  "checkpoint_format", "format", "pack_dtype", "dynamic",
                                  "rotation", "adapter", "is_marlin_format"};
  for (auto &[key, value] : quant.items())
    if (!kInt4Informational.count(key) && !semantic.count(key)) {
      std::string known;
      for (const std::string &k : semantic)
        known += k + ", ";
      r.fail("quantization_config." + key + " is not known for " + method + " (known: " + known +
             "and informational keys such as damp_percent): it may change how the weights "
             "read, and the importer would ignore it");
    }
  QuantKeys q{r, quant};
  if (!quant.contains("bits") || quant["bits"] != 4)
    r.fail("quantization_config.bits " + (quant.contains("bits") ? quant["bits"].dump()
                                                                  : std::string("(missing)")) +
           " is not supported: " + method + " checkpoints are read at 4 bits only");
  json group = quant.value("group_size", json(-1));
  if (!group.is_number_integer() || (group != -1 && (group < 2 || group > (1 << 20) ||
                                                     group.get<int64_t>() % 2)))
    q.refuse("group_size", "it must be -1 (one group per row) or an even number of elements");
  Int4Format f;
  f.groupSize = group.get<int64_t>();
  if (awq) {
    f.packing = Int4Format::Packing::Awq;
    f.symmetric = false;
    if (!q.boolean("zero_point", true))
      q.refuse("zero_point", "AWQ without zero points is not read (no published checkpoint "
                             "was found to test it against)");
    std::string version = q.string("version", "gemm");
    std::transform(version.begin(), version.end(), version.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    if (version != "gemm")
      q.refuse("version", "only the gemm layout is read (gemv and the kernels' repacked "
                          "layouts order their words differently)");
    c.int4 = f;
    return;
  }
  f.symmetric = q.boolean("sym", true);
  f.descAct = q.boolean("desc_act", false);
  if (q.boolean("is_marlin_format", false))
    q.refuse("is_marlin_format", "marlin's repacked layout is not read; export the gptq layout");
  const std::string format = q.string("checkpoint_format", q.string("format", "gptq"));
  if (format != "gptq" && format != "gptq_v2")
    q.refuse(quant.contains("checkpoint_format") ? "checkpoint_format" : "format",
             "only the gptq and gptq_v2 layouts are read (not a kernel's repacked layout "
             "such as marlin)");
  f.zeroMinusOne = format == "gptq";
  if (q.string("pack_dtype", "int32") != "int32")
    q.refuse("pack_dtype", "only int32 packing is read");
  for (const char *key : {"dynamic", "rotation", "adapter"})
    if (quant.contains(key) && !quant[key].is_null() && !quant[key].empty())
      q.refuse(key, "per-module overrides, rotations and adapters are not implemented");
  c.int4 = f;
}

/// FP8 checkpoints with block scales (DeepSeek-V3, Qwen3 FP8): the block
/// size of their `*_scale_inv` tensors. GPTQ and AWQ int4 checkpoints
/// (readInt4).
void readQuantization(const Reader &r, HfConfig &c) {
  const json &quant = r.object("quantization_config");
  if (quant.is_null())
    return;
  const std::string method = QuantKeys{r, quant}.string("quant_method", "");
  if (method == "gptq" || method == "awq")
    return readInt4(r, quant, method, c);
  if (method != "fp8")
    r.fail("quantization_config.quant_method '" + method +
           "' is not supported (fp8 block scales, gptq and awq at 4 bits are)");
  for (auto &[key, value] : quant.items())
    if (key != "quant_method" && key != "fmt" && key != "activation_scheme" &&
        key != "weight_block_size" && key != "modules_to_not_convert")
      r.fail("quantization_config." + key + " is not known (known: quant_method, fmt, "
             "activation_scheme, weight_block_size, modules_to_not_convert)");
  if (quant.value("fmt", "e4m3") != "e4m3")
    r.fail("quantization_config.fmt " + quant["fmt"].dump() + " is not supported (e4m3 only)");
  // Activations are not quantised here; "dynamic" quantises them per call
  // in transformers, "static" would need input scales this does not read.
  if (quant.value("activation_scheme", "dynamic") != "dynamic")
    r.fail("quantization_config.activation_scheme " + quant["activation_scheme"].dump() +
           " is not supported (dynamic only)");
  json block = quant.value("weight_block_size", json::array({128, 128}));
  if (!block.is_array() || block.size() != 2 || !block[0].is_number_integer() ||
      !block[1].is_number_integer() || block[0] <= 0 || block[1] <= 0 ||
      block[0] > (1 << 20) || block[1] > (1 << 20))
    r.fail("quantization_config.weight_block_size must be two positive "
           "integers, got " + block.dump());
  c.fp8Block = {block[0].get<int64_t>(), block[1].get<int64_t>()};
}

/// An id or a list of ids (config.json and generation_config.json).
std::vector<int64_t> readEos(const Reader &r) {
  if (!r.has("eos_token_id"))
    return {};
  const json &v = r.raw("eos_token_id");
  if (v.is_array())
    return r.integers("eos_token_id");
  return {r.integer("eos_token_id")};
}

/// `text` parsed as JSON; discarded when it is not, and refused (naming
/// `path`) when it nests deeper than any config does: copying such a value
/// would recurse until the stack overflows.
json parseConfigJson(const std::string &text, const std::string &path) {
  constexpr int kMaxDepth = 64;
  bool tooDeep = false;
  json j = json::parse(
      text,
      [&](int depth, json::parse_event_t, json &) {
        tooDeep |= depth > kMaxDepth;
        return true;
      },
      /*allow_exceptions=*/false);
  if (tooDeep)
    throw InputError(path + ": nests more than " + std::to_string(kMaxDepth) +
                     " levels deep; no Hugging Face config does");
  return j;
}

} // namespace

json readSibling(const std::string &configPath, const char *name) {
  std::string path = (std::filesystem::path(configPath).parent_path() / name).string();
  if (!std::filesystem::exists(std::filesystem::symlink_status(path)))
    return json();
  auto text = rt::readFile(path, 64u << 20);
  if (!text)
    throw InputError(text.status().message());
  json j = parseConfigJson(*text, path);
  if (j.is_discarded() || !j.is_object())
    throw InputError(path + ": not a JSON object");
  return j;
}

HfConfig HfConfig::parse(const json &config, const std::string &path) {
  if (!config.is_object())
    throw InputError(path + ": must be a JSON object");
  HfConfig c;
  c.path = path;
  Reader any(config, path, "?");
  c.modelType = any.string("model_type", "");
  if (c.modelType.empty())
    any.fail("missing key 'model_type'");
  static const Family families[] = {Family::Mixtral, Family::Qwen2Moe, Family::Qwen3Moe,
                                    Family::DeepseekV2, Family::DeepseekV3};
  auto it = std::find_if(std::begin(families), std::end(families),
                         [&](Family f) { return c.modelType == familyName(f); });
  if (it == std::end(families))
    any.fail("unsupported model_type '" + c.modelType +
             "'; supported: mixtral, qwen2_moe, qwen3_moe, deepseek_v2, "
             "deepseek_v3");
  c.family = *it;

  std::map<std::string, std::string> spelled;
  const json j = checkKeys(config, c.family, any, spelled);
  Reader r(j, path, c.modelType, spelled);
  c.vocabSize = r.positive("vocab_size");
  c.hiddenSize = r.positive("hidden_size");
  c.numLayers = r.positive("num_hidden_layers");
  // Defaults as transformers' configuration classes have them.
  static const std::map<Family, int64_t> positions = {
      {Family::Mixtral, 131072}, {Family::Qwen2Moe, 32768}, {Family::Qwen3Moe, 32768},
      {Family::DeepseekV2, 2048}, {Family::DeepseekV3, 4096}};
  c.maxPositions = r.positive("max_position_embeddings", positions.at(c.family));
  c.rmsNormEps = r.number("rms_norm_eps", c.family == Family::Mixtral ? 1e-5 : 1e-6);
  if (c.rmsNormEps <= 0)
    r.fail("rms_norm_eps must be positive");
  c.tieWordEmbeddings = r.boolean("tie_word_embeddings", false);
  c.torchDtype = r.string("torch_dtype", r.string("dtype", "bfloat16"));
  c.eosTokenIds = readEos(r);
  c.configEosTokenId = c.eosTokenIds.empty() ? -1 : c.eosTokenIds[0];
  readActivation(r);
  readRope(r, c);
  readQuantization(r, c);

  switch (c.family) {
  case Family::Mixtral:
    readMixtral(r, c);
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
  auto text = rt::readFile(path, 64u << 20);
  if (!text) {
    std::string m = text.status().message();
    if (m.find("no such file") != std::string::npos)
      m += " (is this a Hugging Face model directory?)";
    throw InputError(m);
  }
  json j = parseConfigJson(*text, path);
  if (j.is_discarded())
    throw InputError(path + ": not valid JSON");
  HfConfig c = parse(j, path);
  json tok = readSibling(path, "tokenizer_config.json");
  if (tok.is_object() && tok.value("tokenizer_class", json()) == "ByT5Tokenizer")
    c.tokenizer = "byt5";
  json gen = readSibling(path, "generation_config.json");
  std::string genPath =
      (std::filesystem::path(path).parent_path() / "generation_config.json").string();
  // Each id is checked against the file it came from, and named with it.
  auto checkIds = [&](const std::vector<int64_t> &ids, const std::string &file) {
    for (int64_t id : ids)
      if (id < 0 || id >= c.vocabSize)
        throw InputError(file + ": eos_token_id " + std::to_string(id) +
                         " is outside the vocabulary [0, " + std::to_string(c.vocabSize) + ")");
  };
  checkIds(c.eosTokenIds, path);
  if (gen.is_object() && gen.contains("eos_token_id") && !gen["eos_token_id"].is_null()) {
    c.eosTokenIds = readEos(Reader(gen, genPath, c.modelType));
    checkIds(c.eosTokenIds, genPath);
  }
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
