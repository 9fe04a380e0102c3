//===- Evaluate.cpp - render a parsed template ---------------------------===//
#include "Evaluate.h"

#include "Error.h"
#include "Limits.h"
#include "Utf8.h"

#include <cmath>
#include <ctime>
#include <unordered_map>

namespace moe::rt::chat {

namespace {

using Frame = std::unordered_map<std::string, Value>;

/// Python's int arithmetic, without its big integers: overflow fails.
template <typename Op> int64_t checked(Op op, int64_t a, int64_t b, size_t offset) {
  int64_t r;
  if (op(a, b, &r))
    fail(offset, "integer overflow (Python would use a big integer)");
  return r;
}
bool add(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
bool sub(int64_t a, int64_t b, int64_t *r) { return __builtin_sub_overflow(a, b, r); }
bool mul(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

Value pyMod(const Value &a, const Value &b, size_t offset) {
  if (a.isInt() && b.isInt()) {
    if (b.asInt() == 0)
      fail(offset, "integer modulo by zero");
    int64_t r = a.asInt() % b.asInt();
    return Value((r != 0 && ((r < 0) != (b.asInt() < 0))) ? r + b.asInt() : r);
  }
  double y = b.asNumber();
  if (y == 0)
    fail(offset, "float modulo by zero");
  double r = std::fmod(a.asNumber(), y);
  if (r != 0 && ((r < 0) != (y < 0)))
    r += y;
  return Value(r);
}

/// The size of `times` copies of something of `size`, saturated.
uint64_t timesSaturated(uint64_t size, uint64_t times) {
  uint64_t total;
  return __builtin_mul_overflow(size, times, &total) ? UINT64_MAX : total;
}

/// `seq * n`, refused before it is built when it would be too long; copies
/// of an empty sequence take no time, whatever n is.
Value repeat(const Value &seq, int64_t n, size_t offset) {
  uint64_t times = n > 0 ? static_cast<uint64_t>(n) : 0;
  if (seq.isString()) {
    const std::string &part = seq.str();
    checkTextBytes(timesSaturated(part.size(), times), offset);
    std::string out;
    for (uint64_t i = 0; !part.empty() && i < times; ++i)
      out += part;
    return Value(std::move(out));
  }
  const List &part = seq.items();
  checkListItems(timesSaturated(part.size(), times), offset);
  List out;
  for (uint64_t i = 0; !part.empty() && i < times; ++i)
    out.insert(out.end(), part.begin(), part.end());
  return Value::list(std::move(out), seq.kind() == Value::Kind::Tuple);
}

[[noreturn]] void badOperands(const std::string &op, const Value &a, const Value &b, size_t offset) {
  if (a.isUndefined() || b.isUndefined())
    fail(offset, (a.isUndefined() ? a : b).undefinedHint());
  fail(offset, "unsupported operand types for " + op + ": '" + a.typeName() + "' and '" + b.typeName() + "'");
}

// The operations below are kept out of line ([[gnu::noinline]]): the
// evaluator's recursive frames call them and must not grow by their locals
// (see "The evaluator recurses" below).

[[gnu::noinline]] Value binary(const std::string &op, const Value &a, const Value &b, size_t offset) {
  bool ints = a.isInt() && b.isInt(), nums = a.isNumber() && b.isNumber();
  if (op == "+") {
    if (ints)
      return Value(checked(add, a.asInt(), b.asInt(), offset));
    if (nums)
      return Value(a.asNumber() + b.asNumber());
    if (a.isString() && b.isString()) {
      checkTextBytes(uint64_t(a.str().size()) + b.str().size(), offset);
      return Value(a.str() + b.str());
    }
    if (a.isSequence() && a.kind() == b.kind()) {
      checkListItems(uint64_t(a.items().size()) + b.items().size(), offset);
      List out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.kind() == Value::Kind::Tuple);
    }
  } else if (op == "-") {
    if (ints)
      return Value(checked(sub, a.asInt(), b.asInt(), offset));
    if (nums)
      return Value(a.asNumber() - b.asNumber());
  } else if (op == "*") {
    if (ints)
      return Value(checked(mul, a.asInt(), b.asInt(), offset));
    if (nums)
      return Value(a.asNumber() * b.asNumber());
    if ((a.isString() || a.isSequence()) && b.isInt())
      return repeat(a, b.asInt(), offset);
    if (a.isInt() && (b.isString() || b.isSequence()))
      return repeat(b, a.asInt(), offset);
  } else if (op == "/") {
    if (nums) {
      if (b.asNumber() == 0)
        fail(offset, "division by zero");
      return Value(a.asNumber() / b.asNumber());
    }
  } else if (op == "//") {
    if (ints) {
      if (b.asInt() == 0)
        fail(offset, "integer division by zero");
      return Value(floorDiv(a.asInt(), b.asInt()));
    }
    if (nums) {
      if (b.asNumber() == 0)
        fail(offset, "float floor division by zero");
      return Value(std::floor(a.asNumber() / b.asNumber()));
    }
  } else if (op == "%") {
    if (a.isString())
      fail(offset, "printf-style string formatting (str % ...) is not supported");
    if (nums)
      return pyMod(a, b, offset);
  } else if (op == "**") {
    if (ints && b.asInt() >= 0) {
      // By squaring: 63 steps at most, whatever the exponent. A square
      // that overflows while bits remain means the power does too.
      int64_t result = 1, base = a.asInt();
      for (int64_t e = b.asInt(); e > 0;) {
        if (e & 1)
          result = checked(mul, result, base, offset);
        e >>= 1;
        if (e > 0)
          base = checked(mul, base, base, offset);
      }
      return Value(result);
    }
    if (nums)
      return Value(std::pow(a.asNumber(), b.asNumber()));
  }
  badOperands(op, a, b, offset);
}

bool contains(const Value &container, const Value &item, size_t offset) {
  switch (container.kind()) {
  case Value::Kind::String:
    if (!item.isString())
      fail(offset, std::string("'in <string>' requires string as left operand, not ") + item.typeName());
    return container.str().find(item.str()) != std::string::npos;
  case Value::Kind::List:
  case Value::Kind::Tuple:
    for (const Value &v : container.items())
      if (equals(v, item))
        return true;
    return false;
  case Value::Kind::Dict:
    return container.dictValue().find(item) != nullptr;
  case Value::Kind::Undefined:
    return false;
  default:
    fail(offset, std::string("argument of type '") + container.typeName() + "' is not iterable");
  }
}

/// Python's slice semantics on indices [0, n).
std::vector<size_t> sliceIndices(int64_t n, const Value &startV, const Value &stopV, const Value &stepV,
                                 size_t offset) {
  auto asIndex = [&](const Value &v) {
    if (!v.isInt())
      fail(offset, "slice indices must be integers or none");
    return v.asInt();
  };
  int64_t step = stepV.isNone() || stepV.isUndefined() ? 1 : asIndex(stepV);
  if (step == 0)
    fail(offset, "slice step cannot be zero");
  auto clamp = [&](const Value &v, int64_t dflt) {
    if (v.isNone() || v.isUndefined())
      return dflt;
    int64_t i = asIndex(v);
    if (i < 0)
      i += n;
    if (step > 0)
      return std::max<int64_t>(0, std::min(i, n));
    return std::max<int64_t>(-1, std::min(i, n - 1));
  };
  int64_t start = clamp(startV, step > 0 ? 0 : n - 1), stop = clamp(stopV, step > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    out.push_back(static_cast<size_t>(i));
  return out;
}

/// seq[start:stop:step], `bounds` holding start, stop and step.
[[gnu::noinline]] Value slice(const Value &seq, const Value (&bounds)[3], size_t offset) {
  if (seq.isString()) {
    std::u32string cps = decodeUtf8(seq.str()), out;
    for (size_t i : sliceIndices(static_cast<int64_t>(cps.size()), bounds[0], bounds[1], bounds[2], offset))
      out += cps[i];
    return Value(encodeUtf8(out));
  }
  if (seq.isSequence()) {
    List out;
    for (size_t i : sliceIndices(static_cast<int64_t>(seq.items().size()), bounds[0], bounds[1], bounds[2], offset))
      out.push_back(seq.items()[i]);
    return Value::list(std::move(out), seq.kind() == Value::Kind::Tuple);
  }
  if (seq.isUndefined())
    fail(offset, seq.undefinedHint());
  fail(offset, std::string("'") + seq.typeName() + "' object is not subscriptable");
}

/// The entries of dict(...) and namespace(...): dicts, then keywords.
Dict dictFromArgs(const CallArgs &args, const char *what, size_t offset) {
  Dict d;
  for (const Value &p : args.positional) {
    if (p.kind() != Value::Kind::Dict)
      fail(offset, std::string(what) + " takes dicts and keyword arguments");
    for (const auto &[k, v] : p.dictValue().entries)
      d.set(k, v);
  }
  for (const auto &[k, v] : args.named)
    d.set(Value(k), v);
  return d;
}

class Evaluator {
public:
  explicit Evaluator(const Dict &variables) {
    Frame globals;
    defineGlobals(globals);
    for (const auto &[k, v] : variables.entries)
      if (k.isString())
        globals[k.str()] = v;
    frames_.push_back(std::move(globals));
  }

  /// Namespaces are the only values a template can change, so the only way
  /// values reach themselves (`{% set ns.me = [ns] %}`): emptying them frees
  /// such cycles, which reference counting alone would leak.
  ~Evaluator() {
    for (const std::weak_ptr<Namespace> &made : namespaces_)
      if (std::shared_ptr<Namespace> ns = made.lock())
        ns->attrs.entries.clear();
  }
  Evaluator(const Evaluator &) = delete;
  Evaluator &operator=(const Evaluator &) = delete;

  std::string run(const Body &body) {
    std::string out;
    execBody(body, out); // The parser keeps break and continue inside loops.
    return out;
  }

private:
  enum class Flow { Normal, Break, Continue };

  /// One level of the evaluator's recursion (a statement or an expression
  /// inside another, a macro call), refused past kMaxRenderDepth before it
  /// is entered.
  class Deeper {
  public:
    Deeper(Evaluator &ev, size_t offset) : ev_(ev) {
      if (ev_.depth_ == kMaxRenderDepth)
        failRenderDepth(offset);
      ++ev_.depth_;
    }
    ~Deeper() { --ev_.depth_; }
    Deeper(const Deeper &) = delete;
    Deeper &operator=(const Deeper &) = delete;

  private:
    Evaluator &ev_;
  };

  void defineGlobals(Frame &g) {
    g["raise_exception"] = Value::function("raise_exception", [](CallArgs &args, size_t offset) -> Value {
      Value msg = args.take(0, "message");
      args.finish("raise_exception()", offset);
      throw TemplateError{offset, toText(msg, offset), true};
    });
    g["strftime_now"] = Value::function("strftime_now", [](CallArgs &args, size_t offset) {
      Value fmt = args.take(0, "format");
      args.finish("strftime_now()", offset);
      if (!fmt.isString())
        fail(offset, "strftime_now() takes a format string");
      std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buf[512];
      size_t n = std::strftime(buf, sizeof buf, fmt.str().c_str(), &local);
      return Value(std::string(buf, n));
    });
    g["namespace"] = Value::function("namespace", [this](CallArgs &args, size_t offset) {
      auto ns = std::make_shared<Namespace>();
      ns->attrs = dictFromArgs(args, "namespace()", offset);
      namespaces_.push_back(ns);
      return Value::ns(ns);
    });
    g["dict"] = Value::function("dict", [](CallArgs &args, size_t offset) {
      return Value::dict(dictFromArgs(args, "dict()", offset));
    });
    g["range"] = Value::function("range", [](CallArgs &args, size_t offset) {
      for (const Value &p : args.positional)
        if (!p.isInt())
          fail(offset, "range() takes integers");
      if (!args.named.empty() || args.positional.empty() || args.positional.size() > 3)
        fail(offset, "range() takes 1 to 3 positional integers");
      const auto &p = args.positional;
      int64_t start = p.size() > 1 ? p[0].asInt() : 0, stop = p.size() > 1 ? p[1].asInt() : p[0].asInt();
      int64_t step = p.size() > 2 ? p[2].asInt() : 1;
      if (step == 0)
        fail(offset, "range() arg 3 must not be zero");
      List out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        checkListItems(out.size() + 1, offset);
        out.push_back(Value(i));
      }
      return Value::list(std::move(out));
    });
  }

  Value lookup(const std::string &name) const {
    for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end())
        return found->second;
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  void assign(const std::string &name, Value v) { frames_.back()[name] = std::move(v); }

  // The evaluator recurses through exec/execNode and eval/evalNode. Each
  // kind of node that holds values while it evaluates its children has a
  // function of its own, kept out of line: in one switch, the locals of
  // every kind would be in the frame of every level of recursion (6 KB a
  // level under ASan, which gives each local its own slot).

  /// Every string a statement writes to grows here: the output, a block
  /// set's capture, a macro's result.
  Flow execBody(const Body &body, std::string &out) {
    for (const NodePtr &n : body) {
      Flow f = exec(*n, out);
      checkTextBytes(out.size(), n->offset);
      if (f != Flow::Normal)
        return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Node &n, std::string &out) {
    Deeper level(*this, n.offset);
    try {
      return execNode(n, out);
    } catch (TemplateError &err) { // One raised without a position gets this one.
      if (err.offset == kUnlocated)
        err.offset = n.offset;
      throw;
    }
  }

  Flow execNode(const Node &n, std::string &out) {
    switch (n.kind) {
    case Node::Kind::Text:
      out += n.text;
      return Flow::Normal;
    case Node::Kind::Print:
      execPrint(n, out);
      return Flow::Normal;
    case Node::Kind::If:
      return execIf(n, out);
    case Node::Kind::For:
      execFor(n, out);
      return Flow::Normal;
    case Node::Kind::Set:
      execSet(n);
      return Flow::Normal;
    case Node::Kind::SetBlock:
      return execSetBlock(n);
    case Node::Kind::Macro:
      defineMacro(n);
      return Flow::Normal;
    case Node::Kind::CallBlock:
      execCallBlock(n, out);
      return Flow::Normal;
    case Node::Kind::Break:
      return Flow::Break;
    case Node::Kind::Continue:
      return Flow::Continue;
    case Node::Kind::Generation:
      return execBody(n.body, out);
    }
    return Flow::Normal;
  }

  [[gnu::noinline]] void execPrint(const Node &n, std::string &out) { out += toText(eval(*n.expr), n.offset); }

  [[gnu::noinline]] Flow execIf(const Node &n, std::string &out) {
    for (const auto &[cond, body] : n.branches)
      if (truthy(eval(*cond)))
        return execBody(body, out);
    return execBody(n.elseBody, out);
  }

  [[gnu::noinline]] Flow execSetBlock(const Node &n) {
    std::string captured;
    Flow f = execBody(n.body, captured);
    assign(n.text, Value(std::move(captured)));
    return f;
  }

  [[gnu::noinline]] void defineMacro(const Node &n) { assign(n.text, macro(n)); }

  /// The macro receives the block as its `caller` keyword argument.
  [[gnu::noinline]] void execCallBlock(const Node &n, std::string &out) {
    Value callee = eval(*n.expr->target);
    CallArgs args = evalArgs(*n.expr);
    args.named.emplace_back("caller", macro(n));
    if (callee.kind() != Value::Kind::Callable)
      fail(n.expr->offset, "a call block needs a macro to call");
    out += toText(callee.callable().call(args, n.expr->offset), n.offset);
  }

  void unpack(const std::vector<std::string> &names, const Value &v, size_t offset) {
    if (names.size() == 1) {
      assign(names[0], v);
      return;
    }
    List parts = v.isSequence() ? v.items() : iterate(v, offset);
    if (parts.size() != names.size())
      fail(offset, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                       std::to_string(names.size()) + " names");
    for (size_t i = 0; i < names.size(); ++i)
      assign(names[i], parts[i]);
  }

  [[gnu::noinline]] void execFor(const Node &n, std::string &out) {
    List all = iterate(eval(*n.expr), n.expr->offset);
    List items;
    if (n.cond) {
      // `for x in xs if cond`: the condition sees the target but no loop.
      for (const Value &v : all) {
        frames_.emplace_back();
        unpack(n.names, v, n.offset);
        bool keep = truthy(eval(*n.cond));
        frames_.pop_back();
        if (keep)
          items.push_back(v);
      }
    } else {
      items = std::move(all);
    }
    if (items.empty()) {
      execBody(n.elseBody, out);
      return;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      frames_.emplace_back();
      Flow f;
      try {
        assign("loop", loopVariable(items, i));
        unpack(n.names, items[i], n.offset);
        f = execBody(n.body, out);
      } catch (...) {
        frames_.pop_back();
        throw;
      }
      frames_.pop_back();
      if (f == Flow::Break)
        break;
    }
  }

  /// jinja2's `loop` while the body runs for items[at].
  [[gnu::noinline]] static Value loopVariable(const List &items, size_t at) {
    int64_t len = static_cast<int64_t>(items.size()), i = static_cast<int64_t>(at);
    Dict loop;
    loop.set("index", Value(i + 1));
    loop.set("index0", Value(i));
    loop.set("revindex", Value(len - i));
    loop.set("revindex0", Value(len - i - 1));
    loop.set("first", Value(i == 0));
    loop.set("last", Value(i == len - 1));
    loop.set("length", Value(len));
    loop.set("depth", Value(1));
    loop.set("depth0", Value(0));
    loop.set("previtem", i > 0 ? items[at - 1] : Value::undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < len ? items[at + 1] : Value::undefined("there is no next item"));
    loop.set("cycle", Value::function("loop.cycle", [at](CallArgs &args, size_t offset) {
               if (args.positional.empty() || !args.named.empty())
                 fail(offset, "loop.cycle() takes positional arguments");
               return args.positional[at % args.positional.size()];
             }));
    return Value::dict(std::move(loop));
  }

  [[gnu::noinline]] void execSet(const Node &n) {
    Value v = eval(*n.expr);
    if (n.attr.empty()) {
      unpack(n.names, v, n.offset);
      return;
    }
    Value target = lookup(n.text);
    if (target.kind() != Value::Kind::Namespace)
      fail(n.offset, "cannot assign attribute on non-namespace object '" + n.text + "'");
    target.nsValue().attrs.set(Value(n.attr), std::move(v));
  }

  /// While a macro runs, its frames (the globals, the frames it closed
  /// over, a new one for its parameters) stand in for the caller's, which
  /// come back when it returns or fails.
  class MacroFrames {
  public:
    [[gnu::noinline]] MacroFrames(Evaluator &ev, const std::vector<Frame> &closure)
        : ev_(ev), saved_(std::make_move_iterator(ev.frames_.begin() + 1), std::make_move_iterator(ev.frames_.end())) {
      ev_.frames_.resize(1);
      ev_.frames_.insert(ev_.frames_.end(), closure.begin(), closure.end());
      ev_.frames_.emplace_back();
    }
    [[gnu::noinline]] ~MacroFrames() {
      ev_.frames_.resize(1);
      ev_.frames_.insert(ev_.frames_.end(), std::make_move_iterator(saved_.begin()),
                         std::make_move_iterator(saved_.end()));
    }
    MacroFrames(const MacroFrames &) = delete;
    MacroFrames &operator=(const MacroFrames &) = delete;

  private:
    Evaluator &ev_;
    std::vector<Frame> saved_;
  };

  /// A macro (or a call block's `caller`) as a callable value. Its body sees
  /// the globals, the template's top-level names, the local frames where it
  /// was defined (a snapshot: a loop's variables for a call block) and its
  /// parameters.
  Value macro(const Node &n) {
    std::string name = n.kind == Node::Kind::Macro ? n.text : "caller";
    std::vector<Frame> closure(frames_.begin() + 1, frames_.end());
    return Value::function(name, [this, &n, name, closure](CallArgs &args, size_t offset) {
      MacroFrames frames(*this, closure);
      std::string out;
      bindArguments(n, name, args, offset);
      execBody(n.body, out);
      return Value(std::move(out));
    });
  }

  /// A macro's `caller` and parameters, in the frame of its call: each from
  /// its argument, else its default (which may use the parameters before
  /// it), else undefined.
  [[gnu::noinline]] void bindArguments(const Node &n, const std::string &name, CallArgs &args, size_t offset) {
    if (n.kind == Node::Kind::Macro && args.has(SIZE_MAX, "caller"))
      assign("caller", args.take(SIZE_MAX, "caller"));
    for (size_t p = 0; p < n.names.size(); ++p) {
      const char *param = n.names[p].c_str();
      if (args.has(p, param))
        assign(param, args.take(p, param));
      else if (n.defaults[p])
        assign(param, eval(*n.defaults[p]));
      else
        assign(param, Value::undefined("parameter '" + n.names[p] + "' was not provided"));
    }
    args.finish("macro '" + name + "'", offset);
  }

  CallArgs evalArgs(const Expr &e) {
    CallArgs args;
    for (const ExprPtr &a : e.args)
      args.positional.push_back(eval(*a));
    for (const auto &[k, a] : e.kwargs)
      args.named.emplace_back(k, eval(*a));
    return args;
  }

  Value eval(const Expr &e) {
    Deeper level(*this, e.offset);
    try {
      return evalNode(e);
    } catch (TemplateError &err) { // One raised without a position gets this one.
      if (err.offset == kUnlocated)
        err.offset = e.offset;
      throw;
    }
  }

  Value evalNode(const Expr &e) {
    switch (e.kind) {
    case Expr::Kind::Literal:
      return e.literal;
    case Expr::Kind::Name:
      return lookup(e.name);
    case Expr::Kind::List:
    case Expr::Kind::Tuple:
      return evalList(e);
    case Expr::Kind::Dict:
      return evalDict(e);
    case Expr::Kind::Attr:
    case Expr::Kind::Item:
      return evalAccess(e);
    case Expr::Kind::Slice:
      return evalSlice(e);
    case Expr::Kind::Call:
      return evalCall(e);
    case Expr::Kind::Filter:
    case Expr::Kind::Test:
      return evalFilterOrTest(e);
    case Expr::Kind::Neg:
    case Expr::Kind::Pos:
      return evalSign(e);
    case Expr::Kind::Not:
    case Expr::Kind::And:
    case Expr::Kind::Or:
      return evalLogic(e);
    case Expr::Kind::Binary:
      return evalBinary(e);
    case Expr::Kind::Compare:
      return compare(e);
    case Expr::Kind::Concat:
      return evalConcat(e);
    case Expr::Kind::Cond:
      return evalCond(e);
    }
    fail(e.offset, "unhandled expression");
  }

  [[gnu::noinline]] Value evalList(const Expr &e) {
    List items;
    for (const ExprPtr &a : e.args)
      items.push_back(eval(*a));
    return Value::list(std::move(items), e.kind == Expr::Kind::Tuple);
  }

  [[gnu::noinline]] Value evalDict(const Expr &e) {
    Dict d;
    for (size_t i = 0; i + 1 < e.args.size(); i += 2)
      d.set(eval(*e.args[i]), eval(*e.args[i + 1]));
    return Value::dict(std::move(d));
  }

  /// `a.b`, `a[b]`.
  [[gnu::noinline]] Value evalAccess(const Expr &e) {
    Value object = eval(*e.target);
    if (e.kind == Expr::Kind::Attr)
      return getAttribute(object, e.name, e.offset);
    return getItem(object, eval(*e.args[0]), e.offset);
  }

  [[gnu::noinline]] Value evalCall(const Expr &e) {
    Value callee = eval(*e.target);
    CallArgs args = evalArgs(e);
    if (callee.kind() != Value::Kind::Callable) {
      if (callee.isUndefined())
        fail(e.offset, callee.undefinedHint());
      fail(e.offset, std::string("'") + callee.typeName() + "' object is not callable");
    }
    return callee.callable().call(args, e.offset);
  }

  [[gnu::noinline]] Value evalFilterOrTest(const Expr &e) {
    Value subject = eval(*e.target);
    CallArgs args = evalArgs(e);
    if (e.kind == Expr::Kind::Filter)
      return e.filter(subject, args, e.offset);
    return Value(e.test(subject, args, e.offset));
  }

  [[gnu::noinline]] Value evalSign(const Expr &e) {
    Value v = eval(*e.target);
    if (!v.isNumber()) {
      if (v.isUndefined())
        fail(e.offset, v.undefinedHint());
      fail(e.offset, std::string("bad operand type for unary ") + (e.kind == Expr::Kind::Neg ? "-" : "+") + ": '" +
                         v.typeName() + "'");
    }
    if (e.kind == Expr::Kind::Pos)
      return v.isInt() ? Value(v.asInt()) : v;
    if (v.isInt())
      return Value(checked(sub, 0, v.asInt(), e.offset));
    return Value(-v.asNumber());
  }

  /// `not a`; `a and b`, `a or b`, which return an operand.
  [[gnu::noinline]] Value evalLogic(const Expr &e) {
    Value left = eval(*e.target);
    if (e.kind == Expr::Kind::Not)
      return Value(!truthy(left));
    if (truthy(left) == (e.kind == Expr::Kind::And))
      return eval(*e.args[0]);
    return left;
  }

  [[gnu::noinline]] Value evalBinary(const Expr &e) {
    Value left = eval(*e.target);
    return binary(e.name, left, eval(*e.args[0]), e.offset);
  }

  [[gnu::noinline]] Value evalConcat(const Expr &e) {
    std::string s;
    for (const ExprPtr &a : e.args) {
      s += toText(eval(*a), a->offset);
      checkTextBytes(s.size(), a->offset);
    }
    return Value(std::move(s));
  }

  [[gnu::noinline]] Value evalCond(const Expr &e) {
    if (truthy(eval(*e.args[0])))
      return eval(*e.args[1]);
    return e.args[2] ? eval(*e.args[2]) : Value::undefined("the inline if has no else branch");
  }

  [[gnu::noinline]] Value compare(const Expr &e) {
    Value left = eval(*e.target);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value right = eval(*e.args[i]);
      const std::string &op = e.ops[i];
      bool ok;
      if (op == "==")
        ok = equals(left, right);
      else if (op == "!=")
        ok = !equals(left, right);
      else if (op == "<")
        ok = lessThan(left, right, e.offset);
      else if (op == ">")
        ok = lessThan(right, left, e.offset);
      else if (op == "<=")
        ok = !lessThan(right, left, e.offset);
      else if (op == ">=")
        ok = !lessThan(left, right, e.offset);
      else if (op == "in")
        ok = contains(right, left, e.offset);
      else
        ok = !contains(right, left, e.offset);
      if (!ok)
        return Value(false);
      left = std::move(right);
    }
    return Value(true);
  }

  [[gnu::noinline]] Value evalSlice(const Expr &e) {
    Value seq = eval(*e.target);
    Value bounds[3];
    for (int k = 0; k < 3; ++k)
      bounds[k] = e.args[k] ? eval(*e.args[k]) : Value::none();
    return slice(seq, bounds, e.offset);
  }


  std::vector<Frame> frames_;
  int depth_ = 0; ///< Levels of Deeper open.
  std::vector<std::weak_ptr<Namespace>> namespaces_; ///< Every namespace() made.
};

} // namespace

std::string renderTemplate(const Body &body, const Dict &variables) { return Evaluator(variables).run(body); }

} // namespace moe::rt::chat
