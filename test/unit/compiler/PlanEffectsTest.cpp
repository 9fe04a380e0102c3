// The plan dialect's ops declare their memory effects: a launch reads its
// inputs, writes its outputs and reads and writes its KV-cache layer; an
// output reads its value; an alloc allocates. Passes that order launches
// (stream assignment, the race verifier) are built on these.
#include "compiler/Registration.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

namespace {

using namespace mlir;

const char *kIr = R"(
func.func @main() {
  %kv = plan.kv_cache 0 gqa k_width 8 v_width 8 : !plan.kv_cache
  %pos = plan.input 1 : memref<?xi32>
  %q = plan.alloc : memref<?x8xf32>
  %o = plan.alloc : memref<?x8xf32>
  plan.launch attention ins(%q, %q, %q, %pos : memref<?x8xf32>, memref<?x8xf32>, memref<?x8xf32>, memref<?xi32>) outs(%o : memref<?x8xf32>) kv %kv params #plan.attention<layer = 0, num_heads = 1, num_kv_heads = 1, head_dim = 8, scale = 0.35 : f32, rope = <inv_freq = [1.0, 0.1, 0.01, 0.001], attention_factor = 1.0 : f32, interleaved = false>, sliding_window = 0, qk_norm_eps = 1.0e-6 : f32>
  plan.output %o : memref<?x8xf32>
  return
}
)";

/// (value, effect kind) pairs an op declares.
std::vector<std::pair<Value, std::string>> effectsOf(Operation *op) {
  auto iface = dyn_cast<MemoryEffectOpInterface>(op);
  EXPECT_TRUE(iface) << op->getName().getStringRef().str() << " declares no effects";
  std::vector<std::pair<Value, std::string>> out;
  if (!iface)
    return out;
  SmallVector<MemoryEffects::EffectInstance> effects;
  iface.getEffects(effects);
  for (auto &e : effects) {
    std::string kind = isa<MemoryEffects::Read>(e.getEffect())    ? "read"
                       : isa<MemoryEffects::Write>(e.getEffect()) ? "write"
                       : isa<MemoryEffects::Allocate>(e.getEffect()) ? "alloc"
                                                                     : "other";
    out.push_back({e.getValue(), kind});
  }
  return out;
}

TEST(PlanEffects, LaunchReadsInsWritesOutsAndTheKvLayer) {
  DialectRegistry registry;
  ::moe::registerAllDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kIr, &ctx);
  ASSERT_TRUE(module);
  plan::LaunchOp launch;
  plan::OutputOp output;
  plan::AllocOp alloc;
  module->walk([&](Operation *op) {
    if (auto l = dyn_cast<plan::LaunchOp>(op))
      launch = l;
    if (auto o = dyn_cast<plan::OutputOp>(op))
      output = o;
    if (auto a = dyn_cast<plan::AllocOp>(op); a && !alloc)
      alloc = a;
  });
  ASSERT_TRUE(launch && output && alloc);
  auto effects = effectsOf(launch);
  auto count = [&](Value v, const std::string &kind) {
    return std::count(effects.begin(), effects.end(), std::make_pair(v, kind));
  };
  for (Value in : launch.getIns())
    EXPECT_GE(count(in, "read"), 1);
  EXPECT_EQ(count(launch.getOuts()[0], "write"), 1);
  EXPECT_EQ(count(launch.getOuts()[0], "read"), 0);
  EXPECT_EQ(count(launch.getKv(), "read"), 1);
  EXPECT_EQ(count(launch.getKv(), "write"), 1);
  EXPECT_EQ(effectsOf(output), (std::vector<std::pair<Value, std::string>>{
                                   {output.getValue(), "read"}}));
  EXPECT_EQ(effectsOf(alloc),
            (std::vector<std::pair<Value, std::string>>{{alloc.getResult(), "alloc"}}));
}

} // namespace
