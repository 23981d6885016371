// Syntax tree of a parsed Jinja template.
#ifndef TANDEM_COMMON_TOKENIZER_JINJA_AST_H_
#define TANDEM_COMMON_TOKENIZER_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/tokenizer/jinja/value.h"

namespace tandem::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children: items
    kTuple,    // children: items
    kDict,     // children: key, value, key, value, ...
    kAttr,     // children[0].name
    kItem,     // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]] (null = omitted)
    kCall,     // children[0](args...)
    kFilter,   // children[0] | name(args...)
    kTest,     // children[0] is [not] name(args...)
    kUnary,    // name ("-", "+") children[0]
    kBinary,   // children[0] name children[1]; name in + - * / // % ** ~
    kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ...
    kAnd,
    kOr,
    kNot,
    kCond,  // children[0] if children[1] else children[2] (null: undefined)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  // kCall / kFilter / kTest: the arguments are children[1..]; the last kwarg_names.size() of
  // them are keyword arguments with these names.
  std::vector<std::string> kwarg_names;
  std::vector<std::string> ops;  // kCompare: "==", "!=", "<", "<=", ">", ">=", "in", "not in"
  bool negated = false;          // kTest
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches, else_body
    kFor,       // targets in expr [if filter]: body [else else_body]
    kSet,       // targets = expr, or attr_object.attr_name = expr
    kSetBlock,  // {% set targets[0] %}body{% endset %}
    kMacro,     // name(params): body
    kBreak,
    kContinue,
    kBlock,  // a body rendered in place ({% generation %})
  };
  Kind kind = Kind::kText;
  int line = 0;
  std::string text;
  ExprPtr expr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  ExprPtr filter;
  std::string attr_object, attr_name;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro: name, default (may be null)
};

}  // namespace tandem::jinja

#endif  // TANDEM_COMMON_TOKENIZER_JINJA_AST_H_
