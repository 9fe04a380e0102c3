//===- PlanFormat.h - plan file names and format version -------*- C++ -*-===//
//
// What the compiler writes and the runtime reads; see abi/schema/plan.fbs.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_PLANFORMAT_H
#define MOE_RUNTIME_PLANFORMAT_H

#include "moe/abi/Checksum.h"
#include "abi/schema/plan_generated.h"

#include <cstdint>
#include <optional>
#include <string>

namespace moe::rt {

/// The plan file inside a plan directory.
inline constexpr const char *kPlanFileName = "plan.moeplan";
/// Weight files are named weights-<n>.bin beside it.
inline constexpr const char *kWeightFilePrefix = "weights-";

/// 2.0: a program per rank (instructions, inputs, outputs, arena and
/// weight bytes), weight files owned by a rank, collective instructions, the
/// expert placement table. 1.x history: 1.1 tokenizer and eos_token_id, I8
/// KV; 1.2 AddRmsNorm; 1.3 scaled I8/I4/F8E4M3 weights and shared experts;
/// 1.4 ExpertsParams.grouped; 1.5 eos_token_ids; 1.6 RouterParams.layer;
/// 1.7 Instruction.waits and records (events between streams). 2.1: the
/// dispatch, expert_rows and combine kernels (DispatchParams). 2.2: an
/// expert_rows' held experts and replicas (ExpertsParams.held, replicas,
/// replica). 2.3: routing policies (RouterParams.policy, capacity_factor).
/// 2.4: all_to_all_v exchanges expert rows with their slots and returns
/// them (data-parallel attention; the 2.0 form with count tensors was
/// never run). 2.5: micro-batches, tensors that are rows of another
/// (Tensor.base, part, parts); shape-only plans (Provenance.shape_only).
/// 2.6: the checkpoint's tokenizer.json and chat template (Plan.text).
/// 2.7: W8A8 weights (Tensor.int8_activations).
/// 2.8: weights in panels of 8 rows (Tensor.layout). 2.9: an embedding
/// table in panels (tied to an LM head in panels). 2.10: the weights'
/// checksum algorithm (Plan.weight_checksum): XXH3-64 (kWeightChecksum).
/// 2.11: W4A8 weights (Tensor.int8_activations on I4). 2.12: process
/// groups (Plan.groups, Instruction.group): collectives among some ranks.
inline constexpr uint16_t kFormatMajor = 2;
inline constexpr uint16_t kFormatMinor = 12;

/// The checksum algorithm of the weights of a plan the compiler writes
/// (WeightChecksum.h computes each algorithm; readers, and `moe-plan synth`
/// rewriting a plan's weights, use the one the plan names).
inline constexpr plan::WeightChecksum kWeightChecksum = plan::WeightChecksum::XXH3_64;

/// plan.moeplan ends with this 8-byte tag and an 8-byte little-endian
/// checksum64 of every byte before the tag, so that any flipped byte is
/// caught before the FlatBuffer is read.
inline constexpr char kPlanTrailerTag[8] = {'M', 'O', 'E', 'P', 'S', 'U', 'M', '1'};
inline constexpr uint64_t kPlanTrailerBytes = 16;

/// The trailer that seals a plan body of `size` bytes at `body`.
inline std::string planTrailer(const void *body, size_t size) {
  std::string trailer(kPlanTrailerTag, sizeof kPlanTrailerTag);
  const uint64_t sum = checksum64(body, size);
  for (int i = 0; i < 8; ++i)
    trailer.push_back(char((sum >> (8 * i)) & 0xff));
  return trailer;
}

/// The most micro-batches (Tensor.parts) a step is split into.
inline constexpr int kMaxMicroBatches = 16;

/// Every weight starts at a multiple of this in its file.
inline constexpr uint64_t kWeightAlignment = 64;

/// "f32", "bf16", "int8", "fp8" -> the KV-cache element type.
inline std::optional<plan::DType> parseKvDtype(const std::string &name) {
  if (name == "f32")
    return plan::DType::F32;
  if (name == "bf16")
    return plan::DType::BF16;
  if (name == "int8")
    return plan::DType::I8;
  if (name == "fp8")
    return plan::DType::F8E4M3;
  return std::nullopt;
}

} // namespace moe::rt

#endif
