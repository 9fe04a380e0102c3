//===- PlanStreams.cpp - the order between a plan's streams, checked ------===//
#include "PlanStreams.h"
#include "moe/runtime/PlanView.h"
#include "moe/abi/Schedule.h"

#include <algorithm>
#include <string>
#include <vector>

namespace moe::rt {

namespace {

std::string describe(const plan::Instruction &inst, uint32_t index) {
  return "instruction " + std::to_string(index) + " (" + instructionName(inst) + " on stream " +
         std::to_string(inst.stream()) + ")";
}

} // namespace

Status checkStreams(const plan::Plan &p, const plan::Program &program) {
  const auto &insts = *program.instructions();
  const uint32_t numTensors = p.tensors()->size();
  uint64_t events = 0;
  for (const plan::Instruction *inst : insts)
    events += inst->records() ? inst->records()->size() : 0;
  // An instruction is its waits, its launch and its records, in that order.
  std::vector<ScheduleStep> steps;
  std::vector<uint32_t> instructionOf;
  auto add = [&](ScheduleStep step, uint32_t i) {
    steps.push_back(std::move(step));
    instructionOf.push_back(i);
  };
  for (uint32_t i = 0; i < insts.size(); ++i) {
    const plan::Instruction &inst = *insts.Get(i);
    for (const auto *list : {inst.waits(), inst.records()})
      if (list)
        for (uint32_t e : *list)
          if (e >= events)
            return Status::error(describe(inst, i) + " uses event " + std::to_string(e) +
                                 ", but the program records " + std::to_string(events) +
                                 " (numbered from 0)");
    auto events = [&](const flatbuffers::Vector<uint32_t> *list, int64_t ScheduleStep::*field) {
      for (size_t k = 0; list && k < list->size(); ++k) {
        ScheduleStep s;
        s.stream = inst.stream();
        s.*field = list->Get(uint32_t(k));
        add(std::move(s), i);
      }
    };
    events(inst.waits(), &ScheduleStep::wait);
    ScheduleStep launch;
    launch.stream = inst.stream();
    launch.reads.assign(inst.inputs()->begin(), inst.inputs()->end());
    launch.writes.assign(inst.outputs()->begin(), inst.outputs()->end());
    // A KV-cache layer is read and written: an id past the tensors.
    if (int layer = kvLayerOf(inst); layer >= 0) {
      launch.reads.push_back(int64_t(numTensors) + layer);
      launch.writes.push_back(int64_t(numTensors) + layer);
    }
    add(std::move(launch), i);
    events(inst.records(), &ScheduleStep::record);
  }
  auto name = [&](size_t step) {
    return describe(*insts.Get(instructionOf[step]), instructionOf[step]);
  };
  auto order = HappensBefore::compute(steps, name);
  if (!order)
    return order.status();
  auto arena = [&](int64_t id) {
    return id < int64_t(numTensors) &&
           p.tensors()->Get(uint32_t(id))->storage() == plan::Storage::Arena;
  };
  // A micro-batch's rows are of its base (KV layers are their own).
  auto base = [&](int64_t id) {
    return id < int64_t(numTensors) ? int64_t(baseOf(p, uint32_t(id))) : id;
  };
  auto rows = [&](int64_t id) {
    return id < int64_t(numTensors) ? rowsOf(*p.tensors()->Get(uint32_t(id))) : RowRange();
  };
  auto overlap = [&](int64_t a, int64_t b) {
    const int64_t x = base(a), y = base(b);
    if (x == y)
      return rows(a).intersects(rows(b));
    if (!arena(x) || !arena(y))
      return false;
    const plan::Tensor *s = p.tensors()->Get(uint32_t(x)), *t = p.tensors()->Get(uint32_t(y));
    return s->offset() < t->offset() + t->size() && t->offset() < s->offset() + s->size();
  };
  auto race = findRace(steps, *order, overlap);
  if (!race)
    return Status::ok();
  auto what = [&](int64_t id) {
    if (id >= int64_t(numTensors))
      return "KV-cache layer " + std::to_string(id - int64_t(numTensors));
    return "tensor " + std::to_string(id) + " '" + p.tensors()->Get(uint32_t(id))->name()->str() +
           "'";
  };
  auto verb = [&](size_t step, int64_t id) {
    const auto &w = steps[step].writes;
    return std::string(std::find(w.begin(), w.end(), id) != w.end() ? " writes" : " reads") +
           (step == race->second ? " " : ", ");
  };
  std::string text = name(race->second) + verb(race->second, race->bufferB) +
                     what(race->bufferB) + ", ";
  if (race->bufferA != race->bufferB)
    text += "whose arena bytes overlap " + what(race->bufferA) + ", ";
  return Status::error(text + "which " + name(race->first) + verb(race->first, race->bufferA) +
                       "with no event ordering them; recompile the plan with moe-compile "
                       "(its moe-verify-schedule refuses such schedules)");
}

} // namespace moe::rt
