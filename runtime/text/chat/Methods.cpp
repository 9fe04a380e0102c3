//===- Methods.cpp - attributes, items and Python methods ----------------===//
//
// jinja2 resolves `a.b` with getattr first (so `d.items` is the method) and
// `a['b']` with the item first. Only Python's str/dict/list methods below
// exist; the sandbox forbids the mutating ones, and asking for any other
// Python method fails instead of reading as undefined.
//
//===----------------------------------------------------------------------===//
#include "Builtins.h"

#include "Error.h"
#include "Limits.h"
#include "StringOps.h"
#include "Utf8.h"

#include <algorithm>

namespace moe::rt::chat {

namespace {

using Method = Value (*)(const Value &self, CallArgs &args, size_t offset);

std::string argString(const Value &v, const char *what, size_t offset) {
  if (!v.isString())
    fail(offset, std::string(what) + " must be str, not " + v.typeName());
  return v.str();
}

int64_t argInt(const Value &v, int64_t fallback, const char *what, size_t offset) {
  if (v.isUndefined())
    return fallback;
  if (!v.isInt())
    fail(offset, std::string(what) + " must be an integer, not " + v.typeName());
  return v.asInt();
}

/// startswith/endswith: a prefix or a tuple of prefixes.
Value affix(const Value &self, CallArgs &args, size_t offset, bool suffix) {
  Value what = args.take(0, "prefix");
  args.finish(suffix ? "str.endswith()" : "str.startswith()", offset);
  const std::string &s = self.str();
  auto test = [&](const Value &a) {
    std::string x = argString(a, suffix ? "endswith argument" : "startswith argument", offset);
    return x.size() <= s.size() && (suffix ? s.compare(s.size() - x.size(), x.size(), x) == 0
                                           : s.compare(0, x.size(), x) == 0);
  };
  if (what.isSequence())
    return Value(std::any_of(what.items().begin(), what.items().end(), test));
  return Value(test(what));
}

Value strip(const Value &self, CallArgs &args, size_t offset, StripSide side) {
  Value chars = args.take(0, "chars");
  args.finish("str.strip()", offset);
  return Value(pyStrip(self.str(), chars, side, offset));
}

Value split(const Value &self, CallArgs &args, size_t offset, bool fromRight) {
  Value sep = args.take(0, "sep");
  int64_t maxsplit = argInt(args.take(1, "maxsplit"), -1, "maxsplit", offset);
  args.finish("str.split()", offset);
  return Value::list(pySplit(self.str(), sep, maxsplit, fromRight, offset));
}

template <std::string (*F)(const std::string &, const char *, size_t)>
Value caseMethod(const Value &self, CallArgs &args, size_t offset) {
  args.finish("str case method", offset);
  return Value(F(self.str(), "str case mapping", offset));
}

const std::pair<const char *, Method> strMethods[] = {
    {"startswith", [](const Value &s, CallArgs &a, size_t o) { return affix(s, a, o, false); }},
    {"endswith", [](const Value &s, CallArgs &a, size_t o) { return affix(s, a, o, true); }},
    {"strip", [](const Value &s, CallArgs &a, size_t o) { return strip(s, a, o, StripSide::Both); }},
    {"lstrip", [](const Value &s, CallArgs &a, size_t o) { return strip(s, a, o, StripSide::Left); }},
    {"rstrip", [](const Value &s, CallArgs &a, size_t o) { return strip(s, a, o, StripSide::Right); }},
    {"split", [](const Value &s, CallArgs &a, size_t o) { return split(s, a, o, false); }},
    {"rsplit", [](const Value &s, CallArgs &a, size_t o) { return split(s, a, o, true); }},
    {"upper", caseMethod<pyUpper>},
    {"lower", caseMethod<pyLower>},
    {"title", caseMethod<pyTitle>},
    {"capitalize", caseMethod<pyCapitalize>},
    {"replace",
     [](const Value &s, CallArgs &a, size_t o) {
       std::string from = argString(a.take(0, "old"), "replace argument", o);
       std::string to = argString(a.take(1, "new"), "replace argument", o);
       int64_t count = argInt(a.take(2, "count"), -1, "count", o);
       a.finish("str.replace()", o);
       return Value(pyReplace(s.str(), from, to, count, o));
     }},
    {"find",
     [](const Value &s, CallArgs &a, size_t o) {
       std::string sub = argString(a.take(0, "sub"), "find argument", o);
       a.finish("str.find()", o);
       size_t at = s.str().find(sub);
       return Value(at == std::string::npos ? int64_t(-1)
                                            : int64_t(codePointCount(std::string_view(s.str()).substr(0, at))));
     }},
    {"count",
     [](const Value &s, CallArgs &a, size_t o) {
       std::string sub = argString(a.take(0, "sub"), "count argument", o);
       a.finish("str.count()", o);
       if (sub.empty())
         return Value(int64_t(codePointCount(s.str()) + 1));
       int64_t n = 0;
       for (size_t at = s.str().find(sub); at != std::string::npos; at = s.str().find(sub, at + sub.size()))
         ++n;
       return Value(n);
     }},
    {"join",
     [](const Value &s, CallArgs &a, size_t o) {
       Value items = a.take(0, "iterable");
       a.finish("str.join()", o);
       std::string out;
       bool first = true;
       for (const Value &v : iterate(items, o)) {
         if (!first)
           out += s.str();
         first = false;
         out += argString(v, "join item", o);
         checkTextBytes(out.size(), o);
       }
       return Value(out);
     }},
    {"isdigit",
     [](const Value &s, CallArgs &a, size_t o) {
       a.finish("str.isdigit()", o);
       const std::string &t = s.str();
       return Value(!t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }));
     }},
    {"isspace",
     [](const Value &s, CallArgs &a, size_t o) {
       a.finish("str.isspace()", o);
       std::u32string t = decodeUtf8(s.str());
       return Value(!t.empty() && std::all_of(t.begin(), t.end(), isPySpace));
     }},
};

