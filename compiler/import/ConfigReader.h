//===- ConfigReader.h - typed access to a config.json ------------*- C++ -*-===//
//
// Reads keys of a JSON object as the types HfConfig needs, with one-line
// errors that name the file and the key (as the file spells it, aliases
// included) and bounds that keep sizes far from overflow. Plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_COMPILER_IMPORT_CONFIGREADER_H
#define MOE_COMPILER_IMPORT_CONFIGREADER_H

#include "compiler/import/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace moe::config {

using json = nlohmann::json;

/// Typed access to config.json with one-line errors that name file and key.
class Reader {
public:
  /// `spelled`: the alias a key was written under, for messages.
  Reader(const json &j, const std::string &path, const std::string &type,
         std::map<std::string, std::string> spelled = {})
      : j_(j), path_(path), type_(type), spelled_(std::move(spelled)) {}

  /// `key` as the file spells it.
  std::string name(const char *key) const {
    auto it = spelled_.find(key);
    return it == spelled_.end() ? key : it->second;
  }

  [[noreturn]] void fail(const std::string &what) const {
    throw InputError(path_ + ": " + what);
  }
  /// Refuses key `key` at its present value: "key 'k' is v: why".
  [[noreturn]] void refuse(const char *key, const std::string &why) const {
    fail("key '" + name(key) + "' is " + shortText(j_.at(key)) + ": " + why);
  }

  bool has(const char *key) const {
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  /// Present and null (transformers then often takes another key's value).
  bool isNull(const char *key) const {
    auto it = j_.find(key);
    return it != j_.end() && it->is_null();
  }

  int64_t integer(const char *key) const {
    if (!has(key))
      fail("missing key '" + name(key) + "' (required for model_type " +
           type_ + ")");
    return asInteger(key, j_.at(key));
  }
  int64_t integer(const char *key, int64_t dflt) const {
    return has(key) ? asInteger(key, j_.at(key)) : dflt;
  }
  /// A required integer > 0.
  int64_t positive(const char *key) const { return check(key, integer(key)); }
  int64_t positive(const char *key, int64_t dflt) const {
    return check(key, integer(key, dflt));
  }

  double number(const char *key, double dflt) const {
    if (!has(key))
      return dflt;
    const json &v = j_.at(key);
    if (!v.is_number())
      mistyped(key, "a number", v);
    return v.get<double>();
  }
  bool boolean(const char *key, bool dflt) const {
    if (!has(key))
      return dflt;
    const json &v = j_.at(key);
    if (!v.is_boolean())
      mistyped(key, "true or false", v);
    return v.get<bool>();
  }
  std::string string(const char *key, const std::string &dflt) const {
    if (!has(key))
      return dflt;
    const json &v = j_.at(key);
    if (!v.is_string())
      mistyped(key, "a string", v);
    return v.get<std::string>();
  }
  std::vector<int64_t> integers(const char *key) const {
    std::vector<int64_t> out;
    if (!has(key))
      return out;
    const json &v = j_.at(key);
    if (!v.is_array())
      mistyped(key, "a list of integers", v);
    for (const json &e : v)
      out.push_back(asInteger(key, e));
    return out;
  }
  /// The value of a present key, unchecked.
  const json &raw(const char *key) const { return j_.at(key); }
  const json &object(const char *key) const {
    static const json null;
    if (!has(key))
      return null;
    const json &v = j_.at(key);
    if (!v.is_object())
      mistyped(key, "an object", v);
    return v;
  }

private:
  static std::string shortText(const json &v) {
    std::string text = v.dump();
    return text.size() > 40 ? text.substr(0, 37) + "..." : text;
  }
  [[noreturn]] void mistyped(const char *key, const char *wanted,
                             const json &got) const {
    fail("key '" + name(key) + "' must be " + wanted + ", got " + shortText(got));
  }
  int64_t asInteger(const char *key, const json &v) const {
    if (!v.is_number_integer())
      mistyped(key, "an integer", v);
    return v.get<int64_t>();
  }
  int64_t check(const char *key, int64_t v) const {
    if (v <= 0)
      fail("key '" + name(key) + "' must be positive, got " +
           std::to_string(v));
    if (v > largest(key))
      fail("key '" + name(key) + "' is " + std::to_string(v) +
           ", above the largest this compiler accepts (" + std::to_string(largest(key)) + ")");
    return v;
  }
  /// Bounds that keep every tensor's element count (at most experts x 2^20
  /// x 2^20) and every loop over layers and experts far from overflow or
  /// hours of work; real checkpoints are orders of magnitude inside them.
  static int64_t largest(const std::string &key) {
    if (key == "num_hidden_layers")
      return 1024;
    if (key == "num_local_experts" || key == "num_experts" || key == "n_routed_experts" ||
        key == "n_shared_experts")
      return 16384;
    if (key == "max_position_embeddings" || key == "sliding_window")
      return int64_t(1) << 24;
    return int64_t(1) << 20;
  }

  const json &j_;
  std::string path_, type_;
  std::map<std::string, std::string> spelled_;
};

} // namespace moe::config

#endif
