//===- Pipelines.cpp - named compilation pipelines ------------------------===//
#include "compiler/pipelines/Pipelines.h"
#include "compiler/conversion/Passes.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

#include <cstdio>

namespace moe {

namespace {
struct DefaultPipelineOptions
    : mlir::PassPipelineOptions<DefaultPipelineOptions> {
  Option<int64_t> maxBatchTokens{*this, "max-batch-tokens",
                                 llvm::cl::desc("tokens per run"),
                                 llvm::cl::init(256)};
  Option<int64_t> maxContext{*this, "max-context",
                             llvm::cl::desc("KV-cache tokens per sequence"),
                             llvm::cl::init(4096)};
  Option<bool> fusion{*this, "fusion", llvm::cl::desc("run moe-fuse-experts (as moe-compile "
                                                       "--fusion)"),
                      llvm::cl::init(true)};
  Option<bool> splitExperts{*this, "split-experts",
                            llvm::cl::desc("run moe-split-experts (as moe-compile "
                                           "--split-experts)"),
                            llvm::cl::init(false)};
  Option<int64_t> ep{*this, "ep",
                     llvm::cl::desc("expert-parallel ranks (as moe-compile --ep)"),
                     llvm::cl::init(1)};
  Option<int64_t> tp{*this, "tp",
                     llvm::cl::desc("tensor-parallel ranks (as moe-compile --tp)"),
                     llvm::cl::init(1)};
  Option<bool> dpAttention{*this, "dp-attention",
                           llvm::cl::desc("with ep: data-parallel attention (as moe-compile "
                                          "--dp-attention)"),
                           llvm::cl::init(false)};
  Option<std::string> overlap{*this, "overlap",
                              llvm::cl::desc("moe-schedule-overlap policy (as moe-compile "
                                             "--overlap)"),
                              llvm::cl::init("none")};
  Option<int64_t> microBatches{*this, "micro-batches",
                               llvm::cl::desc("moe-schedule-overlap micro-batches"),
                               llvm::cl::init(2)};
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("moe-assign-precision policy"),
                                llvm::cl::init("keep")};
  Option<std::string> weightLayout{*this, "weight-layout",
                                   llvm::cl::desc("moe-assign-precision weight layout (as "
                                                  "moe-compile --weight-layout)"),
                                   llvm::cl::init("rows")};
  Option<std::string> placementProfile{
      *this, "placement-profile",
      llvm::cl::desc("with ep: place experts from this routing profile (moe-place-experts)")};
  Option<int64_t> redundant{*this, "redundant",
                            llvm::cl::desc("with placement-profile: redundant expert slots"),
                            llvm::cl::init(0)};
  Option<int64_t> ranksPerNode{*this, "ranks-per-node",
                               llvm::cl::desc("with placement-profile: ranks per node"),
                               llvm::cl::init(0)};
  Option<std::string> routing{*this, "routing",
                              llvm::cl::desc("moe-set-routing policy (as moe-compile --routing)"),
                              llvm::cl::init("token_choice")};
  Option<double> capacityFactor{*this, "capacity-factor",
                                llvm::cl::desc("moe-set-routing capacity factor"),
                                llvm::cl::init(1.0)};
};
} // namespace

