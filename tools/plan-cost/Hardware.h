//===- Hardware.h - a hardware profile for the plan simulator ---*- C++ -*-===//
//
// What one rank's device and the link between ranks can do, as a data file
// (docs/hardware/*.json) with the source of every figure: matmul rates per
// weight type, memory bandwidth, the cost of issuing one kernel, the link,
// and whether the host issues work ahead of the device (a GPU) or runs
// stream 0 itself (the CPU backend). Unknown fields are refused by name.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_PLANCOST_HARDWARE_H
#define MOE_TOOLS_PLANCOST_HARDWARE_H

#include "moe/runtime/LinkEmulation.h"
#include "moe/abi/PlanFormat.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>

namespace moe::cost {

struct Hardware {
  std::string name, description;
  /// Dense matmul rate per weight type, TFLOP/s ("f32", "bf16", "fp8",
  /// "int8", "int4"); a type without one uses f32's.
  std::map<std::string, double> matmulTflops;
  double memoryGBps = 0;       ///< device memory bandwidth, GB/s
  double launchOverheadUs = 0; ///< time one kernel launch adds
  /// The link between the ranks of a plan; absent: give one to the
  /// simulator (the --emulate-link of the run it predicts).
  std::optional<rt::LinkModel> link;
  /// The host runs stream 0's launches itself, in program order (CPU):
  /// work of other streams is issued only when the host gets to it.
  bool hostRunsStreamZero = false;
  std::map<std::string, std::string> sources; ///< per figure, where it comes from

  /// TFLOP/s of a matmul with weights of `type`.
  double tflops(plan::DType type) const;
  static rt::Expected<Hardware> fromJson(const nlohmann::json &j);
  static rt::Expected<Hardware> load(const std::string &path);
  nlohmann::ordered_json toJson() const;
};

} // namespace moe::cost

#endif
