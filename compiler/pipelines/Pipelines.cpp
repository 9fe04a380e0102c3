//===- Pipelines.cpp - named compilation pipelines ------------------------===//
#include "compiler/pipelines/Pipelines.h"
#include "compiler/conversion/Passes.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

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
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("moe-assign-precision policy"),
                                llvm::cl::init("keep")};
};
} // namespace

namespace {
bool assignsPrecision(const PipelineOptions &o) {
  return o.precision != "keep" || !o.precisionOverrides.empty();
}

std::string assignPrecisionText(const PipelineOptions &o) {
  std::string text = "moe-assign-precision{policy=" + o.precision;
  for (size_t i = 0; i < o.precisionOverrides.size(); ++i)
    text += (i ? "," : " overrides=") + o.precisionOverrides[i];
  return text + "}, ";
}
} // namespace

void buildDefaultPipeline(mlir::OpPassManager &pm, const PipelineOptions &options) {
  // Precision first: the components are told apart before fusion folds a
  // shared expert into the routed stacks (it folds only when both got the
  // same precision).
  if (assignsPrecision(options)) {
    AssignPrecisionPassOptions precision;
    precision.policy = options.precision;
    precision.overrides = options.precisionOverrides;
    pm.addPass(createAssignPrecisionPass(precision));
  }
  if (options.fusion)
    pm.addPass(createFuseExpertsPass());
  if (options.splitExperts || options.ep > 1)
    pm.addPass(createSplitExpertsPass());
  pm.addPass(createMoeToPlanPass(MoeToPlanPassOptions{options.maxContext}));
  if (options.ep > 1) {
    pm.addPass(createReplicateRanksPass(ReplicateRanksPassOptions{options.ep}));
    pm.addPass(createShardExpertsPass(ShardExpertsPassOptions{options.ep}));
  }
  pm.addPass(createPlanMemoryPass(PlanMemoryPassOptions{options.maxBatchTokens}));
  // Last: streams must not race on the buffers as placed.
  pm.addPass(createVerifySchedulePass());
}

std::string defaultPipelineText(const PipelineOptions &options) {
  return std::string("builtin.module(") +
         (assignsPrecision(options) ? assignPrecisionText(options) : std::string()) +
         (options.fusion ? "moe-fuse-experts, " : "") +
         (options.splitExperts || options.ep > 1 ? "moe-split-experts, " : "") +
         "moe-to-plan{max-context=" + std::to_string(options.maxContext) + "}, " +
         (options.ep > 1 ? "moe-replicate-ranks{ranks=" + std::to_string(options.ep) +
                               "}, moe-shard-experts{ep=" + std::to_string(options.ep) + "}, "
                         : std::string()) +
         "moe-plan-memory{max-batch-tokens=" + std::to_string(options.maxBatchTokens) +
         "}, moe-verify-schedule)";
}

void registerPipelines() {
  mlir::PassPipelineRegistration<DefaultPipelineOptions>(
      "moe-default-pipeline",
      "moe module -> planned plan module (moe-assign-precision, moe-fuse-experts, "
      "moe-split-experts, moe-to-plan, moe-replicate-ranks, moe-shard-experts, moe-plan-memory, "
      "moe-verify-schedule)",
      [](mlir::OpPassManager &pm, const DefaultPipelineOptions &o) {
        buildDefaultPipeline(pm, {o.maxBatchTokens, o.maxContext, o.fusion, o.splitExperts,
                                  o.ep, o.precision});
      });
}

} // namespace moe
