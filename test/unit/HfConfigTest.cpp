// config.json normalisation: derived values checked against closed forms.
#include "compiler/import/HfConfig.h"
#include "compiler/import/Safetensors.h"

#include "moe/abi/File.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using json = nlohmann::json;

namespace {

json deepseekV3() {
  return json::parse(R"({
    "model_type": "deepseek_v3", "vocab_size": 129280, "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048,
    "num_hidden_layers": 61, "num_attention_heads": 128,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 256,
    "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8,
    "topk_group": 4, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
    "norm_topk_prob": true, "routed_scaling_factor": 2.5,
    "first_k_dense_replace": 3, "moe_layer_freq": 1,
    "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1.0,
                     "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096},
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                            "weight_block_size": [128, 128]}})");
}

std::string errorOf(const json &j) {
  try {
    moe::HfConfig::parse(j, "config.json");
  } catch (const moe::InputError &e) {
    return e.what();
  }
  return "";
}

TEST(HfConfig, DeepseekV3Dimensions) {
  moe::HfConfig c = moe::HfConfig::parse(deepseekV3(), "config.json");
  EXPECT_TRUE(c.mla);
  EXPECT_EQ(c.sharedIntermediateSize, 2048);
  EXPECT_EQ(c.fp8Block, (std::vector<int64_t>{128, 128}));
  ASSERT_EQ(c.sparseLayer.size(), 61u);
  EXPECT_FALSE(c.sparseLayer[2]);
  EXPECT_TRUE(c.sparseLayer[3]);
  // softmax scale = (128 + 64)^-0.5 * (0.1 * 1.0 * ln 40 + 1)^2
  double mscale = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(c.softmaxScale, mscale * mscale / std::sqrt(192.0), 1e-12);
}

TEST(HfConfig, QwenSparseLayers) {
  json j = {{"model_type", "qwen2_moe"}, {"vocab_size", 10},
            {"hidden_size", 8}, {"intermediate_size", 16},
            {"moe_intermediate_size", 4},
            {"shared_expert_intermediate_size", 8},
            {"num_hidden_layers", 6}, {"num_attention_heads", 2},
            {"num_key_value_heads", 2}, {"num_experts", 4}, {"num_experts_per_tok", 2},
            {"decoder_sparse_step", 2}, {"mlp_only_layers", {3}}};
  moe::HfConfig c = moe::HfConfig::parse(j, "config.json");
  // (i + 1) % 2 == 0 and i not in [3]: layers 1 and 5.
  EXPECT_EQ(c.sparseLayer,
            (std::vector<bool>{false, true, false, false, false, true}));
  EXPECT_TRUE(c.qkvBias);
  EXPECT_TRUE(c.sharedExpertGate);
  EXPECT_EQ(c.headDim, 4);
}

TEST(HfConfig, Errors) {
  json j = deepseekV3();
  j.erase("kv_lora_rank");
  EXPECT_EQ(errorOf(j), "config.json: missing key 'kv_lora_rank' (required "
                        "for model_type deepseek_v3)");
  j = deepseekV3();
  j["hidden_size"] = "7168";
  EXPECT_EQ(errorOf(j),
            "config.json: key 'hidden_size' must be an integer, got \"7168\"");
  j = deepseekV3();
  j["model_type"] = "llama";
  EXPECT_NE(errorOf(j).find("unsupported model_type 'llama'"),
            std::string::npos);
  j = deepseekV3();
  j["n_group"] = 7;
  EXPECT_NE(errorOf(j).find("n_group 7 does not divide 256"), std::string::npos);
  j = deepseekV3();
  j["num_experts_per_tok"] = 300;
  EXPECT_NE(errorOf(j).find("num_experts_per_tok 300 exceeds"),
            std::string::npos);
}

json mixtral() {
  return json::parse(R"({
    "model_type": "mixtral", "vocab_size": 32, "hidden_size": 16,
    "intermediate_size": 24, "num_hidden_layers": 3, "num_attention_heads": 2,
    "num_key_value_heads": 1, "num_local_experts": 4, "num_experts_per_tok": 2})");
}

