//===- PlanSchedule.cpp - a plan function as steps on streams -------------===//
#include "compiler/analysis/PlanSchedule.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace moe {

PlanSchedule planSchedule(func::FuncOp fn) {
  PlanSchedule s;
  llvm::DenseMap<Value, int64_t> eventId;
  std::function<int64_t(Value)> buffer = [&](Value v) -> int64_t {
    if (auto it = s.bufferId.find(v); it != s.bufferId.end())
      return it->second;
    rt::RowRange range;
    int64_t base = int64_t(s.buffers.size());
    if (auto rows = v.getDefiningOp<plan::RowsOp>()) {
      base = buffer(rows.getBase());
      range = {int64_t(rows.getPart()), int64_t(rows.getParts())};
    }
    const int64_t id = int64_t(s.buffers.size());
    s.bufferId[v] = id;
    s.buffers.push_back(v);
    s.base.push_back(base);
    s.rows.push_back(range);
    return id;
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

bool PlanSchedule::overlap(int64_t a, int64_t b,
                           const std::function<bool(int64_t, int64_t)> &baseOverlap) const {
  const int64_t x = base[size_t(a)], y = base[size_t(b)];
  if (x == y)
    return rows[size_t(a)].intersects(rows[size_t(b)]);
  return baseOverlap(x, y);
}

} // namespace moe
