//===- TextFiles.h - a checkpoint's tokenizer and chat template -*- C++ -*-===//
//
// What a plan needs to serve text (plan format 2.6, Plan.text), read from
// beside config.json: tokenizer.json verbatim (the runtime parses it and
// refuses what it does not implement), and from tokenizer_config.json the
// chat template and the bos/eos strings the template uses. Plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_IMPORT_TEXTFILES_H
#define MOE_COMPILER_IMPORT_TEXTFILES_H

#include <string>

namespace moe {

struct TextFiles {
  std::string tokenizerJson; ///< empty: the checkpoint has no tokenizer.json
  std::string chatTemplate;  ///< empty: none
  std::string bosToken, eosToken;
};

/// Reads them from the directory of `configPath`. Throws InputError for a
/// file that is unreadable or malformed, or a chat template list without a
/// "default" entry.
TextFiles readTextFiles(const std::string &configPath);

} // namespace moe

#endif
