//===- PlanFormat.h - plan file names and format version -------*- C++ -*-===//
//
// What the compiler writes and the runtime reads; see runtime/schema/plan.fbs.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_PLANFORMAT_H
#define MOE_RUNTIME_PLANFORMAT_H

#include "runtime/schema/plan_generated.h"

#include <cstdint>
#include <optional>
#include <string>

namespace moe::rt {

/// The plan file inside a plan directory.
inline constexpr const char *kPlanFileName = "plan.moeplan";
/// Weight files are named weights-<n>.bin beside it.
inline constexpr const char *kWeightFilePrefix = "weights-";

inline constexpr uint16_t kFormatMajor = 1;
/// 1.1 added ModelConfig.tokenizer and eos_token_id, and DType I8 (KV cache);
/// 1.2 added OpCode AddRmsNorm; 1.3 added I4 and scaled I8/I4/F8E4M3
/// weights (Tensor.scales, group and row_group) and always-on experts
/// (ExpertsParams.num_shared); 1.4 added ExpertsParams.grouped (the expert
/// schedule; plans before it run grouped); 1.5 added ModelConfig.eos_token_ids
/// (every token that ends a sequence); 1.6 RouterParams.layer (the decoder
/// layer, data instead of a parsed location); 1.7 Instruction.waits and
/// records (events between streams).
inline constexpr uint16_t kFormatMinor = 7;

/// plan.moeplan ends with this 8-byte tag and an 8-byte little-endian
/// checksum64 of every byte before the tag, so that any flipped byte is
/// caught before the FlatBuffer is read.
inline constexpr char kPlanTrailerTag[8] = {'M', 'O', 'E', 'P', 'S', 'U', 'M', '1'};
inline constexpr uint64_t kPlanTrailerBytes = 16;

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