const std::pair<const char *, Method> dictMethods[] = {
    {"items",
     [](const Value &d, CallArgs &a, size_t o) {
       a.finish("dict.items()", o);
       List out;
       for (const auto &[k, v] : d.dictValue().entries)
         out.push_back(Value::list({k, v}, true));
       return Value::list(std::move(out));
     }},
    {"keys",
     [](const Value &d, CallArgs &a, size_t o) {
       a.finish("dict.keys()", o);
       List out;
       for (const auto &kv : d.dictValue().entries)
         out.push_back(kv.first);
       return Value::list(std::move(out));
     }},
    {"values",
     [](const Value &d, CallArgs &a, size_t o) {
       a.finish("dict.values()", o);
       List out;
       for (const auto &kv : d.dictValue().entries)
         out.push_back(kv.second);
       return Value::list(std::move(out));
     }},
    {"get",
     [](const Value &d, CallArgs &a, size_t o) {
       Value key = a.take(0, "key");
       Value fallback = a.take(1, "default", Value::none());
       a.finish("dict.get()", o);
       const Value *found = d.dictValue().find(key);
       return found ? *found : fallback;
     }},
};

const std::pair<const char *, Method> listMethods[] = {
    {"index",
     [](const Value &l, CallArgs &a, size_t o) {
       Value x = a.take(0, "value");
       a.finish("list.index()", o);
       const List &items = l.items();
       for (size_t i = 0; i < items.size(); ++i)
         if (equals(items[i], x))
           return Value(int64_t(i));
       fail(o, repr(x, o) + " is not in list");
     }},
    {"count",
     [](const Value &l, CallArgs &a, size_t o) {
       Value x = a.take(0, "value");
       a.finish("list.count()", o);
       return Value(int64_t(std::count_if(l.items().begin(), l.items().end(),
                                          [&](const Value &v) { return equals(v, x); })));
     }},
};

/// Python methods not implemented here (or mutating, which the sandbox
/// refuses): naming them fails rather than yielding Undefined.
const char *const unsupportedMethods[] = {
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update", "setdefault",
    "popitem", "copy", "fromkeys", "format", "format_map", "encode", "casefold", "center", "ljust",
    "rjust", "zfill", "expandtabs", "partition", "rpartition", "splitlines", "swapcase", "translate",
    "maketrans", "rfind", "index", "rindex", "isalpha", "isalnum", "isdecimal", "isnumeric", "islower",
    "isupper", "istitle", "isidentifier", "isprintable", "isascii", "removeprefix", "removesuffix"};

template <size_t N>
const Method *findMethod(const std::pair<const char *, Method> (&table)[N], const std::string &name) {
  for (const auto &[n, m] : table)
    if (name == n)
      return &m;
  return nullptr;
}

Value bind(const Value &self, const std::string &name, Method m) {
  return Value::function(name, [self, m](CallArgs &args, size_t offset) { return m(self, args, offset); });
}

