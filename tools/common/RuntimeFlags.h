//===- RuntimeFlags.h - flags the runtime tools share -----------*- C++ -*-===//
//
// The same name, help and check for the same setting in moe-run, moe-bench
// and moe-roofline.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_RUNTIMEFLAGS_H
#define MOE_TOOLS_COMMON_RUNTIMEFLAGS_H

#include "moe/runtime/Plan.h"
#include "moe/abi/PlanFormat.h"
#include "tools/common/Cli.h"

#include <optional>
#include <string>
#include <vector>

namespace moe::tools {

/// --kv-dtype T: the KV-cache element type of this run ("" keeps the plan's).
inline void addKvDtype(Cli &cli, std::string &kvDtype) {
  cli.app
      .add_option("--kv-dtype", kvDtype,
                  "KV-cache type for this run: f32, bf16, int8 or fp8 (default: the plan's)")
      ->check(oneOf({"f32", "bf16", "int8", "fp8"}))
      ->type_name("T");
}

/// The type --kv-dtype names; nullopt when absent.
inline std::optional<plan::DType> kvDtype(const std::string &flag) {
  return flag.empty() ? std::nullopt : rt::parseKvDtype(flag);
}

/// --ignore-eos and --stop STRING: where generated sequences end.
inline void addStopFlags(Cli &cli, bool &ignoreEos, std::vector<std::string> &stop) {
  cli.app.add_flag("--ignore-eos", ignoreEos,
                   "go on generating through the model's end-of-sequence tokens");
  cli.app
      .add_option("--stop", stop,
                  "end a sequence when its text ends with STRING, which is cut off (plans with "
                  "a tokenizer; repeat the flag for several)")
      ->type_name("STRING");
}

/// --routing-profile FILE and --profile-decay D: the run's traffic added to
/// a routing profile (moe/runtime/RoutingProfile.h).
inline void addRoutingProfile(Cli &cli, std::string &path, double &decay) {
  CLI::Option *profile =
      cli.app
          .add_option("--routing-profile", path,
                      "add the tokens each (layer, expert) received, summed over the ranks, to "
                      "the routing profile FILE (JSON; created when absent)")
          ->type_name("FILE");
  cli.app
      .add_option("--profile-decay", decay,
                  "multiply the profile's earlier counts by D before adding this run's (default "
                  "1: a plain sum; 0: start over; needs --routing-profile)")
      ->check(finiteIn(0, 1))
      ->needs(profile)
      ->type_name("D");
}

/// --memory-limit MIB: refuse to start above it (0 when absent).
inline void addMemoryLimit(Cli &cli, double &mib) {
  cli.app
      .add_option("--memory-limit", mib,
                  "refuse to start if weights + activations + KV cache exceed MIB")
      ->check(positiveFinite())
      ->type_name("MIB");
}

/// --prefault=MODE: what loading does to the mapped weight files
/// (moe/runtime/Plan.h, Prefault); `mode` keeps its default when absent.
inline void addPrefault(Cli &cli, std::string &mode) {
  cli.app
      .add_option("--prefault", mode,
                  "after mapping the weights: background (default: readahead and page tables "
                  "populated on a thread while requests run), sync (the same before the first "
                  "request) or off (each page faulted in by its first reader); unless off, "
                  "the KV cache is populated when the session starts")
      ->check(oneOf({"background", "sync", "off"}))
      ->type_name("MODE");
}

/// The mode --prefault names (Background when absent).
inline rt::Prefault prefaultMode(const std::string &flag) {
  return flag.empty() ? rt::Prefault::Background
                      : rt::parsePrefault(flag).value_or(rt::Prefault::Background);
}

/// The --memory-limit in bytes; 0 when absent (the device's memory).
inline uint64_t memoryLimitBytes(double mib) { return uint64_t(mib * 1048576.0); }

} // namespace moe::tools

#endif
