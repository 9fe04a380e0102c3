//===- LinkFlag.h - the LATENCY_US:GB_PER_S flag value ----------*- C++ -*-===//
//
// moe-run and moe-bench --emulate-link, moe-plan simulate and moe-compile
// --link: one check, one message.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TOOLS_COMMON_LINKFLAG_H
#define MOE_TOOLS_COMMON_LINKFLAG_H

#include "moe/runtime/LinkEmulation.h"

#include <CLI/CLI.hpp>

namespace moe::tools {

/// A link as rt::LinkModel::parse reads it.
inline CLI::Validator linkValidator() {
  return CLI::Validator(
      [](std::string &text) {
        auto link = rt::LinkModel::parse(text);
        return link ? std::string() : link.status().message();
      },
      "");
}

} // namespace moe::tools

#endif