namespace {
bool assignsPrecision(const PipelineOptions &o) {
  return o.precision != "keep" || !o.precisionOverrides.empty() || o.weightLayout != "rows";
}

std::string assignPrecisionText(const PipelineOptions &o) {
  std::string text = "moe-assign-precision{policy=" + o.precision;
  for (size_t i = 0; i < o.precisionOverrides.size(); ++i)
    text += (i ? "," : " overrides=") + o.precisionOverrides[i];
  if (o.weightLayout != "rows")
    text += " weight-layout=" + o.weightLayout;
  return text + "}, ";
}
/// `v` in as many digits as it takes to read back the same double.
std::string exactText(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

/// How the experts go onto the ranks (ep > 1).
std::string shardText(const PipelineOptions &o) {
  if (o.placementProfile.empty())
    return "moe-shard-experts{ep=" + std::to_string(o.ep) +
           (o.dpAttention ? " dp-attention=true" : "") + "}, ";
  return "moe-place-experts{profile=\"" + o.placementProfile + "\" ranks=" +
         std::to_string(o.ep) + " ranks-per-node=" + std::to_string(o.ranksPerNode) +
         " redundant=" + std::to_string(o.redundant) +
         (o.dpAttention ? " dp-attention=true" : "") + "}, ";
}
} // namespace

void buildDefaultPipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  if (options.routing != "token_choice")
    pm.addPass(createSetRoutingPass(SetRoutingPassOptions{options.routing,
                                                          options.capacityFactor}));
  // Precision first: the components are told apart before fusion folds a
  // shared expert into the routed stacks (it folds only when both got the
  // same precision).
  if (assignsPrecision(options)) {
    AssignPrecisionPassOptions precision;
    precision.policy = options.precision;
    precision.overrides = options.precisionOverrides;
    precision.weightLayout = options.weightLayout;
    pm.addPass(createAssignPrecisionPass(precision));
  }
  if (options.fusion)
    pm.addPass(createFuseExpertsPass());
  if (options.splitExperts || options.ep > 1)
    pm.addPass(createSplitExpertsPass());
  pm.addPass(createMoeToPlanPass(MoeToPlanPassOptions{options.maxContext}));
  if (options.ranks() > 1)
    pm.addPass(createReplicateRanksPass(ReplicateRanksPassOptions{options.ranks()}));
  if (options.ep > 1) {
    if (options.placementProfile.empty())
      pm.addPass(createShardExpertsPass(ShardExpertsPassOptions{options.ep, options.dpAttention}));
    else
      pm.addPass(createPlaceExpertsPass(PlaceExpertsPassOptions{
          options.placementProfile, options.ep, options.ranksPerNode, options.redundant,
          options.dpAttention}));
  }
  if (options.tp > 1)
    pm.addPass(createShardTensorsPass(ShardTensorsPassOptions{options.tp}));
  if (options.overlap != "none")
    pm.addPass(createScheduleOverlapPass(
        ScheduleOverlapPassOptions{options.overlap, options.microBatches}));
  pm.addPass(createPlanMemoryPass(PlanMemoryPassOptions{options.maxBatchTokens}));
  // Last: streams must not race on the buffers as placed.
  pm.addPass(createVerifySchedulePass());
}

std::string defaultPipelineText(const PipelineOptions &options) {
  return std::string("builtin.module(") +
         (options.routing != "token_choice"
              ? "moe-set-routing{policy=" + options.routing +
                    " capacity-factor=" + exactText(options.capacityFactor) + "}, "
              : std::string()) +
         (assignsPrecision(options) ? assignPrecisionText(options) : std::string()) +
         (options.fusion ? "moe-fuse-experts, " : "") +
         (options.splitExperts || options.ep > 1 ? "moe-split-experts, " : "") +
         "moe-to-plan{max-context=" + std::to_string(options.maxContext) + "}, " +
         (options.ranks() > 1
              ? "moe-replicate-ranks{ranks=" + std::to_string(options.ranks()) + "}, "
              : std::string()) +
         (options.ep > 1 ? shardText(options) : std::string()) +
         (options.tp > 1 ? "moe-shard-tensors{tp=" + std::to_string(options.tp) + "}, "
                         : std::string()) +
         (options.overlap != "none"
              ? "moe-schedule-overlap{policy=" + options.overlap +
                    " micro-batches=" + std::to_string(options.microBatches) + "}, "
              : std::string()) +
         "moe-plan-memory{max-batch-tokens=" + std::to_string(options.maxBatchTokens) +
         "}, moe-verify-schedule)";
}

void registerPipelines() {
  mlir::PassPipelineRegistration<DefaultPipelineOptions>(
      "moe-default-pipeline",
      "moe module -> planned plan module (moe-set-routing, moe-assign-precision, "
      "moe-fuse-experts, "
      "moe-split-experts, moe-to-plan, moe-replicate-ranks, moe-shard-experts or "
      "moe-place-experts, moe-shard-tensors, moe-schedule-overlap, moe-plan-memory, "
      "moe-verify-schedule)",
      [](mlir::OpPassManager &pm, const DefaultPipelineOptions &o) {
        PipelineOptions options{o.maxBatchTokens, o.maxContext, o.fusion, o.splitExperts,
                                o.ep, o.precision};
        options.placementProfile = o.placementProfile;
        options.redundant = o.redundant;
        options.ranksPerNode = o.ranksPerNode;
        options.routing = o.routing;
        options.capacityFactor = o.capacityFactor;
        options.tp = o.tp;
        options.dpAttention = o.dpAttention;
        options.overlap = o.overlap;
        options.microBatches = o.microBatches;
        options.weightLayout = o.weightLayout;
        buildDefaultPipeline(pm, options);
      });
}

} // namespace moe
