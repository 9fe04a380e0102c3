//===- Tests.cpp - the jinja2 tests (`x is defined`) ---------------------===//
#include "Builtins.h"

#include "Error.h"

namespace moe::rt::chat {

namespace {

bool noArgs(CallArgs &a, const char *name, size_t o) {
  a.finish(std::string("test ") + name, o);
  return true;
}

Value oneArg(CallArgs &a, const char *name, size_t o) {
  Value other = a.take(0, "other");
  a.finish(std::string("test ") + name, o);
  return other;
}

bool tDefined(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "defined", o) && !v.isUndefined(); }
bool tUndefined(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "undefined", o) && v.isUndefined(); }
bool tNone(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "none", o) && v.isNone(); }
bool tString(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "string", o) && v.isString(); }
bool tNumber(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "number", o) && v.isNumber(); }
bool tInteger(const Value &v, CallArgs &a, size_t o) {
  return noArgs(a, "integer", o) && v.kind() == Value::Kind::Int; // jinja2 excludes bools.
}
bool tFloat(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "float", o) && v.kind() == Value::Kind::Float; }
bool tBoolean(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "boolean", o) && v.kind() == Value::Kind::Bool; }
bool tTrue(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "true", o) && v.kind() == Value::Kind::Bool && v.asBool(); }
bool tFalse(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "false", o) && v.kind() == Value::Kind::Bool && !v.asBool(); }
bool tMapping(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "mapping", o) && v.kind() == Value::Kind::Dict; }
bool tIterable(const Value &v, CallArgs &a, size_t o) {
  // Undefined iterates as empty in jinja2, so it is iterable.
  return noArgs(a, "iterable", o) && (v.isString() || v.isSequence() || v.kind() == Value::Kind::Dict || v.isUndefined());
}
bool tSequence(const Value &v, CallArgs &a, size_t o) {
  return noArgs(a, "sequence", o) && (v.isString() || v.isSequence() || v.kind() == Value::Kind::Dict || v.isUndefined());
}
bool tCallable(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "callable", o) && v.kind() == Value::Kind::Callable; }
bool tEq(const Value &v, CallArgs &a, size_t o) { return equals(v, oneArg(a, "eq", o)); }
bool tNe(const Value &v, CallArgs &a, size_t o) { return !equals(v, oneArg(a, "ne", o)); }
bool tLt(const Value &v, CallArgs &a, size_t o) { return lessThan(v, oneArg(a, "lt", o), o); }
bool tGt(const Value &v, CallArgs &a, size_t o) { return lessThan(oneArg(a, "gt", o), v, o); }
bool tLe(const Value &v, CallArgs &a, size_t o) { return !lessThan(oneArg(a, "le", o), v, o); }
bool tGe(const Value &v, CallArgs &a, size_t o) { return !lessThan(v, oneArg(a, "ge", o), o); }
bool tSameAs(const Value &v, CallArgs &a, size_t o) {
  // `is sameas` is Python's `is`: meaningful here for None, True and False.
  Value other = oneArg(a, "sameas", o);
  if (v.kind() != other.kind())
    return false;
  if (v.isNone())
    return true;
  if (v.kind() == Value::Kind::Bool)
    return v.asBool() == other.asBool();
  fail(o, "test sameas is only supported against none, true and false");
}
bool tIn(const Value &v, CallArgs &a, size_t o) {
  Value seq = oneArg(a, "in", o);
  if (seq.isString()) {
    if (!v.isString())
      fail(o, "'in <string>' requires string as left operand");
    return seq.str().find(v.str()) != std::string::npos;
  }
  if (seq.kind() == Value::Kind::Dict)
    return seq.dictValue().find(v) != nullptr;
  for (const Value &x : iterate(seq, o))
    if (equals(x, v))
      return true;
  return false;
}
int64_t intArg(const Value &v, const char *name, size_t o) {
  if (!v.isInt())
    fail(o, std::string("test ") + name + " needs an integer");
  return v.asInt();
}
bool tOdd(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "odd", o) && intArg(v, "odd", o) % 2 != 0; }
bool tEven(const Value &v, CallArgs &a, size_t o) { return noArgs(a, "even", o) && intArg(v, "even", o) % 2 == 0; }
bool tDivisibleBy(const Value &v, CallArgs &a, size_t o) {
  int64_t n = intArg(a.take(0, "num"), "divisibleby", o);
  a.finish("test divisibleby", o);
  if (n == 0)
    fail(o, "integer modulo by zero");
  return intArg(v, "divisibleby", o) % n == 0;
}

const std::pair<const char *, TestFn> tests[] = {
    {"defined", tDefined},   {"undefined", tUndefined}, {"none", tNone},         {"string", tString},
    {"number", tNumber},     {"integer", tInteger},     {"float", tFloat},       {"boolean", tBoolean},
    {"true", tTrue},         {"false", tFalse},         {"mapping", tMapping},   {"iterable", tIterable},
    {"sequence", tSequence}, {"callable", tCallable},   {"eq", tEq},             {"equalto", tEq},
    {"==", tEq},             {"ne", tNe},               {"!=", tNe},             {"lt", tLt},
    {"lessthan", tLt},       {"<", tLt},                {"gt", tGt},             {"greaterthan", tGt},
    {">", tGt},              {"le", tLe},               {"<=", tLe},             {"ge", tGe},
    {">=", tGe},             {"sameas", tSameAs},       {"in", tIn},             {"odd", tOdd},
    {"even", tEven},         {"divisibleby", tDivisibleBy},
};

} // namespace

TestFn findTest(std::string_view name) {
  for (const auto &[n, t] : tests)
    if (name == n)
      return t;
  return nullptr;
}

} // namespace moe::rt::chat
