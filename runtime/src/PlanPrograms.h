//===- PlanPrograms.h - each rank's program, and the ranks together, checked -*- C++ -*-===//
#ifndef MOE_RUNTIME_SRC_PLANPROGRAMS_H
#define MOE_RUNTIME_SRC_PLANPROGRAMS_H

#include "moe/abi/PlanFormat.h"
#include "moe/abi/Status.h"

#include <string>

namespace moe::rt {

/// [offset, offset + size) lies in [0, limit), without overflowing.
inline bool fits(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}
/// offset + size as text, also when it does not fit in 64 bits.
inline std::string end(uint64_t offset, uint64_t size) {
  uint64_t e = 0;
  return __builtin_add_overflow(offset, size, &e) ? "2^64 or more" : std::to_string(e);
}

/// The most rank programs a plan may hold.
inline constexpr uint32_t kMaxRanks = 4096;

/// Checks Plan.groups: known kinds, ranks ascending, distinct and below the
/// number of programs. Run before the programs are checked.
Status checkGroups(const plan::Plan &plan);

/// Checks program `rank`: it says it is that rank; its inputs, output and
/// instructions (kernels with their operands and parameters, collectives
/// with theirs) name tensors of the right storage; it reads only weights of
/// its own rank's files, and their bytes are its stated weight_bytes; every
/// arena tensor it touches lies in its arena; then its shapes
/// (PlanShapes.h) and its streams (PlanStreams.h). Run after the tensors
/// have been checked.
Status checkProgram(const plan::Plan &plan, uint32_t rank);

/// Checks what the ranks share: every program runs the same collectives in
/// the same order on the same sizes, each among a group of the same kind
/// and size whose members all run it there (else the ranks would wait for
/// each other forever), and the expert placement covers every MoE layer's
/// experts with slots on existing ranks.
Status checkRanks(const plan::Plan &plan);

} // namespace moe::rt

#endif
