//===- ConfigKeys.cpp - the config.json keys each model type understands --===//
//
// Written from transformers 5.24's configuration_*.py and modeling_*.py (the
// attributes each model reads) and from the published configs of Mixtral,
// Qwen1.5/2/3-MoE and DeepSeek-V2/V3, whose extra keys (DeepSeek's remote
// code) are listed too. test/lit/import/config-keys.test checks that every
// key of transformers' configuration classes is in these tables.
//
//===----------------------------------------------------------------------===//
#include "compiler/import/ConfigKeys.h"

#include <map>

namespace moe {
namespace {

using R = KeyRole;

// Keys of every model type that the importer reads.
const ConfigKey kSharedRead[] = {
    {"model_type", R::Read, "the model family"},
    {"vocab_size", R::Read, "embedding and LM head rows"},
    {"hidden_size", R::Read, "width of the residual stream"},
    {"num_hidden_layers", R::Read, "decoder layers"},
    {"num_attention_heads", R::Read, "query heads"},
    {"max_position_embeddings", R::Read, "longest context; YaRN's default original length"},
    {"rms_norm_eps", R::Read, "RMSNorm epsilon"},
    {"tie_word_embeddings", R::Read, "LM head shares the embedding"},
    {"hidden_act", R::Read, "MLP activation: silu (swish) only"},
    {"torch_dtype", R::Read, "dtype of tensors in --shape-only imports"},
    {"dtype", R::Read, "transformers v5 name of torch_dtype"},
    {"eos_token_id", R::Read, "end of sequence (generation_config.json's wins)"},
    {"rope_theta", R::Read, "RoPE base"},
    {"rope_scaling", R::Read, "RoPE scaling: default, linear, yarn"},
    {"rope_parameters", R::Read, "transformers v5 RoPE base and scaling"},
    {"partial_rotary_factor", R::Read, "must be 1: RoPE on whole heads"},
    {"quantization_config", R::Read, "fp8 block scales; gptq and awq at 4 bits"},
};

// Keys of every model type that do not change inference.
const ConfigKey kSharedInert[] = {
    {"bos_token_id", R::Inert, "a token id: the tokenizer adds it, not the model"},
    {"pad_token_id", R::Inert, "a token id: only the embedding's gradient uses it"},
    {"use_cache", R::Inert, "the runtime always caches keys and values"},
    {"initializer_range", R::Inert, "initialisation of new weights (training)"},
    {"attention_dropout", R::Inert, "dropout is off at inference"},
    {"output_router_logits", R::Inert, "extra outputs for the training loss"},
    {"router_aux_loss_coef", R::Inert, "training loss weight"},
    {"transformers_version", R::Inert, "provenance"},
    {"architectures", R::Inert, "class names for transformers' Auto classes"},
    {"auto_map", R::Inert, "remote-code class names"},
    {"_name_or_path", R::Inert, "provenance"},
    {"name_or_path", R::Inert, "provenance"},
    {"_commit_hash", R::Inert, "provenance"},
    {"output_hidden_states", R::Inert, "extra outputs"},
    {"output_attentions", R::Inert, "extra outputs"},
    {"return_dict", R::Inert, "Python return type"},
    {"torchscript", R::Inert, "Python export flag"},
    {"use_bfloat16", R::Inert, "legacy TensorFlow flag"},
    {"tf_legacy_loss", R::Inert, "training loss"},
    {"chunk_size_feed_forward", R::Inert, "chunks the MLP over tokens: same values"},
    {"is_encoder_decoder", R::Inert, "false for these decoders"},
    {"is_decoder", R::Inert, "architecture flag of encoder models"},
    {"add_cross_attention", R::Inert, "architecture flag of encoder-decoder models"},
    {"cross_attention_hidden_size", R::Inert, "architecture flag of encoder-decoder models"},
    {"tie_encoder_decoder", R::Inert, "architecture flag of encoder-decoder models"},
    {"decoder_start_token_id", R::Inert, "encoder-decoder generation"},
    {"sep_token_id", R::Inert, "a token id for the tokenizer"},
    {"pruned_heads", R::Inert, "empty in every published checkpoint"},
    {"id2label", R::Inert, "classification heads"},
    {"label2id", R::Inert, "classification heads"},
    {"num_labels", R::Inert, "classification heads"},
    {"problem_type", R::Inert, "classification heads"},
    {"finetuning_task", R::Inert, "provenance"},
    {"task_specific_params", R::Inert, "pipeline defaults"},
    {"tokenizer_class", R::Inert, "tokenizer_config.json names the tokenizer"},
    {"prefix", R::Inert, "pipeline prompt prefix"},
    {"attn_implementation", R::Inert, "which attention kernel transformers uses: same values"},
    {"_attn_implementation", R::Inert, "which attention kernel transformers uses: same values"},
    {"experts_implementation", R::Inert, "which experts kernel transformers uses: same values"},
    {"_experts_implementation", R::Inert, "which experts kernel transformers uses: same values"},
    // Generation defaults that old configs carry; transformers v5 moves them
    // out of the model config. Sampling is chosen per run (moe-run flags).
    {"max_length", R::Inert, "generation default"},
    {"min_length", R::Inert, "generation default"},
    {"do_sample", R::Inert, "generation default"},
    {"early_stopping", R::Inert, "generation default"},
    {"num_beams", R::Inert, "generation default"},
    {"num_beam_groups", R::Inert, "generation default"},
    {"diversity_penalty", R::Inert, "generation default"},
    {"temperature", R::Inert, "generation default"},
    {"top_k", R::Inert, "generation default"},
    {"top_p", R::Inert, "generation default"},
    {"typical_p", R::Inert, "generation default"},
    {"epsilon_cutoff", R::Inert, "generation default"},
    {"eta_cutoff", R::Inert, "generation default"},
    {"repetition_penalty", R::Inert, "generation default"},
    {"encoder_repetition_penalty", R::Inert, "generation default"},
    {"length_penalty", R::Inert, "generation default"},
    {"no_repeat_ngram_size", R::Inert, "generation default"},
    {"encoder_no_repeat_ngram_size", R::Inert, "generation default"},
    {"bad_words_ids", R::Inert, "generation default"},
    {"num_return_sequences", R::Inert, "generation default"},
    {"output_scores", R::Inert, "generation default"},
    {"return_dict_in_generate", R::Inert, "generation default"},
    {"forced_bos_token_id", R::Inert, "generation default"},
    {"forced_eos_token_id", R::Inert, "generation default"},
    {"remove_invalid_values", R::Inert, "generation default"},
    {"exponential_decay_length_penalty", R::Inert, "generation default"},
    {"suppress_tokens", R::Inert, "generation default"},
    {"begin_suppress_tokens", R::Inert, "generation default"},
    {"num_assistant_tokens", R::Inert, "generation default"},
    {"num_assistant_tokens_schedule", R::Inert, "generation default"},
    {"assistant_confidence_threshold", R::Inert, "generation default"},
    {"assistant_lookbehind", R::Inert, "generation default"},
    {"target_lookbehind", R::Inert, "generation default"},
};

// Grouped-query attention (Mixtral, Qwen).
const ConfigKey kGqa[] = {
    {"num_key_value_heads", R::Read, "key/value heads"},
    {"head_dim", R::Read, "per-head width (default hidden_size / heads)"},
};

const ConfigKey kMixtral[] = {
    {"intermediate_size", R::Read, "each expert's width"},
    {"num_local_experts", R::Read, "routed experts"},
    {"num_experts", R::Alias, "num_local_experts"},
    {"num_experts_per_tok", R::Read, "experts per token"},
    {"sliding_window", R::Read, "attention window of every layer (null: none)"},
    {"router_jitter_noise", R::Inert, "noise on router logits in training only"},
};

const ConfigKey kQwenShared[] = {
    {"intermediate_size", R::Read, "dense layers' width"},
    {"moe_intermediate_size", R::Read, "each expert's width"},
    {"num_experts_per_tok", R::Read, "experts per token"},
    {"norm_topk_prob", R::Read, "renormalise the top-k weights"},
    {"decoder_sparse_step", R::Read, "every n-th layer is sparse"},
    {"mlp_only_layers", R::Read, "layers with a dense MLP"},
    {"use_sliding_window", R::Read, "sliding-window attention on"},
    {"sliding_window", R::Read, "the window, when use_sliding_window"},
};

const ConfigKey kQwen2Moe[] = {
    {"num_experts", R::Read, "routed experts"},
    {"shared_expert_intermediate_size", R::Read, "the shared expert's width"},
    {"qkv_bias", R::Read, "bias on q/k/v projections (default true)"},
    {"max_window_layers", R::Read, "layers from here on attend without a window"},
    {"layer_types", R::Read, "per layer: full_attention or sliding_attention"},
};

const ConfigKey kQwen3Moe[] = {
    {"num_local_experts", R::Read, "routed experts"},
    {"num_experts", R::Alias, "num_local_experts"},
    {"attention_bias", R::Read, "bias on q/k/v/o projections"},
    {"max_window_layers", R::Inert, "transformers' qwen3_moe does not read it (the window, when on, "
                                    "covers every layer)"},
};

const ConfigKey kDeepseekShared[] = {
    {"num_key_value_heads", R::Read, "must equal num_attention_heads (MLA)"},
    {"q_lora_rank", R::Read, "query low-rank width (null: plain q_proj)"},
    {"kv_lora_rank", R::Read, "latent KV width"},
    {"qk_nope_head_dim", R::Read, "per-head query/key width without RoPE"},
    {"qk_rope_head_dim", R::Read, "per-head query/key width with RoPE"},
    {"qk_head_dim", R::Read, "transformers v5 writes it: must be qk_nope + qk_rope_head_dim"},
    {"v_head_dim", R::Read, "per-head value width"},
    {"intermediate_size", R::Read, "dense layers' width"},
    {"moe_intermediate_size", R::Read, "each expert's width"},
    {"n_routed_experts", R::Read, "routed experts"},
    {"num_experts_per_tok", R::Read, "experts per token"},
    {"n_shared_experts", R::Read, "shared experts (one MLP of that many widths)"},
    {"routed_scaling_factor", R::Read, "scale of the routed output"},
    {"n_group", R::Read, "expert groups"},
    {"topk_group", R::Read, "groups a token may use"},
    {"first_k_dense_replace", R::Read, "leading dense layers"},
    {"attention_bias", R::Read, "bias on q_a_proj, kv_a_proj_with_mqa and o_proj"},
    {"topk_method", R::Read, "expert selection"},
    {"norm_topk_prob", R::Read, "renormalise the top-k weights"},
    {"scoring_func", R::Read, "DeepSeek's code: must match transformers' (V2 softmax, V3 sigmoid)"},
    {"moe_layer_freq", R::Read, "DeepSeek's code: must be 1 (transformers does not read it)"},
    {"pretraining_tp", R::Inert, "tensor-parallel degree of pretraining: same values"},
    {"ep_size", R::Inert, "expert-parallel degree of DeepSeek's deployment"},
    {"aux_loss_alpha", R::Inert, "training loss weight"},
    {"seq_aux", R::Inert, "training loss"},
};

const ConfigKey kDeepseekV2[] = {
    {"num_experts", R::Alias, "n_routed_experts"},
    {"mlp_bias", R::Read, "bias on MLP projections: false only"},
    {"head_dim", R::Inert, "transformers' deepseek_v2 does not use it (RoPE spans "
                           "qk_rope_head_dim)"},
};

const ConfigKey kDeepseekV3[] = {
    {"num_local_experts", R::Alias, "n_routed_experts"},
    {"rope_interleave", R::Read, "RoPE on interleaved pairs (default true)"},
    {"head_dim", R::Read, "must equal qk_rope_head_dim (transformers 5 sizes RoPE by it)"},
    {"num_nextn_predict_layers", R::Inert, "multi-token-prediction layers: their tensors (layers "
                                           "after num_hidden_layers) are skipped"},
    {"num_mtp_layers", R::Alias, "num_nextn_predict_layers"},
};

template <size_t... N> std::vector<ConfigKey> join(const ConfigKey (&...parts)[N]) {
  std::vector<ConfigKey> out;
  (out.insert(out.end(), std::begin(parts), std::end(parts)), ...);
  return out;
}

} // namespace

const std::vector<ConfigKey> &configKeys(Family family) {
  static const std::map<Family, std::vector<ConfigKey>> tables = {
      {Family::Mixtral, join(kSharedRead, kSharedInert, kGqa, kMixtral)},
      {Family::Qwen2Moe, join(kSharedRead, kSharedInert, kGqa, kQwenShared, kQwen2Moe)},
      {Family::Qwen3Moe, join(kSharedRead, kSharedInert, kGqa, kQwenShared, kQwen3Moe)},
      {Family::DeepseekV2, join(kSharedRead, kSharedInert, kDeepseekShared, kDeepseekV2)},
      {Family::DeepseekV3, join(kSharedRead, kSharedInert, kDeepseekShared, kDeepseekV3)},
  };
  return tables.at(family);
}

const ConfigKey *findConfigKey(Family family, const std::string &name) {
  for (const ConfigKey &k : configKeys(family))
    if (name == k.name)
      return &k;
  return nullptr;
}

const char *familyName(Family family) {
  switch (family) {
  case Family::Mixtral: return "mixtral";
  case Family::Qwen2Moe: return "qwen2_moe";
  case Family::Qwen3Moe: return "qwen3_moe";
  case Family::DeepseekV2: return "deepseek_v2";
  case Family::DeepseekV3: return "deepseek_v3";
  }
  return "?";
}

} // namespace moe
