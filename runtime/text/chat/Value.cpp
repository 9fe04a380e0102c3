//===- Value.cpp - Jinja values with Python semantics --------------------===//
#include "Value.h"

#include "Error.h"
#include "Limits.h"
#include "Utf8.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <variant>

namespace moe::rt::chat {

Value Value::dict(Dict d) { return Value(Kind::Dict, std::make_shared<const Dict>(std::move(d))); }

namespace {

/// While a container is being freed, the containers whose last reference
/// its values drop wait here instead of being freed inside its destructor,
/// so freeing a chain of any length takes constant stack (the trashcan
/// that CPython's deallocators use for the same reason).
thread_local std::vector<std::shared_ptr<const void>> *deferredReleases = nullptr;

} // namespace

void Value::releaseContainer() noexcept {
  std::shared_ptr<const void> node;
  std::visit(
      [&](auto &held) {
        using Held = std::decay_t<decltype(held)>;
        if constexpr (!std::is_same_v<Held, std::shared_ptr<const std::string>> &&
                      std::is_convertible_v<Held, std::shared_ptr<const void>>)
          node = std::move(held);
      },
      data_);
  if (!node || node.use_count() != 1)
    return; // Not the last reference: dropping `node` only counts down.
  if (deferredReleases) {
    deferredReleases->push_back(std::move(node));
    return;
  }
  std::vector<std::shared_ptr<const void>> pending;
  deferredReleases = &pending;
  node.reset();
  while (!pending.empty()) {
    std::shared_ptr<const void> next = std::move(pending.back());
    pending.pop_back();
    next.reset();
  }
  deferredReleases = nullptr;
}

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

namespace {

bool equalsAt(const Value &a, const Value &b, int level) {
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
    if (&x == &y) // The same object: Python finds items that are the same object equal, unvisited.
      return true;
    if (x.size() != y.size())
      return false;
    checkValueDepth(level + 1, kUnlocated);
    for (size_t i = 0; i < x.size(); ++i)
      if (!equalsAt(x[i], y[i], level + 1))
        return false;
    return true;
  }
  case Value::Kind::Dict: {
    const Dict &x = a.dictValue(), &y = b.dictValue();
    if (&x == &y)
      return true;
    if (x.entries.size() != y.entries.size())
      return false;
    checkValueDepth(level + 1, kUnlocated);
    for (const auto &[k, v] : x.entries) {
      auto other = std::find_if(y.entries.begin(), y.entries.end(),
                                [&](const auto &entry) { return equalsAt(entry.first, k, level + 1); });
      if (other == y.entries.end() || !equalsAt(v, other->second, level + 1))
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

bool lessThanAt(const Value &a, const Value &b, size_t offset, int level) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isInt() && b.isInt())
      return a.asInt() < b.asInt();
    return a.asNumber() < b.asNumber();
  }
  if (a.isString() && b.isString())
    return a.str() < b.str(); // UTF-8 byte order is code point order.
  if (a.kind() == b.kind() && a.isSequence()) {
    const List &x = a.items(), &y = b.items();
    checkValueDepth(level + 1, offset);
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equalsAt(x[i], y[i], level + 1))
        return lessThanAt(x[i], y[i], offset, level + 1);
    return x.size() < y.size();
  }
  if (a.isUndefined() || b.isUndefined())
    fail(offset, (a.isUndefined() ? a : b).undefinedHint());
  fail(offset, std::string("'<' is not supported between instances of '") + a.typeName() + "' and '" +
                   b.typeName() + "'");
}

} // namespace

bool equals(const Value &a, const Value &b) { return equalsAt(a, b, 0); }

bool lessThan(const Value &a, const Value &b, size_t offset) { return lessThanAt(a, b, offset, 0); }

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

/// str() and repr() of values, written into one string as Python prints
/// them. It recurses through sequence() and dict(), kept out of line so that
/// each level of the value costs one small frame.
struct Printer {
  size_t offset; ///< Where errors point.
  std::string out;

  /// str(v); jinja2 prints Undefined as nothing.
  void text(const Value &v, int level) {
    switch (v.kind()) {
    case Value::Kind::Undefined:
      return;
    case Value::Kind::None:
      out += "None";
      return;
    case Value::Kind::Bool:
      out += v.asBool() ? "True" : "False";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.asInt());
      return;
    case Value::Kind::Float:
      out += floatRepr(v.asNumber());
      return;
    case Value::Kind::String:
      out += v.str();
      return;
    case Value::Kind::List:
    case Value::Kind::Tuple:
      sequence(v.items(), v.kind() == Value::Kind::Tuple, level);
      return;
    case Value::Kind::Dict:
      dict(v.dictValue(), level);
      return;
    case Value::Kind::Namespace: // Its attributes may hold the namespace itself: the depth limit ends that.
      out += "<Namespace ";
      dict(v.nsValue().attrs, level);
      out += '>';
      return;
    case Value::Kind::Callable:
      fail(offset, "printing the function '" + v.callable().name + "' is not supported");
    }
  }

  /// repr(v), as lists and dicts print their items.
  void repr(const Value &v, int level) {
    if (v.isString())
      out += stringRepr(v.str());
    else if (v.isUndefined())
      out += "Undefined";
    else
      text(v, level);
  }

  [[gnu::noinline]] void sequence(const List &items, bool tuple, int level) {
    checkValueDepth(level + 1, offset);
    out += tuple ? '(' : '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += ", ";
      repr(items[i], level + 1);
      checkTextBytes(out.size(), offset);
    }
    if (tuple && items.size() == 1)
      out += ',';
    out += tuple ? ')' : ']';
  }

  [[gnu::noinline]] void dict(const Dict &d, int level) {
    checkValueDepth(level + 1, offset);
    out += '{';
    for (size_t i = 0; i < d.entries.size(); ++i) {
      if (i)
        out += ", ";
      repr(d.entries[i].first, level + 1);
      out += ": ";
      repr(d.entries[i].second, level + 1);
      checkTextBytes(out.size(), offset);
    }
    out += '}';
  }
};

} // namespace

std::string repr(const Value &v, size_t offset) {
  Printer p{offset, {}};
  p.repr(v, 0);
  return std::move(p.out);
}

std::string toText(const Value &v, size_t offset) {
  Printer p{offset, {}};
  p.text(v, 0);
  return std::move(p.out);
}

} // namespace moe::rt::chat
