//===- HfConfig.h - a Hugging Face MoE config.json, normalised --*- C++ -*-===//
//
// Reads config.json of the supported model types into one struct whose
// fields mean the same for every family. Keys that shape the model are
// required; the rest take the defaults of the transformers configuration
// class. Every key must be in the model type's table (ConfigKeys.h), and a
// key set to a value that is not implemented is refused by name. Plain C++
// (no MLIR).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_IMPORT_HFCONFIG_H
#define MOE_COMPILER_IMPORT_HFCONFIG_H

#include "compiler/import/ConfigKeys.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace moe {

/// quantization_config of a 4-bit GPTQ or AWQ checkpoint, as far as reading
/// its tensors needs it; the groups themselves come from each tensor's
/// shapes (compiler/import/PackedInt4.h).
struct Int4Format {
  enum class Packing { Gptq, Awq };
  Packing packing = Packing::Gptq;
  int64_t groupSize = 0; ///< group_size; -1: one group per row
  /// GPTQ checkpoint_format "gptq" (v1) stores each zero point minus one;
  /// "gptq_v2" and AWQ store it as it is.
  bool zeroMinusOne = false;
  /// Every zero point 8 (GPTQ sym): the plan's int4. Otherwise (GPTQ sym
  /// false, AWQ) the plan stores q - zero as int8, exactly.
  bool symmetric = true;
  /// GPTQ desc_act (act-order): each layer must then have its g_idx.
  bool descAct = false;
};

struct HfConfig {
  std::string modelType;
  Family family = Family::Mixtral;

  int64_t vocabSize = 0, hiddenSize = 0, numLayers = 0;
  int64_t maxPositions = 0;
  double rmsNormEps = 1e-6;
  bool tieWordEmbeddings = false;
  std::string torchDtype; ///< "bfloat16", "float32", ... as in config.json
  /// Tokens that end a sequence: generation_config.json's eos_token_id when
  /// that file has one, else config.json's (an id or a list of ids).
  std::vector<int64_t> eosTokenIds;
  /// config.json's eos_token_id (the first of a list), -1 if none: the id a
  /// byte tokenizer starts sequences with.
  int64_t configEosTokenId = -1;
  /// "byt5" when tokenizer_config.json names ByT5Tokenizer (token = byte + 3);
  /// empty when the tokenizer is one the runtime cannot apply.
  std::string tokenizer;

  // Attention. GQA uses numHeads/numKvHeads/headDim; MLA the fields below.
  int64_t numHeads = 0, numKvHeads = 0, headDim = 0;
  double ropeTheta = 10000.0;
  nlohmann::json ropeScaling;            ///< null when absent
  int64_t slidingWindow = 0;             ///< the window of sliding layers
  std::vector<bool> slidingLayer;        ///< per layer: attends within slidingWindow
  bool qkvBias = false;                  ///< bias on q/k/v (MLA: q_a_proj, kv_a_proj)
  bool oBias = false;                    ///< bias on o_proj
  bool qkNorm = false;                   ///< RMSNorm of q and k per head
  bool mla = false;
  int64_t qLoraRank = 0;                 ///< 0: plain q_proj
  int64_t kvLoraRank = 0, qkNopeHeadDim = 0, qkRopeHeadDim = 0, vHeadDim = 0;
  double softmaxScale = 0;               ///< MLA, with the YaRN mscale folded in
  bool ropeInterleave = true;            ///< MLA: RoPE on pairs (2i, 2i+1), else (i, i+d/2)

  // Feed-forward.
  int64_t intermediateSize = 0;          ///< dense layers
  int64_t moeIntermediateSize = 0;       ///< each routed expert
  int64_t sharedIntermediateSize = 0;    ///< 0: no shared expert
  bool sharedExpertGate = false;         ///< Qwen2-MoE sigmoid gate
  int64_t numExperts = 0, topK = 0;
  bool normTopkProb = false;
  std::string scoring = "softmax";       ///< "softmax" | "sigmoid"
  std::string topkMethod = "greedy";     ///< greedy | group_limited_greedy | noaux_tc
  int64_t nGroup = 1, topkGroup = 1;
  double routedScalingFactor = 1.0;
  std::vector<bool> sparseLayer;         ///< per layer: routed experts or dense

  // FP8 block quantisation (DeepSeek-V3 checkpoints).
  std::vector<int64_t> fp8Block;         ///< empty: not quantised
  /// GPTQ and AWQ 4-bit checkpoints: how their packed tensors read;
  /// empty otherwise.
  std::optional<Int4Format> int4;

  /// Multi-token-prediction layers stored after the decoder layers
  /// (DeepSeek-V3's num_nextn_predict_layers); their tensors are skipped.
  int64_t mtpLayers = 0;

  /// Where the fields came from, for messages.
  std::string path;

  /// Reads and checks `path` (a config.json), and the tokenizer_config.json
  /// and generation_config.json beside it when they exist. Throws InputError.
  static HfConfig load(const std::string &path);
  /// Parses an already-read JSON object; `path` is used in messages.
  static HfConfig parse(const nlohmann::json &json, const std::string &path);

  /// The safetensors dtype a tensor of this model has when no header says so.
  std::string defaultDtype() const;
};

/// A JSON file beside config.json (`configPath`), or null when there is
/// none; an InputError when it is not a JSON object.
nlohmann::json readSibling(const std::string &configPath, const char *name);

} // namespace moe

#endif
