//===- PlanFormat.h - plan file names and format version -------*- C++ -*-===//
//
// What the compiler writes and the runtime reads; see runtime/schema/plan.fbs.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_PLANFORMAT_H
#define MOE_RUNTIME_PLANFORMAT_H

#include <cstdint>

namespace moe::rt {

/// The plan file inside a plan directory.
inline constexpr const char *kPlanFileName = "plan.moeplan";
/// Weight files are named weights-<n>.bin beside it.
inline constexpr const char *kWeightFilePrefix = "weights-";

inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 0;

/// Every weight starts at a multiple of this in its file.
inline constexpr uint64_t kWeightAlignment = 64;

} // namespace moe::rt

#endif
