//===- EngineFlags.h - the serving engine's flags ---------------*- C++ -*-===//
//
// The same names, help and checks for the Engine's settings in moe-bench
// and moe-serve.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_ENGINEFLAGS_H
#define MOE_TOOLS_COMMON_ENGINEFLAGS_H

#include "moe/runtime/Engine.h"
#include "tools/common/RuntimeFlags.h"

namespace moe::tools {

struct EngineFlags {
  int64_t blockSize = 16, kvBlocks = 0, budget = 0, maxWaiting = 1024;
  double hostPool = 0, memoryLimit = 0;
  std::string kvDtype;
};

/// --block-size, --kv-blocks, --budget, --max-waiting, --host-pool,
/// --kv-dtype, --memory-limit. `kvBlocksDefault` says what --kv-blocks
/// defaults to.
inline void addEngineFlags(Cli &cli, EngineFlags &f, const std::string &kvBlocksDefault) {
  CLI::App &app = cli.app;
  app.add_option("--block-size", f.blockSize, "KV tokens per block (default 16)")
      ->check(integerIn(1, 1 << 16))
      ->type_name("N");
  app.add_option("--kv-blocks", f.kvBlocks, "KV pool size in blocks (default: " + kvBlocksDefault + ")")
      ->check(integerIn(1, int64_t(1) << 30))
      ->type_name("N");
  app.add_option("--budget", f.budget, "tokens per step (default: the plan's max batch)")
      ->check(integerIn(1, 1 << 24))
      ->type_name("N");
  app.add_option("--max-waiting", f.maxWaiting, "waiting-queue bound (default 1024)")
      ->check(integerIn(1, 1 << 24))
      ->type_name("N");
  addKvDtype(cli, f.kvDtype);
  addMemoryLimit(cli, f.memoryLimit);
  app.add_option("--host-pool", f.hostPool,
                 "host memory for the KV of preempted requests (swapped out, back in later); "
                 "without it preemption recomputes")
      ->check(positiveFinite())
      ->type_name("MIB");
}

/// The options the flags give; `kvBlocks` is the pool when --kv-blocks is
/// absent.
inline rt::EngineOptions engineOptions(const EngineFlags &f, int64_t kvBlocks) {
  rt::EngineOptions o;
  o.blockSize = f.blockSize;
  o.numBlocks = f.kvBlocks > 0 ? f.kvBlocks : kvBlocks;
  o.tokenBudget = f.budget;
  o.maxWaiting = f.maxWaiting;
  o.kvDtype = kvDtype(f.kvDtype);
  o.memoryLimit = memoryLimitBytes(f.memoryLimit);
  if (f.hostPool > 0)
    o.hostPoolBytes = uint64_t(f.hostPool * 1048576.0);
  return o;
}

} // namespace moe::tools

#endif