std::string describe(const Value &v) {
  return v.kind() == Value::Kind::Dict ? "dict object" : std::string(v.typeName()) + " object";
}

Value index(const Value &seq, const Value &key) {
  int64_t i = key.asInt();
  if (seq.isString()) {
    std::u32string cps = decodeUtf8(seq.str());
    int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0)
      i += n;
    if (i < 0 || i >= n)
      return Value::undefined("str object has no element " + std::to_string(key.asInt()));
    return Value(encodeUtf8(cps.substr(static_cast<size_t>(i), 1)));
  }
  const List &items = seq.items();
  int64_t n = static_cast<int64_t>(items.size());
  if (i < 0)
    i += n;
  if (i < 0 || i >= n)
    return Value::undefined(describe(seq) + " has no element " + std::to_string(key.asInt()));
  return items[static_cast<size_t>(i)];
}

/// The item half of getattr/getitem: false when `object` has no such item.
bool lookupItem(const Value &object, const Value &key, size_t offset, Value &out) {
  switch (object.kind()) {
  case Value::Kind::Dict:
    if (const Value *v = object.dictValue().find(key)) {
      out = *v;
      return true;
    }
    return false;
  case Value::Kind::Namespace:
    if (const Value *v = object.nsValue().attrs.find(key)) {
      out = *v;
      return true;
    }
    return false;
  case Value::Kind::List:
  case Value::Kind::Tuple:
  case Value::Kind::String:
    if (key.isInt()) {
      out = index(object, key);
      return !out.isUndefined();
    }
    return false;
  default:
    return false;
  }
}

bool lookupMethod(const Value &object, const std::string &name, Value &out) {
  const Method *m = nullptr;
  if (object.isString())
    m = findMethod(strMethods, name);
  else if (object.kind() == Value::Kind::Dict)
    m = findMethod(dictMethods, name);
  else if (object.isSequence())
    m = findMethod(listMethods, name);
  if (!m)
    return false;
  out = bind(object, name, *m);
  return true;
}

void refuseUnsupported(const Value &object, const std::string &name, size_t offset) {
  if (!object.isString() && !object.isSequence() && object.kind() != Value::Kind::Dict)
    return;
  for (const char *n : unsupportedMethods)
    if (name == n)
      fail(offset, std::string("the ") + object.typeName() + " method \"" + name + "\" is not supported");
}

void refuseUndefined(const Value &object, size_t offset) {
  if (object.isUndefined())
    fail(offset, object.undefinedHint());
}

} // namespace

Value getAttribute(const Value &object, const std::string &name, size_t offset) {
  refuseUndefined(object, offset);
  Value out;
  if (lookupMethod(object, name, out))
    return out;
  if (lookupItem(object, Value(name), offset, out))
    return out;
  refuseUnsupported(object, name, offset);
  return Value::undefined("'" + describe(object) + "' has no attribute '" + name + "'");
}

Value getItem(const Value &object, const Value &key, size_t offset) {
  refuseUndefined(object, offset);
  Value out;
  if (lookupItem(object, key, offset, out))
    return out;
  if (key.isString()) {
    if (lookupMethod(object, key.str(), out))
      return out;
    refuseUnsupported(object, key.str(), offset);
  }
  return Value::undefined("'" + describe(object) + "' has no attribute " + repr(key, offset));
}

int64_t length(const Value &v, size_t offset) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
    return 0;
  case Value::Kind::String:
    return static_cast<int64_t>(codePointCount(v.str()));
  case Value::Kind::List:
  case Value::Kind::Tuple:
    return static_cast<int64_t>(v.items().size());
  case Value::Kind::Dict:
    return static_cast<int64_t>(v.dictValue().entries.size());
  default:
    fail(offset, std::string("object of type '") + v.typeName() + "' has no len()");
  }
}

List iterate(const Value &v, size_t offset) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
    return {};
  case Value::Kind::String: {
    List out;
    for (char32_t c : decodeUtf8(v.str()))
      out.push_back(Value(encodeUtf8(std::u32string(1, c))));
    return out;
  }
  case Value::Kind::List:
  case Value::Kind::Tuple:
    return v.items();
  case Value::Kind::Dict: {
    List out;
    for (const auto &kv : v.dictValue().entries)
      out.push_back(kv.first);
    return out;
  }
  default:
    fail(offset, std::string("'") + v.typeName() + "' object is not iterable");
  }
}

} // namespace moe::rt::chat
