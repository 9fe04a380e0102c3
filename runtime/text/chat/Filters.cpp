//===- Filters.cpp - the jinja2 filters chat templates use ---------------===//
//
// Each filter follows jinja2 3.1's definition (jinja2/filters.py), including
// its quirks: `unique` and `sort` ignore case by default, `title` starts a
// word after whitespace, brackets or a hyphen, `default` only replaces
// Undefined unless its second argument is true. tojson is transformers'.
//
//===----------------------------------------------------------------------===//
#include "Builtins.h"

#include "Error.h"
#include "Json.h"
#include "Limits.h"
#include "StringOps.h"
#include "Utf8.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace moe::rt::chat {

namespace {

std::string text(const Value &v, size_t offset) { return toText(v, offset); }

int64_t toInt(const Value &v, bool &ok) {
  ok = true;
  if (v.isInt())
    return v.asInt();
  if (v.kind() == Value::Kind::Float && std::isfinite(v.asNumber()) && std::fabs(v.asNumber()) < 9.2e18)
    return static_cast<int64_t>(v.asNumber()); // Python's int() truncates.
  if (v.isString()) {
    std::string s = pyStrip(v.str(), Value::none(), StripSide::Both, 0);
    errno = 0;
    char *end = nullptr;
    long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && *end == '\0' && errno == 0)
      return i;
    double d = std::strtod(s.c_str(), &end); // jinja2 falls back to int(float(s)).
    if (!s.empty() && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return static_cast<int64_t>(d);
  }
  ok = false;
  return 0;
}

/// The attribute path of map/selectattr/sort ("a.b" or "0"), as jinja2's make_attrgetter.
Value attrPath(const Value &item, const Value &path, size_t offset) {
  if (path.isInt())
    return getItem(item, path, offset);
  if (!path.isString())
    fail(offset, "attribute must be a string or an integer");
  Value v = item;
  size_t start = 0;
  const std::string &p = path.str();
  while (true) {
    size_t dot = p.find('.', start);
    std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = getItem(v, digits ? Value(int64_t(std::stoll(part))) : Value(part), offset);
    if (dot == std::string::npos)
      return v;
    start = dot + 1;
  }
}

/// jinja2's ignore_case for sort and unique: strings compare lower-cased.
Value caseKey(const Value &v, bool caseSensitive, size_t offset) {
  if (caseSensitive || !v.isString())
    return v;
  return Value(pyLower(v.str(), "case-insensitive comparison", offset));
}

Value fLength(const Value &v, CallArgs &a, size_t o) {
  a.finish("length", o);
  return Value(length(v, o));
}

Value fToJson(const Value &v, CallArgs &a, size_t o) {
  Value ensureAscii = a.take(0, "ensure_ascii", Value(false));
  Value indent = a.take(1, "indent", Value::none());
  Value separators = a.take(2, "separators", Value::none());
  Value sortKeys = a.take(3, "sort_keys", Value(false));
  a.finish("tojson", o);
  return Value(toJson(v, indent, separators, truthy(sortKeys), truthy(ensureAscii), o));
}

Value fTrim(const Value &v, CallArgs &a, size_t o) {
  Value chars = a.take(0, "chars", Value::none());
  a.finish("trim", o);
  return Value(pyStrip(text(v, o), chars, StripSide::Both, o));
}

Value fUpper(const Value &v, CallArgs &a, size_t o) {
  a.finish("upper", o);
  return Value(pyUpper(text(v, o), "filter upper", o));
}

Value fLower(const Value &v, CallArgs &a, size_t o) {
  a.finish("lower", o);
  return Value(pyLower(text(v, o), "filter lower", o));
}

Value fCapitalize(const Value &v, CallArgs &a, size_t o) {
  a.finish("capitalize", o);
  return Value(pyCapitalize(text(v, o), "filter capitalize", o));
}

Value fTitle(const Value &v, CallArgs &a, size_t o) {
  a.finish("title", o);
  // Words start after whitespace, "-", "(", "{", "[" or "<"; each word is capitalised.
  std::u32string cps = decodeUtf8(text(v, o)), out;
  auto separator = [](char32_t c) { return isPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  size_t i = 0;
  while (i < cps.size()) {
    size_t j = i;
    bool sep = separator(cps[i]);
    while (j < cps.size() && separator(cps[j]) == sep)
      ++j;
    std::string piece = encodeUtf8(cps.substr(i, j - i));
    out += decodeUtf8(sep ? piece : pyCapitalize(piece, "filter title", o));
    i = j;
  }
  return Value(encodeUtf8(out));
}

Value fDefault(const Value &v, CallArgs &a, size_t o) {
  Value fallback = a.take(0, "default_value", Value(""));
  Value boolean = a.take(1, "boolean", Value(false));
  a.finish("default", o);
  if (v.isUndefined() || (truthy(boolean) && !truthy(v)))
    return fallback;
  return v;
}

Value fJoin(const Value &v, CallArgs &a, size_t o) {
  Value sep = a.take(0, "d", Value(""));
  Value attribute = a.take(1, "attribute", Value::none());
  a.finish("join", o);
  std::string out;
  bool first = true;
  for (const Value &item : iterate(v, o)) {
    if (!first)
      out += text(sep, o);
    first = false;
    out += text(attribute.isNone() ? item : attrPath(item, attribute, o), o);
    checkTextBytes(out.size(), o);
  }
  return Value(out);
}

Value fFirst(const Value &v, CallArgs &a, size_t o) {
  a.finish("first", o);
  List items = iterate(v, o);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value fLast(const Value &v, CallArgs &a, size_t o) {
  a.finish("last", o);
  List items = iterate(v, o);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value fList(const Value &v, CallArgs &a, size_t o) {
  a.finish("list", o);
  return Value::list(iterate(v, o));
}

Value fItems(const Value &v, CallArgs &a, size_t o) {
  a.finish("items", o);
  if (v.isUndefined())
    return Value::list({});
  if (v.kind() != Value::Kind::Dict)
    fail(o, std::string("can only get item pairs from a mapping, not ") + v.typeName());
  List out;
  for (const auto &[k, val] : v.dictValue().entries)
    out.push_back(Value::list({k, val}, true));
  return Value::list(std::move(out));
}

Value fString(const Value &v, CallArgs &a, size_t o) {
  a.finish("string", o);
  return Value(text(v, o));
}

Value fSafe(const Value &v, CallArgs &a, size_t o) {
  a.finish("safe", o); // Autoescaping is off: safe only turns the value into text.
  return Value(text(v, o));
}

Value fInt(const Value &v, CallArgs &a, size_t o) {
  Value fallback = a.take(0, "default", Value(int64_t(0)));
  Value base = a.take(1, "base", Value(int64_t(10)));
  a.finish("int", o);
  if (!base.isInt() || base.asInt() != 10)
    fail(o, "filter int with a base other than 10 is not supported");
  bool ok;
  int64_t i = toInt(v, ok);
  return ok ? Value(i) : fallback;
}

Value fFloat(const Value &v, CallArgs &a, size_t o) {
  Value fallback = a.take(0, "default", Value(0.0));
  a.finish("float", o);
  if (v.isNumber())
    return Value(v.asNumber());
  if (v.isString()) {
    std::string s = pyStrip(v.str(), Value::none(), StripSide::Both, o);
    char *end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && *end == '\0')
      return Value(d);
  }
  return fallback;
}

Value fReplace(const Value &v, CallArgs &a, size_t o) {
  Value from = a.take(0, "old"), to = a.take(1, "new"), count = a.take(2, "count", Value::none());
  a.finish("replace", o);
  if (!count.isNone() && !count.isInt())
    fail(o, "replace count must be an integer");
  return Value(pyReplace(text(v, o), text(from, o), text(to, o), count.isNone() ? -1 : count.asInt(), o));
}

Value fAbs(const Value &v, CallArgs &a, size_t o) {
  a.finish("abs", o);
  if (v.isInt()) {
    if (v.asInt() == INT64_MIN)
      fail(o, "integer overflow (Python would use a big integer)");
    return Value(v.asInt() < 0 ? -v.asInt() : v.asInt());
  }
  if (v.isNumber())
    return Value(std::fabs(v.asNumber()));
  fail(o, std::string("bad operand type for abs(): '") + v.typeName() + "'");
}

Value fRound(const Value &v, CallArgs &a, size_t o) {
  Value precision = a.take(0, "precision", Value(int64_t(0)));
  Value method = a.take(1, "method", Value("common"));
  a.finish("round", o);
  if (!v.isNumber() || !precision.isInt() || !method.isString())
    fail(o, "round takes a number, an integer precision and a method");
  int64_t p = precision.asInt();
  double x = v.asNumber();
  if (method.str() == "common") {
    if (v.isInt() && p >= 0)
      return Value(v.asInt()); // Python's round(int, n) is the int.
    // Python's round() is correctly rounded half-to-even, as printf's %.*f.
    if (p < 0 || p > 300)
      fail(o, "round precision outside [0, 300] is not supported");
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(p), x);
    return Value(std::strtod(buf, nullptr));
  }
  if (method.str() == "floor" || method.str() == "ceil") {
    double scale = std::pow(10.0, static_cast<double>(p));
    double r = method.str() == "floor" ? std::floor(x * scale) : std::ceil(x * scale);
    return Value(r / scale);
  }
  fail(o, "round method must be 'common', 'ceil' or 'floor'");
}

Value fMap(const Value &v, CallArgs &a, size_t o) {
  List out;
  if (a.has(SIZE_MAX, "attribute")) {
    Value attribute = a.take(SIZE_MAX, "attribute");
    bool hasDefault = a.has(SIZE_MAX, "default");
    Value fallback = a.take(SIZE_MAX, "default");
    a.finish("map", o);
    for (const Value &item : iterate(v, o)) {
      Value x = attrPath(item, attribute, o);
      out.push_back(hasDefault && x.isUndefined() ? fallback : x);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].isString())
    fail(o, "map needs a filter name or attribute=");
  std::string name = a.positional[0].str();
  FilterFn filter = findFilter(name);
  if (!filter)
    fail(o, "filter \"" + name + "\" is not supported");
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.named = a.named;
  for (const Value &item : iterate(v, o)) {
    CallArgs args = rest;
    out.push_back(filter(item, args, o));
  }
  return Value::list(std::move(out));
}

/// select/reject/selectattr/rejectattr.
Value selectItems(const Value &v, CallArgs &a, size_t o, bool byAttribute, bool keep) {
  size_t next = 0;
  Value attribute;
  if (byAttribute) {
    if (a.positional.empty())
      fail(o, "selectattr/rejectattr need an attribute");
    attribute = a.positional[next++];
  }
  TestFn test = nullptr;
  if (a.positional.size() > next) {
    if (!a.positional[next].isString())
      fail(o, "the test name must be a string");
    const std::string &name = a.positional[next].str();
    test = findTest(name);
    if (!test)
      fail(o, "test \"" + name + "\" is not supported");
    ++next;
  }
  CallArgs rest;
  rest.positional.assign(a.positional.begin() + next, a.positional.end());
  rest.named = a.named;
  List out;
  for (const Value &item : iterate(v, o)) {
    Value x = byAttribute ? attrPath(item, attribute, o) : item;
    CallArgs args = rest;
    bool passed = test ? test(x, args, o) : truthy(x);
    if (passed == keep)
      out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value fSelect(const Value &v, CallArgs &a, size_t o) { return selectItems(v, a, o, false, true); }
Value fReject(const Value &v, CallArgs &a, size_t o) { return selectItems(v, a, o, false, false); }
Value fSelectAttr(const Value &v, CallArgs &a, size_t o) { return selectItems(v, a, o, true, true); }
Value fRejectAttr(const Value &v, CallArgs &a, size_t o) { return selectItems(v, a, o, true, false); }

Value fUnique(const Value &v, CallArgs &a, size_t o) {
  bool caseSensitive = truthy(a.take(0, "case_sensitive", Value(false)));
  Value attribute = a.take(1, "attribute", Value::none());
  a.finish("unique", o);
  List out, seen;
  for (const Value &item : iterate(v, o)) {
    Value key = caseKey(attribute.isNone() ? item : attrPath(item, attribute, o), caseSensitive, o);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value &s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value fReverse(const Value &v, CallArgs &a, size_t o) {
  a.finish("reverse", o);
  if (v.isString()) {
    std::u32string cps = decodeUtf8(v.str());
    std::reverse(cps.begin(), cps.end());
    return Value(encodeUtf8(cps));
  }
  List items = iterate(v, o);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value fSort(const Value &v, CallArgs &a, size_t o) {
  bool reverse = truthy(a.take(0, "reverse", Value(false)));
  bool caseSensitive = truthy(a.take(1, "case_sensitive", Value(false)));
  Value attribute = a.take(2, "attribute", Value::none());
  a.finish("sort", o);
  List items = iterate(v, o);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value &item : items)
    keyed.emplace_back(caseKey(attribute.isNone() ? item : attrPath(item, attribute, o), caseSensitive, o), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto &x, const auto &y) {
    return reverse ? lessThan(y.first, x.first, o) : lessThan(x.first, y.first, o);
  });
  List out;
  for (auto &kv : keyed)
    out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

const std::pair<const char *, FilterFn> filters[] = {
    {"length", fLength},   {"count", fLength},     {"tojson", fToJson},      {"trim", fTrim},
    {"upper", fUpper},     {"lower", fLower},      {"title", fTitle},        {"capitalize", fCapitalize},
    {"default", fDefault}, {"d", fDefault},        {"join", fJoin},          {"first", fFirst},
    {"last", fLast},       {"list", fList},        {"items", fItems},        {"string", fString},
    {"int", fInt},         {"float", fFloat},      {"replace", fReplace},    {"safe", fSafe},
    {"abs", fAbs},         {"round", fRound},      {"map", fMap},            {"select", fSelect},
    {"reject", fReject},   {"selectattr", fSelectAttr}, {"rejectattr", fRejectAttr}, {"unique", fUnique},
    {"reverse", fReverse}, {"sort", fSort},
};

} // namespace

FilterFn findFilter(std::string_view name) {
  for (const auto &[n, f] : filters)
    if (name == n)
      return f;
  return nullptr;
}

} // namespace moe::rt::chat
