//===- Pipelines.h - named compilation pipelines ----------------*- C++ -*-===//
#ifndef MOE_COMPILER_PIPELINES_PIPELINES_H
#define MOE_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe {

struct PipelineOptions {
  int64_t maxBatchTokens = 256;
  int64_t maxContext = 4096;
  bool fusion = true; ///< run moe-fuse-experts
  bool splitExperts = false; ///< run moe-split-experts
  int64_t ep = 1; ///< > 1: that many ranks, experts partitioned (implies splitExperts)
  std::string precision = "keep"; ///< moe-assign-precision's policy
  std::vector<std::string> precisionOverrides; ///< and its component=precision overrides
  /// With ep > 1: moe-place-experts from this routing profile instead of
  /// moe-shard-experts, with these redundant slots and ranks per node.
  std::string placementProfile;
  int64_t redundant = 0, ranksPerNode = 0;
  /// moe-set-routing's policy (token_choice: the pass does not run).
  std::string routing = "token_choice";
  double capacityFactor = 1.0;
  /// > 1: that many ranks, attention heads and MLP columns split
  /// (moe-shard-tensors); with ep > 1 as well, both are the rank count.
  int64_t tp = 1;
  /// With ep > 1: the ranks hold different tokens (data-parallel attention)
  /// and exchange expert rows (moe-shard-experts{dp-attention}).
  bool dpAttention = false;
  /// moe-schedule-overlap's policy (none: the pass does not run) and parts.
  std::string overlap = "none";
  int64_t microBatches = 2;
  /// moe-assign-precision's weight-layout (rows or panels).
  std::string weightLayout = "rows";
  /// The rank programs the plan has.
  int64_t ranks() const { return ep > tp ? ep : tp; }
};

/// moe module -> planned plan module: moe-set-routing (unless token
/// choice), moe-assign-precision (unless the policy is keep without
/// overrides and the weight layout rows), moe-fuse-experts (unless off),
/// moe-split-experts (if on, or ep > 1), moe-to-plan, with ep or tp > 1
/// moe-replicate-ranks, then moe-shard-experts (or, with a placement
/// profile, moe-place-experts) if ep > 1 and moe-shard-tensors if tp > 1,
/// moe-schedule-overlap (unless its policy is none), moe-plan-memory,
/// moe-verify-schedule.
void buildDefaultPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);
/// The textual form of that pipeline (recorded in plan provenance).
std::string defaultPipelineText(const PipelineOptions &options);
/// Registers `moe-default-pipeline` for moe-opt.
void registerPipelines();

} // namespace moe

#endif
