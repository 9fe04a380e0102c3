//===- PlanSchedule.cpp - a plan function as steps on streams -------------===//
#include "compiler/analysis/PlanSchedule.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace moe {

PlanSchedule planSchedule(func::FuncOp fn) {
  PlanSchedule s;
  llvm::DenseMap<Value, int64_t> eventId;
  auto buffer = [&](Value v) {
    auto [it, added] = s.bufferId.try_emplace(v, int64_t(s.buffers.size()));
    if (added)
      s.buffers.push_back(v);
    return it->second;
  };
  fn.walk([&](Operation *op) {
    rt::ScheduleStep step;
    if (auto record = dyn_cast<plan::RecordOp>(op)) {
      step.stream = int(record.getStream());
      step.record = eventId.try_emplace(record.getEvent(), int64_t(eventId.size())).first->second;
    } else if (auto wait = dyn_cast<plan::WaitOp>(op)) {
      step.stream = int(wait.getStream());
      // Its record comes first: it defines the event this op uses.
      step.wait = eventId.lookup(wait.getEvent());
    } else if (isa<plan::LaunchOp, plan::CollectiveOp, plan::OutputOp>(op)) {
      if (auto launch = dyn_cast<plan::LaunchOp>(op))
        step.stream = int(launch.getStream());
      if (auto collective = dyn_cast<plan::CollectiveOp>(op))
        step.stream = int(collective.getStream());
      SmallVector<MemoryEffects::EffectInstance> effects;
      cast<MemoryEffectOpInterface>(op).getEffects(effects);
      for (const MemoryEffects::EffectInstance &e : effects) {
        Value v = e.getValue();
        if (!v || !isa<MemRefType, plan::KvCacheType>(v.getType()))
          continue;
        if (isa<MemoryEffects::Read>(e.getEffect()))
          step.reads.push_back(buffer(v));
        else if (isa<MemoryEffects::Write>(e.getEffect()))
          step.writes.push_back(buffer(v));
      }
    } else {
      return;
    }
    s.steps.push_back(std::move(step));
    s.ops.push_back(op);
  });
  return s;
}

} // namespace moe
