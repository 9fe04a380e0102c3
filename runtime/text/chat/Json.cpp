//===- Json.cpp - JSON in and out of template values ---------------------===//
//
// toJson is Python's json.dumps as transformers' tojson filter calls it:
// ensure_ascii=False by default, separators (", ", ": ") without indent and
// (",", ": ") with it, floats as repr(), NaN/Infinity spelled as Python does.
//
//===----------------------------------------------------------------------===//
#include "Json.h"

#include "Error.h"
#include "Limits.h"
#include "Utf8.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace moe::rt::chat {

Value fromJson(const nlohmann::ordered_json &j) {
  switch (j.type()) {
  case nlohmann::ordered_json::value_t::null:
    return Value::none();
  case nlohmann::ordered_json::value_t::boolean:
    return Value(j.get<bool>());
  case nlohmann::ordered_json::value_t::number_integer:
    return Value(j.get<int64_t>());
  case nlohmann::ordered_json::value_t::number_unsigned:
    if (j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail(0, "the context holds the integer " + j.dump() + ", beyond 64 bits");
    return Value(static_cast<int64_t>(j.get<uint64_t>()));
  case nlohmann::ordered_json::value_t::number_float:
    return Value(j.get<double>());
  case nlohmann::ordered_json::value_t::string:
    return Value(j.get<std::string>());
  case nlohmann::ordered_json::value_t::array: {
    List items;
    for (const auto &e : j)
      items.push_back(fromJson(e));
    return Value::list(std::move(items));
  }
  case nlohmann::ordered_json::value_t::object: {
    Dict d;
    for (const auto &[k, v] : j.items())
      d.entries.emplace_back(Value(k), fromJson(v));
    return Value::dict(std::move(d));
  }
  default:
    fail(0, "the context holds binary data, which a template cannot read");
  }
}

namespace {

struct JsonWriter {
  std::string indentUnit; ///< Empty with indent=None.
  bool pretty;
  std::string itemSep, keySep;
  bool sortKeys, ensureAscii;
  size_t offset;
  std::string out;

  [[gnu::noinline]] void string(const std::string &s) {
    out += '"';
    for (char32_t c : decodeUtf8(s)) {
      switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensureAscii && c > 0x7E)) {
          char buf[16];
          if (c >= 0x10000) { // A surrogate pair, as Python writes it.
            char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xD800 + (v >> 10)),
                          unsigned(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
          }
          out += buf;
        } else {
          appendUtf8(out, c);
        }
      }
    }
    out += '"';
  }

  void newline(int depth) {
    if (!pretty)
      return;
    out += '\n';
    for (int i = 0; i < depth; ++i)
      out += indentUnit;
  }

  void key(const Value &k) {
    // json.dumps turns non-string keys into strings.
    switch (k.kind()) {
    case Value::Kind::String:
      string(k.str());
      break;
    case Value::Kind::None:
      string("null");
      break;
    case Value::Kind::Bool:
      string(k.asBool() ? "true" : "false");
      break;
    case Value::Kind::Int:
    case Value::Kind::Float: {
      std::string text;
      std::swap(text, out);
      write(k, 0);
      std::swap(text, out);
      string(text);
      break;
    }
    default:
      fail(offset, std::string("keys must be str, int, float, bool or None, not ") + k.typeName());
    }
  }

  // write() recurses through writeList() and writeDict(), which are kept
  // out of line so that its frame holds no locals of theirs: a small frame
  // per level of the value.

  /// Writes `v`, `depth` containers deep.
  void write(const Value &v, int depth) {
    switch (v.kind()) {
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.asBool() ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.asInt());
      return;
    case Value::Kind::Float: {
      double d = v.asNumber();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : floatRepr(d);
      return;
    }
    case Value::Kind::String:
      string(v.str());
      return;
    case Value::Kind::List:
    case Value::Kind::Tuple:
      writeList(v.items(), depth);
      return;
    case Value::Kind::Dict:
      writeDict(v.dictValue(), depth);
      return;
    default:
      fail(offset, std::string("Object of type ") + v.typeName() + " is not JSON serializable");
    }
  }

  [[gnu::noinline]] void writeList(const List &items, int depth) {
    checkValueDepth(depth + 1, offset);
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += itemSep;
      newline(depth + 1);
      write(items[i], depth + 1);
      checkTextBytes(out.size(), offset);
    }
    newline(depth);
    out += ']';
  }

  [[gnu::noinline]] void writeDict(const Dict &dict, int depth) {
    checkValueDepth(depth + 1, offset);
    std::vector<const std::pair<Value, Value> *> entries;
    for (const auto &e : dict.entries)
      entries.push_back(&e);
    if (entries.empty()) {
      out += "{}";
      return;
    }
    if (sortKeys)
      std::stable_sort(entries.begin(), entries.end(),
                       [&](auto *a, auto *b) { return lessThan(a->first, b->first, offset); });
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i)
        out += itemSep;
      newline(depth + 1);
      key(entries[i]->first);
      out += keySep;
      write(entries[i]->second, depth + 1);
      checkTextBytes(out.size(), offset);
    }
    newline(depth);
    out += '}';
  }
};

} // namespace

std::string toJson(const Value &v, const Value &indent, const Value &separators, bool sortKeys,
                   bool ensureAscii, size_t offset) {
  JsonWriter w;
  w.pretty = !indent.isNone() && !indent.isUndefined();
  if (w.pretty) {
    if (indent.isInt())
      w.indentUnit = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.asInt())), ' ');
    else if (indent.isString())
      w.indentUnit = indent.str();
    else
      fail(offset, std::string("tojson indent must be an int or a str, not ") + indent.typeName());
  }
  w.itemSep = w.pretty ? "," : ", ";
  w.keySep = ": ";
  if (!separators.isNone() && !separators.isUndefined()) {
    if (!separators.isSequence() || separators.items().size() != 2 || !separators.items()[0].isString() ||
        !separators.items()[1].isString())
      fail(offset, "tojson separators must be a pair of strings");
    w.itemSep = separators.items()[0].str();
    w.keySep = separators.items()[1].str();
  }
  w.sortKeys = sortKeys;
  w.ensureAscii = ensureAscii;
  w.offset = offset;
  w.write(v, 0);
  return std::move(w.out);
}

} // namespace moe::rt::chat
