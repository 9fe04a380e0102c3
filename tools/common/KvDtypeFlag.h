//===- KvDtypeFlag.h - the --kv-dtype flag of the runtime tools -*- C++ -*-===//
#ifndef MOE_TOOLS_COMMON_KVDTYPEFLAG_H
#define MOE_TOOLS_COMMON_KVDTYPEFLAG_H

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

} // namespace moe::tools

#endif
