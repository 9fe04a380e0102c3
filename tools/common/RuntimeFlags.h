//===- RuntimeFlags.h - flags the runtime tools share -----------*- C++ -*-===//
#ifndef MOE_TOOLS_COMMON_RUNTIMEFLAGS_H
#define MOE_TOOLS_COMMON_RUNTIMEFLAGS_H

#include "moe/runtime/PlanFormat.h"
#include "tools/common/Args.h"

namespace moe::tools {

/// The KV-cache type --kv-dtype names; nullopt when absent (use the plan's).
inline std::optional<plan::DType> kvDtypeFlag(const Args &args) {
  if (!args.has("kv-dtype"))
    return std::nullopt;
  std::optional<plan::DType> type = rt::parseKvDtype(args.str("kv-dtype"));
  if (!type)
    throw ArgError("--kv-dtype must be f32, bf16, int8 or fp8, got '" + args.str("kv-dtype") +
                   "'");
  return type;
}

/// --memory-limit MIB in bytes; 0 when absent (the device's memory).
inline uint64_t memoryLimitFlag(const Args &args) {
  if (!args.has("memory-limit"))
    return 0;
  double mib = args.number("memory-limit", 0);
  if (!(mib > 0) || mib > 1e12)
    throw ArgError("--memory-limit takes a positive size in MiB, got '" +
                   args.str("memory-limit") + "'");
  return uint64_t(mib * 1048576.0);
}

} // namespace moe::tools

#endif
