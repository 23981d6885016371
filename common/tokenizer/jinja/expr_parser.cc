#include "common/tokenizer/jinja/expr_parser.h"

#include <utility>

#include "common/util/status_macros.h"

namespace tandem::jinja {
namespace {

ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

}  // namespace

template <typename Parse>
absl::StatusOr<ExprPtr> ExprParser::Checked(Parse parse) {
  if (entered_++ > 0) {
    absl::StatusOr<ExprPtr> inner = parse();
    --entered_;
    return inner;
  }
  struct Exit {
    int* entered;
    ~Exit() { --*entered; }
  } exit{&entered_};
  if (t_.size() > kMaxTagTokens) {
    return Error(Cat("expression of more than ", kMaxTagTokens, " tokens"));
  }
  ASSIGN_OR_RETURN(ExprPtr expr, parse());
  // The depth, without recursion.
  std::vector<std::pair<const Expr*, int>> todo = {{expr.get(), 1}};
  while (!todo.empty()) {
    auto [e, depth] = todo.back();
    todo.pop_back();
    if (depth > kMaxTreeDepth) {
      return absl::InvalidArgumentError(Cat("template line ", e->line, ": expression more than ",
                                            kMaxTreeDepth, " operations deep"));
    }
    for (const ExprPtr& child : e->children)
      if (child) todo.emplace_back(child.get(), depth + 1);
  }
  return expr;
}

absl::StatusOr<ExprPtr> ExprParser::Expression(bool with_condexpr) {
  return Checked([&] { return with_condexpr ? CondExpr() : Or(); });
}

absl::StatusOr<ExprPtr> ExprParser::TupleOrExpression(bool with_condexpr) {
  return Checked([&] { return Tuple(with_condexpr); });
}

absl::Status ExprParser::TooDeep() const {
  return Error(Cat("expression nested more than ", kMaxNesting, " levels deep"));
}

absl::StatusOr<ExprPtr> ExprParser::Tuple(bool with_condexpr) {
  const int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr first, Expression(with_condexpr));
  if (!IsOp(",")) return first;
  auto tuple = MakeExpr(Expr::Kind::kTuple, line);
  tuple->children.push_back(std::move(first));
  while (SkipOp(",")) {
    if (AtEnd() || IsOp(")") || IsName("if")) break;
    ASSIGN_OR_RETURN(ExprPtr next, Expression(with_condexpr));
    tuple->children.push_back(std::move(next));
  }
  return tuple;
}

absl::StatusOr<ExprPtr> ExprParser::CondExpr() {
  NestingGuard guard(&nesting_);
  if (nesting_ > kMaxNesting) return TooDeep();
  ASSIGN_OR_RETURN(ExprPtr expr, Or());
  while (IsName("if")) {
    const int line = Cur().line;
    ++i_;
    ASSIGN_OR_RETURN(ExprPtr cond, Or());
    ExprPtr otherwise;
    if (SkipName("else")) {
      ASSIGN_OR_RETURN(otherwise, CondExpr());
    }
    auto node = MakeExpr(Expr::Kind::kCond, line);
    node->children.push_back(std::move(expr));
    node->children.push_back(std::move(cond));
    node->children.push_back(std::move(otherwise));
    expr = std::move(node);
  }
  return expr;
}

absl::StatusOr<ExprPtr> ExprParser::Or() {
  return LeftAssociative("or", Expr::Kind::kOr, &ExprParser::And);
}

absl::StatusOr<ExprPtr> ExprParser::And() {
  return LeftAssociative("and", Expr::Kind::kAnd, &ExprParser::Not);
}