// Every key transformers 5.24's default configs write (and every alias of
// their attribute_map), recorded by tools/make-goldens.py, is in the table
// of its model type: read, or known to be inert.
TEST(HfConfig, TablesHoldEveryTransformersKey) {
  auto text = moe::rt::readFile(MOE_GOLDENS_DIR "/config-keys.json");
  ASSERT_TRUE(text) << text.status().message();
  json keys = json::parse(*text)["keys"];
  ASSERT_EQ(keys.size(), 5u);
  for (moe::Family f : {moe::Family::Mixtral, moe::Family::Qwen2Moe, moe::Family::Qwen3Moe,
                        moe::Family::DeepseekV2, moe::Family::DeepseekV3}) {
    ASSERT_TRUE(keys.contains(moe::familyName(f)));
    for (const json &k : keys[moe::familyName(f)])
      EXPECT_NE(moe::findConfigKey(f, k.get<std::string>()), nullptr)
          << moe::familyName(f) << ": " << k;
  }
}

// A config that leaves a key out gets transformers 5.24's default for it
// (recorded by tools/make-goldens.py in config-keys.json "defaults").
TEST(HfConfig, DefaultsAreTransformers) {
  auto text = moe::rt::readFile(MOE_GOLDENS_DIR "/config-keys.json");
  ASSERT_TRUE(text) << text.status().message();
  json defaults = json::parse(*text)["defaults"];
  // Only what has no default (or whose default would not fit the sizes).
  // 16 heads: a multiple of every family's default KV heads (8, 16, 4).
  const json minimal = {{"vocab_size", 64}, {"hidden_size", 64}, {"num_hidden_layers", 4},
                        {"num_attention_heads", 16}, {"intermediate_size", 48},
                        {"moe_intermediate_size", 16}, {"num_experts_per_tok", 2}};
  for (const char *type : {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"}) {
    SCOPED_TRACE(type);
    json j = minimal;
    j["model_type"] = type;
    const std::string t = type;
    const bool deepseek = t.rfind("deepseek", 0) == 0;
    if (t == "mixtral")
      j["num_local_experts"] = 8, j.erase("moe_intermediate_size");
    else if (t == "qwen2_moe")
      j["num_experts"] = 8, j["shared_expert_intermediate_size"] = 24;
    else if (t == "qwen3_moe")
      j["num_experts"] = 8;
    else
      j["n_routed_experts"] = 16, j["kv_lora_rank"] = 8, j["qk_nope_head_dim"] = 8,
      j["qk_rope_head_dim"] = 4, j["v_head_dim"] = 8;
    const json &d = defaults[type];
    moe::HfConfig c = moe::HfConfig::parse(j, "config.json");
    EXPECT_EQ(c.rmsNormEps, d["rms_norm_eps"].get<double>());
    EXPECT_EQ(c.maxPositions, d["max_position_embeddings"].get<int64_t>());
    EXPECT_EQ(c.ropeTheta, d["rope_parameters"]["rope_theta"].get<double>());
    EXPECT_EQ(c.tieWordEmbeddings, d["tie_word_embeddings"].get<bool>());
    if (!deepseek)
      EXPECT_EQ(c.numKvHeads, d["num_key_value_heads"].get<int64_t>());
    if (t.rfind("qwen", 0) == 0) {
      EXPECT_EQ(c.normTopkProb, d["norm_topk_prob"].get<bool>());
      int64_t step = d["decoder_sparse_step"].get<int64_t>();
      for (int64_t i = 0; i < 4; ++i)
        EXPECT_EQ(c.sparseLayer[size_t(i)], (i + 1) % step == 0);
    }
    if (t == "qwen2_moe")
      EXPECT_EQ(c.qkvBias, d["qkv_bias"].get<bool>());
    if (deepseek) {
      EXPECT_EQ(c.sharedIntermediateSize, d["n_shared_experts"].get<int64_t>() * 16);
      EXPECT_EQ(c.routedScalingFactor, d["routed_scaling_factor"].get<double>());
      for (int64_t i = 0; i < 4; ++i)
        EXPECT_EQ(c.sparseLayer[size_t(i)], i >= d["first_k_dense_replace"].get<int64_t>());
    }
    if (t == "deepseek_v3") {
      EXPECT_EQ(c.normTopkProb, d["norm_topk_prob"].get<bool>());
      EXPECT_EQ(c.nGroup, d["n_group"].get<int64_t>());
      EXPECT_EQ(c.topkGroup, d["topk_group"].get<int64_t>());
    }
  }
}

TEST(HfConfig, AliasesReadAsTheKeyTheyName) {
  json j = mixtral();
  j.erase("num_local_experts");
  j["num_experts"] = 6;
  EXPECT_EQ(moe::HfConfig::parse(j, "config.json").numExperts, 6);
  j["num_experts"] = "6";
  EXPECT_EQ(errorOf(j), "config.json: key 'num_experts' must be an integer, got \"6\"");
}

TEST(HfConfig, UnknownKeysAreRefusedNullOnesIgnored) {
  json j = mixtral();
  j["some_new_field"] = nullptr;
  EXPECT_EQ(errorOf(j), "");
  j["some_new_field"] = 2;
  EXPECT_NE(errorOf(j).find("key 'some_new_field' is not known for model_type mixtral"),
            std::string::npos);
  j = mixtral();
  j["hidden_act"] = "swish";
  EXPECT_EQ(errorOf(j), "");
  j["hidden_act"] = "relu";
  EXPECT_EQ(errorOf(j), "config.json: key 'hidden_act' is \"relu\": only silu (swish) is "
                        "implemented");
}

// transformers v5: rope_scaling, when set, replaces rope_parameters; the
// object's own rope_theta wins over the top-level key.
TEST(HfConfig, RopeScalingWinsOverRopeParameters) {
  json j = mixtral();
  j["rope_theta"] = 500.0;
  j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 700.0}};
  moe::HfConfig c = moe::HfConfig::parse(j, "config.json");
  EXPECT_EQ(c.ropeTheta, 700.0);
  EXPECT_EQ(c.ropeScaling["factor"], 2.0);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  c = moe::HfConfig::parse(j, "config.json");
  EXPECT_EQ(c.ropeTheta, 500.0);
  EXPECT_EQ(c.ropeScaling["factor"], 4.0);
}

