//===- Value.cpp - Jinja values with Python semantics --------------------===//
#include "Value.h"

#include "Error.h"
#include "Utf8.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace moe::rt::chat {

Value Value::dict(Dict d) { return Value(Kind::Dict, std::make_shared<const Dict>(std::move(d))); }

const char *Value::typeName() const {
  switch (kind_) {
  case Kind::Undefined:
    return "Undefined";
  case Kind::None:
    return "NoneType";
  case Kind::Bool:
    return "bool";
  case Kind::Int:
    return "int";
  case Kind::Float:
    return "float";
  case Kind::String:
    return "str";
  case Kind::List:
    return "list";
  case Kind::Tuple:
    return "tuple";
  case Kind::Dict:
    return "dict";
  case Kind::Namespace:
    return "Namespace";
  case Kind::Callable:
    return "function";
  }
  return "?";
}

const Value *Dict::find(const Value &key) const {
  for (const auto &[k, v] : entries)
    if (equals(k, key))
      return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto &[k, v] : entries)
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(std::move(key), std::move(value));
}

Value CallArgs::take(size_t index, const char *name, Value fallback) {
  usedPositional_.resize(positional.size());
  usedNamed_.resize(named.size());
  if (index < positional.size()) {
    usedPositional_[index] = true;
    return positional[index];
  }
  for (size_t i = 0; i < named.size(); ++i)
    if (named[i].first == name) {
      usedNamed_[i] = true;
      return named[i].second;
    }
  return fallback;
}

bool CallArgs::has(size_t index, const char *name) const {
  if (index < positional.size())
    return true;
  for (const auto &n : named)
    if (n.first == name)
      return true;
  return false;
}

void CallArgs::finish(const std::string &what, size_t offset) const {
  for (size_t i = 0; i < positional.size(); ++i)
    if (i >= usedPositional_.size() || !usedPositional_[i])
      fail(offset, what + " takes " + std::to_string(i) + " positional argument" +
                       (i == 1 ? "" : "s") + " but " + std::to_string(positional.size()) +
                       " were given");
  for (size_t i = 0; i < named.size(); ++i)
    if (i >= usedNamed_.size() || !usedNamed_[i])
      fail(offset, what + " got an unexpected keyword argument '" + named[i].first + "'");
}

bool truthy(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
  case Value::Kind::None:
    return false;
  case Value::Kind::Bool:
  case Value::Kind::Int:
    return v.asInt() != 0;
  case Value::Kind::Float:
    return v.asNumber() != 0.0;
  case Value::Kind::String:
    return !v.str().empty();
  case Value::Kind::List:
  case Value::Kind::Tuple:
    return !v.items().empty();
  case Value::Kind::Dict:
    return !v.dictValue().entries.empty();
  case Value::Kind::Namespace:
  case Value::Kind::Callable:
    return true;
  }
  return false;
}

bool equals(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isInt() && b.isInt())
      return a.asInt() == b.asInt();
    return a.asNumber() == b.asNumber();
  }
  if (a.kind() != b.kind())
    return false;
  switch (a.kind()) {
  case Value::Kind::Undefined:
  case Value::Kind::None:
    return true;
  case Value::Kind::String:
    return a.str() == b.str();
  case Value::Kind::List:
  case Value::Kind::Tuple: {
    const List &x = a.items(), &y = b.items();
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!equals(x[i], y[i]))
        return false;
    return true;
  }
  case Value::Kind::Dict: {
    const Dict &x = a.dictValue(), &y = b.dictValue();
    if (x.entries.size() != y.entries.size())
      return false;
    for (const auto &[k, v] : x.entries) {
      const Value *other = y.find(k);
      if (!other || !equals(v, *other))
        return false;
    }
    return true;
  }
  case Value::Kind::Namespace:
    return &a.nsValue() == &b.nsValue();
  case Value::Kind::Callable:
    return &a.callable() == &b.callable();
  default:
    return false;
  }
}

bool lessThan(const Value &a, const Value &b, size_t offset) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isInt() && b.isInt())
      return a.asInt() < b.asInt();
    return a.asNumber() < b.asNumber();
  }
  if (a.isString() && b.isString())
    return a.str() < b.str(); // UTF-8 byte order is code point order.
  if (a.kind() == b.kind() && a.isSequence()) {
    const List &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i]))
        return lessThan(x[i], y[i], offset);
    return x.size() < y.size();
  }
  if (a.isUndefined() || b.isUndefined())
    fail(offset, (a.isUndefined() ? a : b).undefinedHint());
  fail(offset, std::string("'<' is not supported between instances of '") + a.typeName() + "' and '" +
                   b.typeName() + "'");
}

std::string floatRepr(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d < 0 ? "-inf" : "inf";
  if (d == 0)
    return std::signbit(d) ? "-0.0" : "0.0";
  // The shortest digits that round-trip, laid out as Python's repr does:
  // positional for exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (exp < -4 || exp >= 16) {
    std::string mant = digits.substr(0, 1);
    if (digits.size() > 1)
      mant += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return sign + mant + ebuf;
  }
  std::string out;
  if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    out = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
  }
  return sign + out;
}

namespace {

std::string stringRepr(const std::string &s) {
  bool single = s.find('\'') != std::string::npos, dbl = s.find('"') != std::string::npos;
  char quote = single && !dbl ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decodeUtf8(s)) {
    if (c == '\\' || c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!isPyPrintable(c)) {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    } else {
      appendUtf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::string dictRepr(const Dict &d, size_t offset) {
  std::string out = "{";
  for (size_t i = 0; i < d.entries.size(); ++i) {
    if (i)
      out += ", ";
    out += repr(d.entries[i].first, offset) + ": " + repr(d.entries[i].second, offset);
  }
  return out + "}";
}

} // namespace

std::string repr(const Value &v, size_t offset) {
  switch (v.kind()) {
  case Value::Kind::String:
    return stringRepr(v.str());
  case Value::Kind::Undefined:
    return "Undefined";
  default:
    return toText(v, offset);
  }
}

std::string toText(const Value &v, size_t offset) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
    return "";
  case Value::Kind::None:
    return "None";
  case Value::Kind::Bool:
    return v.asBool() ? "True" : "False";
  case Value::Kind::Int:
    return std::to_string(v.asInt());
  case Value::Kind::Float:
    return floatRepr(v.asNumber());
  case Value::Kind::String:
    return v.str();
  case Value::Kind::List:
  case Value::Kind::Tuple: {
    bool tuple = v.kind() == Value::Kind::Tuple;
    std::string out = tuple ? "(" : "[";
    const List &items = v.items();
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += ", ";
      out += repr(items[i], offset);
    }
    if (tuple && items.size() == 1)
      out += ",";
    return out + (tuple ? ")" : "]");
  }
  case Value::Kind::Dict:
    return dictRepr(v.dictValue(), offset);
  case Value::Kind::Namespace:
    return "<Namespace " + dictRepr(v.nsValue().attrs, offset) + ">";
  case Value::Kind::Callable:
    fail(offset, "printing the function '" + v.callable().name + "' is not supported");
  }
  return "";
}

} // namespace moe::rt::chat
