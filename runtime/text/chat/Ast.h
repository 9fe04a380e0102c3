//===- Ast.h - the parsed template ------------------------------*- C++ -*-===//
//
// Expressions and statements as the parser builds them and the evaluator
// walks them. Each node keeps its source offset for error locations.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_TEXT_CHAT_AST_H
#define MOE_RUNTIME_TEXT_CHAT_AST_H

#include "Builtins.h"
#include "Value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace moe::rt::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal, Name, List, Tuple, Dict, Attr, Item, Slice, Call, Filter, Test,
    Neg, Pos, Not, Binary, Compare, And, Or, Concat, Cond
  };
  Kind kind;
  size_t offset;
  int height = 1;   ///< Levels of this tree, the node included (kMaxExpressionHeight).
  Value literal;    ///< Literal.
  std::string name; ///< Name, Attr, Filter, Test; the operator of Binary.
  ExprPtr target;   ///< Object, callee, filtered or tested value, left operand.
  /// Items (Dict: key, value, key, ...), positional arguments, Compare's
  /// right operands, Slice's start/stop/step (null when absent), Cond's
  /// condition/then/else (else null when absent).
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops; ///< Compare: "==", "in", "not in", ...
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind { Text, Print, If, For, Set, SetBlock, Macro, CallBlock, Break, Continue, Generation };
  Kind kind;
  size_t offset;
  std::string text;               ///< Text; the Set/SetBlock/Macro name.
  std::string attr;               ///< Set `ns.attr = ...`: the attribute.
  std::vector<std::string> names; ///< For/Set unpacking targets, Macro/CallBlock parameters.
  std::vector<ExprPtr> defaults;  ///< Macro/CallBlock parameter defaults (null when none).
  ExprPtr expr;                   ///< Print, Set value, For iterable, CallBlock call.
  ExprPtr cond;                   ///< For's `if` filter.
  std::vector<std::pair<ExprPtr, Body>> branches; ///< If/elif.
  Body body, elseBody;
};

struct Template {
  std::string source; ///< Normalised, for error locations.
  Body body;
};

} // namespace moe::rt::chat

#endif
