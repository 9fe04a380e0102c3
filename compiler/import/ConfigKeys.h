//===- ConfigKeys.h - the config.json keys each model type understands -*- C++ -*-===//
//
// One table per model type of every key a config.json may hold: the keys
// the importer reads (they shape the model or change its computation, and
// HfConfig checks their values), the keys known not to change inference
// (token ids, dropout, training losses, generation defaults, ...), and the
// aliases transformers' `attribute_map` defines. A key in none of them is
// refused by name: it may change the model and nothing here would follow it.
// Plain C++ (no MLIR).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_IMPORT_CONFIGKEYS_H
#define MOE_COMPILER_IMPORT_CONFIGKEYS_H

#include <string>
#include <vector>

namespace moe {

enum class Family { Mixtral, Qwen2Moe, Qwen3Moe, DeepseekV2, DeepseekV3 };

enum class KeyRole {
  Read,  ///< read and checked by HfConfig
  Inert, ///< known not to change inference; `note` says why
  Alias, ///< another name of key `note` (transformers' attribute_map)
};

struct ConfigKey {
  const char *name;
  KeyRole role;
  const char *note; ///< Read: what it is; Inert: why ignoring it is safe; Alias: the key
};

/// Every key a config.json of `family` may hold, in table order (shared
/// keys first). Names are unique within a family's table.
const std::vector<ConfigKey> &configKeys(Family family);

/// The key `name` of `family`, or null when the table does not hold it.
const ConfigKey *findConfigKey(Family family, const std::string &name);

/// "mixtral", "qwen2_moe", ... as config.json's model_type spells them.
const char *familyName(Family family);

} // namespace moe

#endif