absl::StatusOr<ExprPtr> ExprParser::LeftAssociative(
    std::string_view keyword, Expr::Kind kind, absl::StatusOr<ExprPtr> (ExprParser::*operand)()) {
  ASSIGN_OR_RETURN(ExprPtr left, (this->*operand)());
  while (IsName(keyword)) {
    auto node = MakeExpr(kind, Cur().line);
    ++i_;
    ASSIGN_OR_RETURN(ExprPtr right, (this->*operand)());
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> ExprParser::Not() {
  NestingGuard guard(&nesting_);
  if (nesting_ > kMaxNesting) return TooDeep();
  if (IsName("not")) {
    auto node = MakeExpr(Expr::Kind::kNot, Cur().line);
    ++i_;
    ASSIGN_OR_RETURN(ExprPtr operand, Not());
    node->children.push_back(std::move(operand));
    return node;
  }
  return Compare();
}

absl::StatusOr<ExprPtr> ExprParser::Compare() {
  const int line = Cur().line;
  ASSIGN_OR_RETURN(ExprPtr first, Math1());
  ExprPtr node;
  while (true) {
    std::string op;
    if (Cur().kind == K::kOp && (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" ||
                                 Cur().text == "<=" || Cur().text == ">" || Cur().text == ">=")) {
      op = Cur().text;
      ++i_;
    } else if (IsName("in")) {
      op = "in";
      ++i_;
    } else if (IsName("not") && Peek().kind == K::kName && Peek().text == "in") {
      op = "not in";
      i_ += 2;
    } else {
      break;
    }
    if (!node) {
      node = MakeExpr(Expr::Kind::kCompare, line);
      node->children.push_back(std::move(first));
    }
    ASSIGN_OR_RETURN(ExprPtr operand, Math1());
    node->ops.push_back(op);
    node->children.push_back(std::move(operand));
  }
  return node ? std::move(node) : std::move(first);
}

absl::StatusOr<ExprPtr> ExprParser::Binary(ExprPtr left, std::string op, ExprPtr right, int line) {
  auto node = MakeExpr(Expr::Kind::kBinary, line);
  node->name = std::move(op);
  node->children.push_back(std::move(left));
  node->children.push_back(std::move(right));
  return node;
}

absl::StatusOr<ExprPtr> ExprParser::Math1() {
  ASSIGN_OR_RETURN(ExprPtr left, Concat());
  while (IsOp("+") || IsOp("-")) {
    const std::string op = Cur().text;
    const int line = Cur().line;
    ++i_;
    ASSIGN_OR_RETURN(ExprPtr right, Concat());
    ASSIGN_OR_RETURN(left, Binary(std::move(left), op, std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExprParser::Concat() {
  ASSIGN_OR_RETURN(ExprPtr left, Math2());
  while (IsOp("~")) {
    const int line = Cur().line;
    ++i_;
    ASSIGN_OR_RETURN(ExprPtr right, Math2());
    ASSIGN_OR_RETURN(left, Binary(std::move(left), "~", std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExprParser::Math2() {
  ASSIGN_OR_RETURN(ExprPtr left, Pow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const std::string op = Cur().text;
    const int line = Cur().line;
    ++i_;
    ASSIGN_OR_RETURN(ExprPtr right, Pow());
    ASSIGN_OR_RETURN(left, Binary(std::move(left), op, std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExprParser::Pow() {
  ASSIGN_OR_RETURN(ExprPtr left, Unary(true));
  while (IsOp("**")) {
    const int line = Cur().line;
    ++i_;
    ASSIGN_OR_RETURN(ExprPtr right, Unary(true));
    ASSIGN_OR_RETURN(left, Binary(std::move(left), "**", std::move(right), line));
  }
  return left;
}

absl::StatusOr<ExprPtr> ExprParser::Unary(bool with_filter) {
  NestingGuard guard(&nesting_);
  if (nesting_ > kMaxNesting) return TooDeep();
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = MakeExpr(Expr::Kind::kUnary, Cur().line);
    node->name = Cur().text;
    ++i_;
    ASSIGN_OR_RETURN(ExprPtr operand, Unary(false));
    node->children.push_back(std::move(operand));
  } else {
    ASSIGN_OR_RETURN(node, Primary());
  }
  ASSIGN_OR_RETURN(node, Postfix(std::move(node)));
  if (with_filter) {
    ASSIGN_OR_RETURN(node, FilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> ExprParser::Primary() {
  const ExprToken& tok = Cur();
  const int line = tok.line;
  if (tok.kind == K::kName) {
    ++i_;
    auto lit = MakeExpr(Expr::Kind::kLiteral, line);
    if (tok.text == "true" || tok.text == "True") {
      lit->literal = Value(true);
    } else if (tok.text == "false" || tok.text == "False") {
      lit->literal = Value(false);
    } else if (tok.text == "none" || tok.text == "None") {
      lit->literal = Value::MakeNone();
    } else {
      lit->kind = Expr::Kind::kName;
      lit->name = tok.text;
    }
    return lit;
  }
  if (tok.kind == K::kString) {
    std::string s;
    while (Cur().kind == K::kString) s += t_[i_++].text;  // adjacent literals concatenate
    auto lit = MakeExpr(Expr::Kind::kLiteral, line);
    lit->literal = Value(std::move(s));
    return lit;
  }
  if (tok.kind == K::kInt || tok.kind == K::kFloat) {
    ++i_;
    auto lit = MakeExpr(Expr::Kind::kLiteral, line);
    lit->literal = tok.kind == K::kInt ? Value(tok.int_value) : Value(tok.float_value);
    return lit;
  }
  if (SkipOp("(")) {
    if (SkipOp(")")) return MakeExpr(Expr::Kind::kTuple, line);
    ASSIGN_OR_RETURN(ExprPtr inner, TupleOrExpression());
    RETURN_IF_ERROR(ExpectOp(")"));
    return inner;
  }
  if (SkipOp("[")) {
    auto list = MakeExpr(Expr::Kind::kList, line);
    while (!IsOp("]")) {
      ASSIGN_OR_RETURN(ExprPtr item, Expression());
      list->children.push_back(std::move(item));
      if (!SkipOp(",")) break;
    }
    RETURN_IF_ERROR(ExpectOp("]"));
    return list;
  }
  if (SkipOp("{")) {
    auto dict = MakeExpr(Expr::Kind::kDict, line);
    while (!IsOp("}")) {
      ASSIGN_OR_RETURN(ExprPtr key, Expression());
      RETURN_IF_ERROR(ExpectOp(":"));
      ASSIGN_OR_RETURN(ExprPtr value, Expression());
      dict->children.push_back(std::move(key));
      dict->children.push_back(std::move(value));
      if (!SkipOp(",")) break;
    }
    RETURN_IF_ERROR(ExpectOp("}"));
    return dict;
  }
  return Error("expected an expression");
}

absl::StatusOr<ExprPtr> ExprParser::Postfix(ExprPtr node) {
  while (true) {
    const int line = Cur().line;
    if (SkipOp(".")) {
      if (Cur().kind == K::kInt) {
        auto item = MakeExpr(Expr::Kind::kItem, line);
        auto index = MakeExpr(Expr::Kind::kLiteral, line);
        index->literal = Value(t_[i_++].int_value);
        item->children.push_back(std::move(node));
        item->children.push_back(std::move(index));
        node = std::move(item);
        continue;
      }
      auto attr = MakeExpr(Expr::Kind::kAttr, line);
      ASSIGN_OR_RETURN(attr->name, ExpectName());
      attr->children.push_back(std::move(node));
      node = std::move(attr);
    } else if (SkipOp("[")) {
      ASSIGN_OR_RETURN(node, Subscript(std::move(node), line));
    } else if (IsOp("(")) {
      auto call = MakeExpr(Expr::Kind::kCall, line);
      call->children.push_back(std::move(node));
      RETURN_IF_ERROR(CallArgs(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> ExprParser::Subscript(ExprPtr object, int line) {
  ExprPtr parts[3];
  bool is_slice = false;
  for (int k = 0; k < 3; ++k) {
    if (!IsOp(":") && !IsOp("]")) {
      ASSIGN_OR_RETURN(parts[k], Expression());
    }
    if (k < 2 && SkipOp(":")) {
      is_slice = true;
      continue;
    }
    break;
  }
  RETURN_IF_ERROR(ExpectOp("]"));
  auto node = MakeExpr(is_slice ? Expr::Kind::kSlice : Expr::Kind::kItem, line);
  node->children.push_back(std::move(object));
  if (!is_slice) {
    if (!parts[0]) return Error("empty subscript");
    node->children.push_back(std::move(parts[0]));
    return node;
  }
  for (auto& p : parts) node->children.push_back(std::move(p));
  return node;
}

absl::Status ExprParser::CallArgs(Expr* node) {
  RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (Cur().kind == K::kName && Peek().kind == K::kOp && Peek().text == "=") {
      node->kwarg_names.push_back(Cur().text);
      i_ += 2;
    } else if (!node->kwarg_names.empty()) {
      return Error("positional argument after keyword argument");
    }
    ASSIGN_OR_RETURN(ExprPtr arg, Expression());
    node->children.push_back(std::move(arg));
    if (!SkipOp(",")) break;
  }
  return ExpectOp(")");
}

absl::StatusOr<ExprPtr> ExprParser::FilterExpr(ExprPtr node) {
  while (true) {
    const int line = Cur().line;
    if (SkipOp("|")) {
      auto filter = MakeExpr(Expr::Kind::kFilter, line);
      ASSIGN_OR_RETURN(filter->name, ExpectName());
      filter->children.push_back(std::move(node));
      if (IsOp("(")) RETURN_IF_ERROR(CallArgs(filter.get()));
      node = std::move(filter);
    } else if (SkipName("is")) {
      auto test = MakeExpr(Expr::Kind::kTest, line);
      test->negated = SkipName("not");
      ASSIGN_OR_RETURN(test->name, ExpectName());
      test->children.push_back(std::move(node));
      if (IsOp("(")) {
        RETURN_IF_ERROR(CallArgs(test.get()));
      } else if ((Cur().kind == K::kName && !IsName("else") && !IsName("or") && !IsName("and") &&
                  !IsName("if") && !IsName("is")) ||
                 Cur().kind == K::kString || Cur().kind == K::kInt || Cur().kind == K::kFloat ||
                 IsOp("[") || IsOp("{")) {
        ASSIGN_OR_RETURN(ExprPtr arg, Primary());
        ASSIGN_OR_RETURN(arg, Postfix(std::move(arg)));
        test->children.push_back(std::move(arg));
      }
      node = std::move(test);
    } else if (IsOp("(")) {
      auto call = MakeExpr(Expr::Kind::kCall, line);
      call->children.push_back(std::move(node));
      RETURN_IF_ERROR(CallArgs(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

}  // namespace tandem::jinja
