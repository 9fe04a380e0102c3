//===- Simulate.cpp - a plan's step on a hardware profile -----------------===//
#include "tools/plan-cost/Simulate.h"
#include "moe/abi/File.h"
#include "moe/runtime/PlanView.h"
#include "tools/plan-cost/PlanCost.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace moe::cost {

namespace {

/// Seconds of a launch of cost `c` by the cost model.
double modelled(const InstructionCost &c, const Hardware &hw) {
  return std::max(c.flops / (hw.tflops(c.weightType) * 1e12), c.bytes / (hw.memoryGBps * 1e9)) +
         hw.launchOverheadUs * 1e-6;
}

} // namespace

rt::Expected<MeasuredLaunches> MeasuredLaunches::fromTrace(const std::string &path,
                                                           int64_t tokens) {
  auto text = rt::readFile(path);
  if (!text)
    return text.status();
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, false);
  if (doc.is_discarded() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    return rt::Status::error(path + ": not a trace-event file (moe-run --trace)");
  MeasuredLaunches m;
  m.tokens = tokens;
  // Per rank, its first step of `tokens` tokens; a launch takes the
  // longest of the ranks' (their collectives wait for the slowest).
  // A collective takes the shortest of the ranks' (the last to arrive
  // waits least: what moving the data took).
  std::map<int64_t, int64_t> stepOf;
  std::map<int64_t, std::map<std::pair<std::string, std::string>, std::vector<double>>> ranks;
  std::set<std::pair<std::string, std::string>> collectives;
  for (const auto &e : doc["traceEvents"]) {
    const std::string category = e.value("cat", "");
    if (e.value("ph", "") != "X" || (category != "launch" && category != "collective") ||
        !e.contains("args") || e["args"].value("tokens", int64_t(-1)) != tokens)
      continue;
    if (category == "collective")
      collectives.insert({e.value("name", ""), e["args"].value("at", "")});
    const int64_t rank = e.value("pid", int64_t(0)), step = e["args"].value("step", int64_t(0));
    if (stepOf.try_emplace(rank, step).first->second != step)
      continue;
    ranks[rank][{e.value("name", ""), e["args"].value("at", "")}].push_back(e.value("dur", 0.0) *
                                                                            1e-6);
  }
  for (const auto &[rank, launches] : ranks)
    for (const auto &[key, seconds] : launches) {
      std::vector<double> &longest = m.seconds[key];
      if (!longest.empty() && longest.size() != seconds.size())
        return rt::Status::error(path + ": rank " + std::to_string(rank) + " ran " + key.first +
                                 " at " + key.second + " " + std::to_string(seconds.size()) +
                                 " times in the step, another rank " +
                                 std::to_string(longest.size()));
      const bool collective = collectives.count(key) > 0;
      longest.resize(seconds.size(), collective ? 1e30 : 0.0);
      for (size_t i = 0; i < seconds.size(); ++i)
        longest[i] = collective ? std::min(longest[i], seconds[i])
                                : std::max(longest[i], seconds[i]);
    }
  if (m.seconds.empty())
    return rt::Status::error(path + ": no step of " + std::to_string(tokens) +
                             " tokens (trace a run whose steps have that many)");
  return m;
}

rt::Expected<Simulation> simulate(const plan::Plan &p, int rank, const Hardware &hw,
                                  const rt::LinkModel &link, int64_t tokens,
                                  const MeasuredLaunches *measured) {
  const plan::Program &program = *p.programs()->Get(uint32_t(rank));
  Simulation s;
  // Per (kernel, location, micro-batch): launches seen, to match the
  // measured ones in order.
  std::map<std::tuple<std::string, std::string, int64_t>, size_t> seen;
  constexpr size_t kNone = size_t(-1);
  // Per stream: when it is free and the instruction that ran last on it;
  // per event: when it is recorded and by which instruction.
  std::map<int, std::pair<double, size_t>> stream;
  std::map<uint32_t, std::pair<double, size_t>> event;
  std::vector<size_t> startedBy; // per instruction: what it waited for last
  double host = 0;               // when the host issues the next instruction
  for (uint32_t i = 0; i < program.instructions()->size(); ++i) {
    const plan::Instruction &inst = *program.instructions()->Get(i);
    const InstructionCost c = instructionCost(p, inst, tokens);
    double seconds = c.collective ? link.seconds(c.wireBytes) : modelled(c, hw);
    if (measured) {
      const std::string name = rt::instructionName(inst),
                        at = inst.location() ? inst.location()->str() : "";
      const size_t n = seen[{name, at, rt::rowsOf(p, inst).part}]++;
      auto it = measured->seconds.find({name, at});
      if (it == measured->seconds.end() || n >= it->second.size())
        return rt::Status::error("the measured trace has no launch " + std::to_string(n) + " of " +
                                 name + " at " + at + ": trace a run of the same model");
      if (c.collective) // the run's own transfer, then the link's
        seconds += it->second[n] * double(c.wireBytes) /
                   double(std::max<uint64_t>(
                       instructionCost(p, inst, tokens, /*whole=*/true).wireBytes, 1));
      else
        seconds = it->second[n] * modelled(c, hw) /
                  modelled(instructionCost(p, inst, tokens, /*whole=*/true), hw);
    }
    const int on = inst.stream();
    auto &[free, last] = stream.try_emplace(on, 0.0, kNone).first->second;
    double start = free;
    size_t by = last;
    if (inst.waits())
      for (uint32_t e : *inst.waits())
        if (auto it = event.find(e); it != event.end() && it->second.first > start)
          std::tie(start, by) = it->second;
    if (hw.hostRunsStreamZero && host > start) {
      start = host;
      by = stream[0].second;
    }
    const double end = start + seconds;
    s.instructions.push_back({i, on, start, end});
    startedBy.push_back(by);
    free = end;
    last = s.instructions.size() - 1;
    if (hw.hostRunsStreamZero && on == 0)
      host = end;
    if (inst.records())
      for (uint32_t e : *inst.records())
        event[e] = {end, last};
    s.serial += seconds;
    if (s.busy.size() <= size_t(on))
      s.busy.resize(size_t(on) + 1, 0.0);
    s.busy[size_t(on)] += seconds;
  }
  size_t tail = kNone;
  for (size_t k = 0; k < s.instructions.size(); ++k)
    if (tail == kNone || s.instructions[k].end > s.instructions[tail].end)
      tail = k;
  s.step = tail == kNone ? 0 : s.instructions[tail].end;
  for (size_t k = tail; k != kNone; k = startedBy[k])
    s.criticalPath.insert(s.criticalPath.begin(), k);
  return s;
}

} // namespace moe::cost
