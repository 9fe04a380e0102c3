// config.json normalisation: derived values checked against closed forms.
#include "compiler/import/HfConfig.h"
#include "compiler/import/Safetensors.h"

#include <cmath>
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
            {"num_experts", 4}, {"num_experts_per_tok", 2},
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

} // namespace
