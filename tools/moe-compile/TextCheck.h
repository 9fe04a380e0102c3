//===- TextCheck.h - warn about a checkpoint's unusable text files -*- C++ -*-===//
#ifndef MOE_TOOLS_MOECOMPILE_TEXTCHECK_H
#define MOE_TOOLS_MOECOMPILE_TEXTCHECK_H

#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>

namespace moe {

/// The plan carries the checkpoint's tokenizer.json and chat template as
/// they are (plan format 2.6); the runtime refuses what it does not
/// implement when a request needs it. This says so at compile time, on
/// `out`, without failing: the plan still runs on token ids.
void warnAboutTextFiles(const std::string &checkpointDir, int64_t vocabSize,
                        llvm::raw_ostream &out);

} // namespace moe

#endif
