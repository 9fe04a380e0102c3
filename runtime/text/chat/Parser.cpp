//===- Parser.cpp - tokens to the template tree --------------------------===//
#include "Parser.h"

#include "Error.h"
#include "Limits.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

namespace moe::rt::chat {

namespace {

using K = Token::Kind;

ExprPtr makeExpr(Expr::Kind kind, size_t offset) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->offset = offset;
  return e;
}

NodePtr makeNode(Node::Kind kind, size_t offset) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->offset = offset;
  return n;
}

/// Statements jinja2 has that this interpreter does not run.
bool isUnsupportedStatement(const std::string &s) {
  static const char *const names[] = {"include", "import", "from",   "extends",    "block",
                                      "filter",  "with",   "do",     "autoescape", "trans",
                                      "raw",     "print",  "pluralize"};
  return std::any_of(std::begin(names), std::end(names), [&](const char *n) { return s == n; });
}

class Parser {
public:
  explicit Parser(const std::vector<Token> &t) : t_(t) {}

  Body parseAll() {
    Body body = subparse({});
    return body;
  }

private:
  /// One level of the parser's recursion: a block inside a block, a
  /// bracket inside a bracket, a unary operator on a unary operator. The
  /// limit is checked before the level is parsed, while the stack is short.
  class Nested {
  public:
    explicit Nested(Parser &p) : p_(p) {
      if (p_.nesting_ == kMaxTemplateNesting)
        failTemplateNesting(p_.cur().offset);
      ++p_.nesting_;
    }
    ~Nested() { --p_.nesting_; }
    Nested(const Nested &) = delete;
    Nested &operator=(const Nested &) = delete;

  private:
    Parser &p_;
  };

  /// Sets the height of a node whose children are parsed, failing past
  /// kMaxExpressionHeight: chains (`a + b + c`, `x|f|g`, `a.b.c`) grow the
  /// tree in a loop, without nesting the parser.
  static ExprPtr sealed(ExprPtr e) {
    int below = e->target ? e->target->height : 0;
    for (const ExprPtr &a : e->args)
      if (a)
        below = std::max(below, a->height);
    for (const auto &kw : e->kwargs)
      below = std::max(below, kw.second->height);
    if (below >= kMaxExpressionHeight)
      failExpressionHeight(e->offset);
    e->height = below + 1;
    return e;
  }