// Qwen2-MoE's default layer_types: sliding on even layers below
// max_window_layers (transformers 5.24's __post_init__).
TEST(HfConfig, Qwen2WindowLayers) {
  json j = {{"model_type", "qwen2_moe"}, {"vocab_size", 10}, {"hidden_size", 8},
            {"intermediate_size", 16}, {"moe_intermediate_size", 4},
            {"shared_expert_intermediate_size", 8}, {"num_hidden_layers", 6},
            {"num_attention_heads", 2}, {"num_key_value_heads", 2}, {"num_experts", 4},
            {"num_experts_per_tok", 2}, {"use_sliding_window", true}, {"sliding_window", 5}, {"max_window_layers", 4}};
  moe::HfConfig c = moe::HfConfig::parse(j, "config.json");
  EXPECT_EQ(c.slidingLayer, (std::vector<bool>{true, false, true, false, false, false}));
  EXPECT_EQ(c.slidingWindow, 5);
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention",
                      "full_attention", "full_attention", "sliding_attention"};
  c = moe::HfConfig::parse(j, "config.json");
  EXPECT_EQ(c.slidingLayer, (std::vector<bool>{false, true, false, false, false, true}));
  j["use_sliding_window"] = false;
  EXPECT_NE(errorOf(j).find("use_sliding_window is false"), std::string::npos);
}

// generation_config.json's eos_token_id (an id or a list) wins over
// config.json's.
TEST(HfConfig, EosFromGenerationConfig) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("hfconfig-eos-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  json j = mixtral();
  j["eos_token_id"] = 2;
  std::ofstream(dir / "config.json") << j.dump();
  EXPECT_EQ(moe::HfConfig::load((dir / "config.json").string()).eosTokenIds,
            (std::vector<int64_t>{2}));
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [7, 3]})";
  EXPECT_EQ(moe::HfConfig::load((dir / "config.json").string()).eosTokenIds,
            (std::vector<int64_t>{7, 3}));
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [7, 40]})";
  try {
    moe::HfConfig::load((dir / "config.json").string());
    ADD_FAILURE() << "eos 40 is outside a vocabulary of 32";
  } catch (const moe::InputError &e) {
    EXPECT_NE(std::string(e.what()).find("eos_token_id 40 is outside the vocabulary [0, 32)"),
              std::string::npos);
  }
  fs::remove_all(dir);
}

} // namespace
