//===- Value.h - Jinja values with Python semantics -------------*- C++ -*-===//
//
// What a template computes with: jinja2's Undefined, Python's None, bool,
// int, float, str, list, tuple and dict, jinja2's Namespace and callables
// (globals, bound methods, macros). Equality, ordering, truthiness, str() and
// repr() follow Python, because templates print and compare these values and
// the rendered prompt must equal transformers' byte for byte.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_VALUE_H
#define MOE_RUNTIME_TEXT_CHAT_VALUE_H

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace moe::rt::chat {

class Value;
using List = std::vector<Value>;
struct Dict;
struct Namespace;
struct CallArgs;

/// A global function, a bound method, a macro or `caller`.
struct Callable {
  std::string name;
  std::function<Value(CallArgs &args, size_t offset)> call;
};

class Value {
public:
  /// The containers (values that hold values) come last, from List on.
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Namespace, Callable };

  Value() = default; ///< Undefined.
  Value(const Value &) = default;
  Value(Value &&) noexcept = default;
  Value &operator=(const Value &) = default;
  Value &operator=(Value &&) noexcept = default;
  /// Containers may nest deeper than destructors can recurse (a template
  /// can build a list 100,000 deep in a loop), so the last reference to a
  /// list, tuple, dict, namespace or callable frees it without recursion.
  ~Value() {
    if (kind_ >= Kind::List)
      releaseContainer();
  }

  static Value undefined(std::string hint) {
    Value v;
    v.hint_ = std::make_shared<std::string>(std::move(hint));
    return v;
  }
  static Value none() { return Value(Kind::None, std::monostate{}); }
  Value(bool b) : kind_(Kind::Bool), data_(b) {}
  Value(int64_t i) : kind_(Kind::Int), data_(i) {}
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(double d) : kind_(Kind::Float), data_(d) {}
  Value(std::string s) : kind_(Kind::String), data_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char *s) : Value(std::string(s)) {}
  static Value list(List items, bool tuple = false) {
    return Value(tuple ? Kind::Tuple : Kind::List, std::make_shared<const List>(std::move(items)));
  }
  static Value dict(Dict d);
  static Value ns(std::shared_ptr<Namespace> n) { return Value(Kind::Namespace, std::move(n)); }
  static Value function(std::string name, std::function<Value(CallArgs &, size_t)> fn) {
    return Value(Kind::Callable, std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)}));
  }

  Kind kind() const { return kind_; }
  bool isUndefined() const { return kind_ == Kind::Undefined; }
  bool isNone() const { return kind_ == Kind::None; }
  bool isString() const { return kind_ == Kind::String; }
  bool isInt() const { return kind_ == Kind::Int || kind_ == Kind::Bool; } ///< Python: bool is an int.
  bool isNumber() const { return isInt() || kind_ == Kind::Float; }
  bool isSequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }

  bool asBool() const { return std::get<bool>(data_); }
  int64_t asInt() const { return kind_ == Kind::Bool ? asBool() : std::get<int64_t>(data_); }
  double asNumber() const { return kind_ == Kind::Float ? std::get<double>(data_) : double(asInt()); }
  const std::string &str() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  const List &items() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Dict &dictValue() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Namespace &nsValue() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  const Callable &callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  /// Why an Undefined is undefined, as jinja2 words it ("'x' is undefined").
  std::string undefinedHint() const { return hint_ ? *hint_ : "value is undefined"; }

  /// Python's type name, for error messages ("int", "str", "dict", ...).
  const char *typeName() const;

private:
  template <typename T> Value(Kind k, T data) : kind_(k), data_(std::move(data)) {}
  void releaseContainer() noexcept;
  Kind kind_ = Kind::Undefined;
  std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<const List>, std::shared_ptr<const Dict>, std::shared_ptr<Namespace>,
               std::shared_ptr<const Callable>>
      data_;
  std::shared_ptr<std::string> hint_;
};

/// A Python dict: insertion-ordered, looked up by Python equality. Template
/// dicts are small (a message, a tool schema), so a vector is enough.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  const Value *find(const Value &key) const;
  void set(Value key, Value value);
};

/// jinja2's namespace(): the one mutable object a template can make.
struct Namespace {
  Dict attrs;
};

/// Positional and keyword arguments of a call, filter or test.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  /// The argument at `index` or named `name`, else `fallback`. Marks it used.
  Value take(size_t index, const char *name, Value fallback = Value());
  bool has(size_t index, const char *name) const;
  /// Fails when an argument was given that no take() consumed.
  void finish(const std::string &what, size_t offset) const;

private:
  std::vector<bool> usedPositional_;
  std::vector<bool> usedNamed_;
};

// The walks below recurse into lists, tuples and dicts, and fail past
// kMaxValueDepth levels (Limits.h); equals fails at kUnlocated, for the
// evaluator to locate. Printing fails past kMaxTextBytes.

bool truthy(const Value &v);
/// Python's a == b.
bool equals(const Value &a, const Value &b);
/// Python's a < b; fails (at `offset`) for types Python does not order.
bool lessThan(const Value &a, const Value &b, size_t offset);
/// jinja2's str() of a printed value: Undefined prints nothing.
std::string toText(const Value &v, size_t offset);
/// Python's repr(), as lists and dicts print their items.
std::string repr(const Value &v, size_t offset);
/// Python's repr() of a float ("1.0", "1e+16", "0.1").
std::string floatRepr(double d);

} // namespace moe::rt::chat

#endif