  const Token &cur() const { return t_[i_]; }
  const Token &peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  bool isOp(const char *op) const { return cur().kind == K::Op && cur().text == op; }
  bool isName(const char *name) const { return cur().kind == K::Name && cur().text == name; }
  const Token &next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }

  [[noreturn]] void unexpected(const char *wanted) const {
    std::string got = cur().kind == K::End        ? "the end of the template"
                      : cur().kind == K::BlockEnd ? "\"%}\""
                      : cur().kind == K::PrintEnd ? "\"}}\""
                                                  : "'" + cur().text + "'";
    fail(cur().offset, std::string("expected ") + wanted + ", got " + got);
  }
  void expectOp(const char *op) {
    if (!isOp(op))
      unexpected((std::string("'") + op + "'").c_str());
    next();
  }
  std::string expectName() {
    if (cur().kind != K::Name)
      unexpected("a name");
    return next().text;
  }
  void expectBlockEnd() {
    if (cur().kind != K::BlockEnd)
      unexpected("\"%}\"");
    next();
  }

  /// Statements until a block tag named in `ends` (left unconsumed, at its name).
  Body subparse(std::initializer_list<const char *> ends) {
    Body body;
    while (true) {
      const Token &tok = cur();
      switch (tok.kind) {
      case K::Text: {
        auto n = makeNode(Node::Kind::Text, tok.offset);
        n->text = tok.text;
        body.push_back(std::move(n));
        next();
        break;
      }
      case K::PrintBegin: {
        next();
        auto n = makeNode(Node::Kind::Print, tok.offset);
        n->expr = parseTuple(true);
        if (cur().kind != K::PrintEnd)
          unexpected("\"}}\"");
        next();
        body.push_back(std::move(n));
        break;
      }
      case K::BlockBegin: {
        next();
        if (cur().kind == K::Name)
          for (const char *e : ends)
            if (cur().text == e)
              return body;
        body.push_back(statement());
        break;
      }
      case K::End:
        if (ends.size())
          fail(tok.offset, std::string("the template ends inside a block: expected {% ") + *ends.begin() +
                               " %}");
        return body;
      default:
        unexpected("text or a tag");
      }
    }
  }

  /// Consumes `{% name %}` after subparse stopped at it.
  void endTag(const char *name) {
    if (!isName(name))
      unexpected(name);
    next();
    expectBlockEnd();
  }

  // The parser recurses from statement() and parseExpression(). The
  // functions that parse one kind of statement or bracket, or the filters
  // after an operand, are kept out of line ([[gnu::noinline]]): a level's
  // frames then hold only the locals of the kind being parsed (under ASan,
  // which gives every local its own slot, 128 nested brackets took 1664 KiB
  // of stack with them inlined, 1236 KiB without).

  NodePtr statement() {
    Nested level(*this);
    const Token &tok = cur();
    if (tok.kind != K::Name)
      unexpected("a statement name");
    const std::string &s = tok.text;
    if (s == "if")
      return ifStatement();
    if (s == "for")
      return forStatement();
    if (s == "set")
      return setStatement();
    if (s == "macro")
      return macroStatement();
    if (s == "call")
      return callStatement();
    if (s == "break" || s == "continue") {
      if (loops_ == 0)
        fail(tok.offset, "\"" + s + "\" outside a for loop");
      next();
      expectBlockEnd();
      return makeNode(s == "break" ? Node::Kind::Break : Node::Kind::Continue, tok.offset);
    }
    if (s == "generation") { // transformers' AssistantTracker tag: renders its body.
      next();
      expectBlockEnd();
      auto n = makeNode(Node::Kind::Generation, tok.offset);
      n->body = subparse({"endgeneration"});
      endTag("endgeneration");
      return n;
    }
    if (isUnsupportedStatement(s))
      fail(tok.offset, "statement \"" + s + "\" is not supported");
    fail(tok.offset, "unknown statement \"" + s + "\"");
  }

  [[gnu::noinline]] NodePtr ifStatement() {
    auto n = makeNode(Node::Kind::If, cur().offset);
    next();
    while (true) {
      ExprPtr cond = parseTuple(true);
      expectBlockEnd();
      Body body = subparse({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(body));
      if (isName("elif")) {
        next();
        continue;
      }
      if (isName("else")) {
        next();
        expectBlockEnd();
        n->elseBody = subparse({"endif"});
      }
      endTag("endif");
      return n;
    }
  }

  std::vector<std::string> targets() {
    std::vector<std::string> names;
    bool paren = isOp("(");
    if (paren)
      next();
    names.push_back(expectName());
    while (isOp(",")) {
      next();
      if (cur().kind != K::Name)
        break;
      names.push_back(expectName());
    }
    if (paren)
      expectOp(")");
    return names;
  }

  [[gnu::noinline]] NodePtr forStatement() {
    auto n = makeNode(Node::Kind::For, cur().offset);
    next();
    n->names = targets();
    if (!isName("in"))
      unexpected("'in'");
    next();
    n->expr = parseTuple(false);
    if (isName("if")) {
      next();
      n->cond = parseTuple(true);
    }
    if (isName("recursive"))
      fail(cur().offset, "recursive for loops are not supported");
    expectBlockEnd();
    ++loops_;
    n->body = subparse({"else", "endfor"});
    --loops_;
    if (isName("else")) {
      next();
      expectBlockEnd();
      n->elseBody = subparse({"endfor"});
    }
    endTag("endfor");
    return n;
  }

  [[gnu::noinline]] NodePtr setStatement() {
    size_t at = cur().offset;
    next();
    std::string first = expectName();
    if (isOp(".")) {
      next();
      auto n = makeNode(Node::Kind::Set, at);
      n->text = first;
      n->attr = expectName();
      expectOp("=");
      n->expr = parseTuple(true);
      expectBlockEnd();
      return n;
    }
    std::vector<std::string> names{first};
    while (isOp(",")) {
      next();
      names.push_back(expectName());
    }
    if (isOp("=")) {
      next();
      auto n = makeNode(Node::Kind::Set, at);
      n->names = std::move(names);
      n->expr = parseTuple(true);
      expectBlockEnd();
      return n;
    }
    if (names.size() != 1)
      unexpected("'='");
    if (isOp("|"))
      fail(cur().offset, "filters on a block set are not supported");
    expectBlockEnd();
    auto n = makeNode(Node::Kind::SetBlock, at);
    n->text = first;
    n->body = subparse({"endset"});
    endTag("endset");
    return n;
  }

  /// `(a, b=default, ...)` of a macro or a call block.
  void parameters(Node &n) {
    expectOp("(");
    while (!isOp(")")) {
      if (!n.names.empty())
        expectOp(",");
      if (isOp(")"))
        break;
      n.names.push_back(expectName());
      if (isOp("=")) {
        next();
        n.defaults.push_back(parseExpression(true));
      } else {
        n.defaults.push_back(nullptr);
      }
    }
    next();
  }

  [[gnu::noinline]] NodePtr macroStatement() {
    auto n = makeNode(Node::Kind::Macro, cur().offset);
    next();
    n->text = expectName();
    parameters(*n);
    expectBlockEnd();
    int outerLoops = std::exchange(loops_, 0);
    n->body = subparse({"endmacro"});
    loops_ = outerLoops;
    endTag("endmacro");
    return n;
  }

  [[gnu::noinline]] NodePtr callStatement() {
    auto n = makeNode(Node::Kind::CallBlock, cur().offset);
    next();
    if (isOp("("))
      parameters(*n);
    n->expr = parseExpression(true);
    if (n->expr->kind != Expr::Kind::Call)
      fail(n->expr->offset, "a call block needs a call expression");
    expectBlockEnd();
    n->body = subparse({"endcall"});
    endTag("endcall");
    return n;
  }

  // Expressions, lowest precedence first, as jinja2's parser.

  /// An expression, or a tuple when commas follow (`a, b`).
  ExprPtr parseTuple(bool withCond) {
    size_t at = cur().offset;
    ExprPtr first = parseExpression(withCond);
    if (!isOp(","))
      return first;
    auto tuple = makeExpr(Expr::Kind::Tuple, at);
    tuple->args.push_back(std::move(first));
    while (isOp(",")) {
      next();
      if (cur().kind == K::BlockEnd || cur().kind == K::PrintEnd || isOp(")") || isName("if"))
        break;
      tuple->args.push_back(parseExpression(withCond));
    }
    return sealed(std::move(tuple));
  }

  ExprPtr parseExpression(bool withCond) { return withCond ? parseCond() : parseOr(); }

  ExprPtr parseCond() {
    ExprPtr expr = parseOr();
    while (isName("if")) {
      size_t at = cur().offset;
      next();
      auto cond = makeExpr(Expr::Kind::Cond, at);
      cond->args.push_back(parseOr());
      cond->args.push_back(std::move(expr));
      if (isName("else")) {
        Nested level(*this);
        next();
        cond->args.push_back(parseCond());
      } else {
        cond->args.push_back(nullptr);
      }
      expr = sealed(std::move(cond));
    }
    return expr;
  }

  ExprPtr binaryChain(Expr::Kind kind, const char *word, ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    while (isName(word)) {
      auto e = makeExpr(kind, cur().offset);
      next();
      e->target = std::move(left);
      e->args.push_back((this->*operand)());
      left = sealed(std::move(e));
    }
    return left;
  }
  ExprPtr parseOr() { return binaryChain(Expr::Kind::Or, "or", &Parser::parseAnd); }
  ExprPtr parseAnd() { return binaryChain(Expr::Kind::And, "and", &Parser::parseNot); }

  ExprPtr parseNot() {
    if (isName("not")) {
      Nested level(*this);
      auto e = makeExpr(Expr::Kind::Not, cur().offset);
      next();
      e->target = parseNot();
      return sealed(std::move(e));
    }
    return parseCompare();
  }

  ExprPtr parseCompare() {
    size_t at = cur().offset;
    ExprPtr left = parseMath1();
    auto cmp = makeExpr(Expr::Kind::Compare, at);
    while (true) {
      std::string op;
      if (cur().kind == K::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (isName("in")) {
        op = "in";
        next();
      } else if (isName("not") && peek().kind == K::Name && peek().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parseMath1());
    }
    if (cmp->ops.empty())
      return left;
    cmp->target = std::move(left);
    return sealed(std::move(cmp));
  }

  ExprPtr binaryOps(std::initializer_list<const char *> ops, ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    while (cur().kind == K::Op &&
           std::any_of(ops.begin(), ops.end(), [&](const char *o) { return cur().text == o; })) {
      auto e = makeExpr(Expr::Kind::Binary, cur().offset);
      e->name = next().text;
      e->target = std::move(left);
      e->args.push_back((this->*operand)());
      left = sealed(std::move(e));
    }
    return left;
  }
  ExprPtr parseMath1() { return binaryOps({"+", "-"}, &Parser::parseConcat); }
  ExprPtr parseConcat() {
    size_t at = cur().offset;
    ExprPtr first = parseMath2();
    if (!isOp("~"))
      return first;
    auto e = makeExpr(Expr::Kind::Concat, at);
    e->args.push_back(std::move(first));
    while (isOp("~")) {
      next();
      e->args.push_back(parseMath2());
    }
    return sealed(std::move(e));
  }
  ExprPtr parseMath2() { return binaryOps({"*", "/", "//", "%"}, &Parser::parsePow); }
  ExprPtr parsePow() { return binaryOps({"**"}, &Parser::parseUnaryFiltered); }
  ExprPtr parseUnaryFiltered() { return parseUnary(true); }

  ExprPtr parseUnary(bool withFilter) {
    ExprPtr node;
    if (isOp("-") || isOp("+")) {
      Nested level(*this);
      node = makeExpr(isOp("-") ? Expr::Kind::Neg : Expr::Kind::Pos, cur().offset);
      next();
      node->target = parseUnary(false);
      node = sealed(std::move(node));
    } else {
      node = parsePrimary();
    }
    node = parsePostfix(std::move(node));
    if (withFilter)
      node = parseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr parsePrimary() {
    const Token &tok = cur();
    switch (tok.kind) {
    case K::Name: {
      next();
      auto e = makeExpr(Expr::Kind::Literal, tok.offset);
      if (tok.text == "true" || tok.text == "True")
        e->literal = Value(true);
      else if (tok.text == "false" || tok.text == "False")
        e->literal = Value(false);
      else if (tok.text == "none" || tok.text == "None")
        e->literal = Value::none();
      else {
        e->kind = Expr::Kind::Name;
        e->name = tok.text;
      }
      return e;
    }
    case K::String: {
      std::string s;
      while (cur().kind == K::String) // Adjacent literals concatenate.
        s += next().text;
      auto e = makeExpr(Expr::Kind::Literal, tok.offset);
      e->literal = Value(std::move(s));
      return e;
    }
    case K::Int:
    case K::Float: {
      next();
      auto e = makeExpr(Expr::Kind::Literal, tok.offset);
      e->literal = tok.kind == K::Int ? Value(tok.intValue) : Value(tok.floatValue);
      return e;
    }
    case K::Op:
      if (tok.text == "(")
        return parseParenthesized();
      if (tok.text == "[")
        return parseList();
      if (tok.text == "{")
        return parseDict();
      break;
    default:
      break;
    }
    unexpected("an expression");
  }

  [[gnu::noinline]] ExprPtr parseParenthesized() {
    Nested level(*this);
    size_t at = cur().offset;
    next();
    if (isOp(")")) {
      next();
      return makeExpr(Expr::Kind::Tuple, at);
    }
    ExprPtr inner = parseExpression(true);
    if (isOp(",")) {
      auto tuple = makeExpr(Expr::Kind::Tuple, at);
      tuple->args.push_back(std::move(inner));
      while (isOp(",")) {
        next();
        if (isOp(")"))
          break;
        tuple->args.push_back(parseExpression(true));
      }
      inner = sealed(std::move(tuple));
    }
    expectOp(")");
    return inner;
  }

  [[gnu::noinline]] ExprPtr parseList() {
    Nested level(*this);
    auto list = makeExpr(Expr::Kind::List, cur().offset);
    next();
    while (!isOp("]")) {
      if (!list->args.empty())
        expectOp(",");
      if (isOp("]"))
        break;
      list->args.push_back(parseExpression(true));
    }
    next();
    return sealed(std::move(list));
  }

  [[gnu::noinline]] ExprPtr parseDict() {
    Nested level(*this);
    auto dict = makeExpr(Expr::Kind::Dict, cur().offset);
    next();
    while (!isOp("}")) {
      if (!dict->args.empty())
        expectOp(",");
      if (isOp("}"))
        break;
      dict->args.push_back(parseExpression(true));
      expectOp(":");
      dict->args.push_back(parseExpression(true));
    }
    next();
    return sealed(std::move(dict));
  }

  ExprPtr parsePostfix(ExprPtr node) {
    while (true) {
      if (isOp(".")) {
        size_t at = cur().offset;
        next();
        if (cur().kind == K::Int) { // `a.0` is jinja2 for a[0].
          auto e = makeExpr(Expr::Kind::Item, at);
          e->target = std::move(node);
          auto key = makeExpr(Expr::Kind::Literal, cur().offset);
          key->literal = Value(next().intValue);
          e->args.push_back(std::move(key));
          node = sealed(std::move(e));
          continue;
        }
        auto e = makeExpr(Expr::Kind::Attr, at);
        e->target = std::move(node);
        e->name = expectName();
        node = sealed(std::move(e));
      } else if (isOp("[")) {
        node = subscript(std::move(node));
      } else if (isOp("(")) {
        node = call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr subscript(ExprPtr node) {
    Nested level(*this);
    size_t at = cur().offset;
    next();
    ExprPtr parts[3];
    int colons = 0;
    while (!isOp("]")) {
      if (isOp(":")) {
        if (++colons > 2)
          unexpected("']'");
        next();
        continue;
      }
      if (parts[colons])
        unexpected("':' or ']'");
      parts[colons] = parseExpression(true);
    }
    next();
    if (colons == 0) {
      if (!parts[0])
        fail(at, "an empty subscript");
      auto e = makeExpr(Expr::Kind::Item, at);
      e->target = std::move(node);
      e->args.push_back(std::move(parts[0]));
      return sealed(std::move(e));
    }
    auto e = makeExpr(Expr::Kind::Slice, at);
    e->target = std::move(node);
    for (auto &p : parts)
      e->args.push_back(std::move(p));
    return sealed(std::move(e));
  }

  void callArgs(Expr &e) {
    Nested level(*this);
    expectOp("(");
    bool first = true;
    while (!isOp(")")) {
      if (!first)
        expectOp(",");
      first = false;
      if (isOp(")"))
        break;
      if (isOp("*") || isOp("**"))
        fail(cur().offset, "argument unpacking (* and **) is not supported");
      if (cur().kind == K::Name && peek().kind == K::Op && peek().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(key, parseExpression(true));
      } else {
        if (!e.kwargs.empty())
          fail(cur().offset, "a positional argument follows a keyword argument");
        e.args.push_back(parseExpression(true));
      }
    }
    next();
  }

  ExprPtr call(ExprPtr callee) {
    auto e = makeExpr(Expr::Kind::Call, cur().offset);
    e->target = std::move(callee);
    callArgs(*e);
    return sealed(std::move(e));
  }

  std::string dottedName() {
    std::string name = expectName();
    while (isOp(".")) {
      next();
      name += "." + expectName();
    }
    return name;
  }

  [[gnu::noinline]] ExprPtr parseFilterExpr(ExprPtr node) {
    while (true) {
      if (isOp("|")) {
        next();
        size_t at = cur().offset;
        auto e = makeExpr(Expr::Kind::Filter, at);
        e->name = dottedName();
        e->filter = findFilter(e->name);
        if (!e->filter)
          fail(at, "filter \"" + e->name + "\" is not supported");
        e->target = std::move(node);
        if (isOp("("))
          callArgs(*e);
        node = sealed(std::move(e));
      } else if (isName("is")) {
        next();
        bool negated = isName("not");
        if (negated)
          next();
        size_t at = cur().offset;
        auto e = makeExpr(Expr::Kind::Test, at);
        e->name = dottedName();
        e->test = findTest(e->name);
        if (!e->test)
          fail(at, "test \"" + e->name + "\" is not supported");
        e->target = std::move(node);
        if (isOp("(")) {
          callArgs(*e);
        } else if ((cur().kind == K::Name || cur().kind == K::String || cur().kind == K::Int ||
                    cur().kind == K::Float || isOp("[") || isOp("{")) &&
                   !isName("else") && !isName("or") && !isName("and")) {
          if (isName("is"))
            fail(cur().offset, "tests cannot be chained with \"is\"");
          e->args.push_back(parsePostfix(parsePrimary()));
        }
        e = sealed(std::move(e));
        if (negated) {
          auto n = makeExpr(Expr::Kind::Not, at);
          n->target = std::move(e);
          e = sealed(std::move(n));
        }
        node = std::move(e);
      } else if (isOp("(")) {
        node = call(std::move(node));
      } else {
        return node;
      }
    }
  }

  const std::vector<Token> &t_;
  size_t i_ = 0;
  int loops_ = 0;   ///< For bodies being parsed: break/continue are allowed inside.
  int nesting_ = 0; ///< Levels of Nested open.
};

} // namespace

Body parseTemplate(const std::vector<Token> &tokens) { return Parser(tokens).parseAll(); }

} // namespace moe::rt::chat
