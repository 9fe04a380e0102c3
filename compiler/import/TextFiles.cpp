//===- TextFiles.cpp - a checkpoint's tokenizer and chat template ---------===//
#include "compiler/import/TextFiles.h"

#include "compiler/import/HfConfig.h"
#include "compiler/import/Safetensors.h"
#include "moe/abi/File.h"

#include <filesystem>

namespace moe {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

/// A special token in tokenizer_config.json: a string, an AddedToken
/// object ({"content": ...}), or null.
std::string tokenString(const json &config, const char *key, const std::string &path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null())
    return "";
  if (it->is_string())
    return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  throw InputError(path + ": \"" + key + "\" must be a string or {\"content\": ...}");
}

/// tokenizer_config.json's chat_template: a string, or a list of {name,
/// template} from which the "default" one is served.
std::string chatTemplate(const json &config, const std::string &path) {
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null())
    return "";
  if (it->is_string())
    return it->get<std::string>();
  if (it->is_array()) {
    for (const json &entry : *it)
      if (entry.is_object() && entry.value("name", json()) == "default" &&
          entry.contains("template") && entry["template"].is_string())
        return entry["template"].get<std::string>();
    throw InputError(path + ": \"chat_template\" is a list without a \"default\" entry; "
                            "moe-serve renders the default template only");
  }
  throw InputError(path + ": \"chat_template\" must be a string or a list of "
                          "{\"name\", \"template\"}");
}

std::string readText(const fs::path &path) {
  auto text = rt::readFile(path.string(), 256u << 20);
  if (!text)
    throw InputError(text.status().message());
  return *text;
}

} // namespace

TextFiles readTextFiles(const std::string &configPath) {
  TextFiles files;
  fs::path dir = fs::path(configPath).parent_path();
  if (fs::exists(dir / "tokenizer.json"))
    files.tokenizerJson = readText(dir / "tokenizer.json");
  json config = readSibling(configPath, "tokenizer_config.json");
  std::string configFile = (dir / "tokenizer_config.json").string();
  if (config.is_object()) {
    files.chatTemplate = chatTemplate(config, configFile);
    files.bosToken = tokenString(config, "bos_token", configFile);
    files.eosToken = tokenString(config, "eos_token", configFile);
  }
  // transformers >= 4.43 saves the template in a file of its own.
  if (files.chatTemplate.empty() && fs::exists(dir / "chat_template.jinja"))
    files.chatTemplate = readText(dir / "chat_template.jinja");
  return files;
}

} // namespace moe
