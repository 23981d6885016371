#include "common/tokenizer/jinja/parser.h"

#include <initializer_list>
#include <string_view>

#include "common/tokenizer/unicode/str_util.h"
#include "common/util/status_macros.h"

namespace tandem::jinja {
namespace {

using K = ExprToken::Kind;

ExprPtr MakeExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Parses the expression tokens of one tag.
class ExprParser {
 public:
  explicit ExprParser(const std::vector<ExprToken>& tokens) : t_(tokens) {}

  const ExprToken& Cur() const { return t_[i_]; }
  const ExprToken& Peek(size_t ahead = 1) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  bool AtEnd() const { return Cur().kind == K::kEnd; }
  bool IsOp(std::string_view op) const { return Cur().kind == K::kOp && Cur().text == op; }
  bool IsName(std::string_view name) const { return Cur().kind == K::kName && Cur().text == name; }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    ++i_;
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    ++i_;
    return true;
  }

  absl::Status Error(std::string_view what) const {
    const std::string near = AtEnd() ? "end of tag" : Cat("'", Cur().text, "'");
    return absl::InvalidArgumentError(
        Cat("template line ", Cur().line, ": ", what, " near ", near));
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!SkipOp(op)) return Error(Cat("expected '", op, "'"));
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Cur().kind != K::kName) return Error("expected a name");
    return t_[i_++].text;
  }
  absl::Status ExpectEnd() {
    if (!AtEnd()) return Error("unexpected token");
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> Expression(bool with_condexpr = true) {
    return with_condexpr ? CondExpr() : Or();
  }

  // A comma-separated sequence; more than one element (or a trailing comma) makes a tuple.
  absl::StatusOr<ExprPtr> TupleOrExpression(bool with_condexpr = true) {
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

 private:
  absl::StatusOr<ExprPtr> CondExpr() {
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

  absl::StatusOr<ExprPtr> Or() {
    ASSIGN_OR_RETURN(ExprPtr left, And());
    while (IsName("or")) {
      auto node = MakeExpr(Expr::Kind::kOr, Cur().line);
      ++i_;
      ASSIGN_OR_RETURN(ExprPtr right, And());
      node->children.push_back(std::move(left));
      node->children.push_back(std::move(right));
      left = std::move(node);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> And() {
    ASSIGN_OR_RETURN(ExprPtr left, Not());
    while (IsName("and")) {
      auto node = MakeExpr(Expr::Kind::kAnd, Cur().line);
      ++i_;
      ASSIGN_OR_RETURN(ExprPtr right, Not());
      node->children.push_back(std::move(left));
      node->children.push_back(std::move(right));
      left = std::move(node);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> Not() {
    if (IsName("not")) {
      auto node = MakeExpr(Expr::Kind::kNot, Cur().line);
      ++i_;
      ASSIGN_OR_RETURN(ExprPtr operand, Not());
      node->children.push_back(std::move(operand));
      return node;
    }
    return Compare();
  }

  absl::StatusOr<ExprPtr> Compare() {
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

  absl::StatusOr<ExprPtr> Binary(ExprPtr left, std::string op, ExprPtr right, int line) {
    auto node = MakeExpr(Expr::Kind::kBinary, line);
    node->name = std::move(op);
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    return node;
  }

  absl::StatusOr<ExprPtr> Math1() {
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

  absl::StatusOr<ExprPtr> Concat() {
    ASSIGN_OR_RETURN(ExprPtr left, Math2());
    while (IsOp("~")) {
      const int line = Cur().line;
      ++i_;
      ASSIGN_OR_RETURN(ExprPtr right, Math2());
      ASSIGN_OR_RETURN(left, Binary(std::move(left), "~", std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> Math2() {
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

  absl::StatusOr<ExprPtr> Pow() {
    ASSIGN_OR_RETURN(ExprPtr left, Unary(true));
    while (IsOp("**")) {
      const int line = Cur().line;
      ++i_;
      ASSIGN_OR_RETURN(ExprPtr right, Unary(true));
      ASSIGN_OR_RETURN(left, Binary(std::move(left), "**", std::move(right), line));
    }
    return left;
  }

  absl::StatusOr<ExprPtr> Unary(bool with_filter) {
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

  absl::StatusOr<ExprPtr> Primary() {
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

  absl::StatusOr<ExprPtr> Postfix(ExprPtr node) {
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

  absl::StatusOr<ExprPtr> Subscript(ExprPtr object, int line) {
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

  // Parses "(a, b, key=c)" into node->children (after those already there) and kwarg_names.
  absl::Status CallArgs(Expr* node) {
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

  absl::StatusOr<ExprPtr> FilterExpr(ExprPtr node) {
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

  const std::vector<ExprToken>& t_;
  size_t i_ = 0;
};

// Parses the statement structure of the whole template.
class TemplateParser {
 public:
  explicit TemplateParser(const std::vector<TemplateToken>& tokens) : t_(tokens) {}

  absl::StatusOr<Body> Run() {
    std::string end;
    ASSIGN_OR_RETURN(Body body, ParseBody({}, &end));
    return body;
  }

 private:
  static absl::Status Error(int line, std::string_view what) {
    return absl::InvalidArgumentError(Cat("template line ", line, ": ", what));
  }

  // Parses statements until a {% keyword %} in `ends` (consumed; its name is stored in *end and
  // its expression parser left in end_parser_ for the caller).
  absl::StatusOr<Body> ParseBody(std::initializer_list<std::string_view> ends, std::string* end) {
    Body body;
    while (i_ < t_.size()) {
      const TemplateToken& tok = t_[i_];
      if (tok.kind == TemplateToken::Kind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->text = tok.text;
        s->line = tok.line;
        body.push_back(std::move(s));
        ++i_;
        continue;
      }
      if (tok.kind == TemplateToken::Kind::kOutput) {
        ExprParser p(tok.tokens);
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = tok.line;
        ASSIGN_OR_RETURN(s->expr, p.TupleOrExpression());
        RETURN_IF_ERROR(p.ExpectEnd());
        body.push_back(std::move(s));
        ++i_;
        continue;
      }
      if (tok.tokens.empty() || tok.tokens[0].kind != K::kName) {
        return Error(tok.line, "expected a statement name after '{%'");
      }
      const std::string& keyword = tok.tokens[0].text;
      for (std::string_view e : ends) {
        if (keyword == e) {
          *end = keyword;
          return body;
        }
      }
      ASSIGN_OR_RETURN(StmtPtr stmt, ParseStatement(keyword));
      body.push_back(std::move(stmt));
    }
    if (ends.size() != 0) {
      return Error(t_.empty() ? 0 : t_.back().line, Cat("missing {% ", *ends.begin(), " %}"));
    }
    return body;
  }

  // The statement at i_ (whose first token is `keyword`).
  absl::StatusOr<StmtPtr> ParseStatement(const std::string& keyword) {
    const TemplateToken& tok = t_[i_];
    ExprParser p(tok.tokens);
    p.SkipName(keyword);
    auto s = std::make_unique<Stmt>();
    s->line = tok.line;
    ++i_;
    std::string end;
    if (keyword == "if") {
      s->kind = Stmt::Kind::kIf;
      ASSIGN_OR_RETURN(ExprPtr cond, p.Expression());
      RETURN_IF_ERROR(p.ExpectEnd());
      while (true) {
        ASSIGN_OR_RETURN(Body branch, ParseBody({"elif", "else", "endif"}, &end));
        s->branches.emplace_back(std::move(cond), std::move(branch));
        ExprParser q(t_[i_].tokens);
        q.SkipName(end);
        ++i_;
        if (end == "elif") {
          ASSIGN_OR_RETURN(cond, q.Expression());
          RETURN_IF_ERROR(q.ExpectEnd());
          continue;
        }
        RETURN_IF_ERROR(q.ExpectEnd());
        if (end == "else") {
          ASSIGN_OR_RETURN(s->else_body, ParseBody({"endif"}, &end));
          ++i_;
        }
        break;
      }
    } else if (keyword == "for") {
      s->kind = Stmt::Kind::kFor;
      do {
        ASSIGN_OR_RETURN(std::string target, p.ExpectName());
        s->targets.push_back(std::move(target));
      } while (p.SkipOp(","));
      if (!p.SkipName("in")) return p.Error("expected 'in'");
      ASSIGN_OR_RETURN(s->expr, p.TupleOrExpression(/*with_condexpr=*/false));
      if (p.SkipName("if")) {
        ASSIGN_OR_RETURN(s->filter, p.Expression());
      }
      if (p.IsName("recursive")) return p.Error("recursive loops are not supported");
      RETURN_IF_ERROR(p.ExpectEnd());
      ASSIGN_OR_RETURN(s->body, ParseBody({"else", "endfor"}, &end));
      ++i_;
      if (end == "else") {
        ASSIGN_OR_RETURN(s->else_body, ParseBody({"endfor"}, &end));
        ++i_;
      }
    } else if (keyword == "set") {
      ASSIGN_OR_RETURN(std::string first, p.ExpectName());
      if (p.SkipOp(".")) {
        s->kind = Stmt::Kind::kSet;
        s->attr_object = first;
        ASSIGN_OR_RETURN(s->attr_name, p.ExpectName());
      } else {
        s->targets.push_back(first);
        while (p.SkipOp(",")) {
          ASSIGN_OR_RETURN(std::string more, p.ExpectName());
          s->targets.push_back(std::move(more));
        }
      }
      if (p.SkipOp("=")) {
        s->kind = Stmt::Kind::kSet;
        ASSIGN_OR_RETURN(s->expr, p.TupleOrExpression());
        RETURN_IF_ERROR(p.ExpectEnd());
      } else {
        if (!s->attr_object.empty() || s->targets.size() != 1) return p.Error("expected '='");
        RETURN_IF_ERROR(p.ExpectEnd());
        s->kind = Stmt::Kind::kSetBlock;
        ASSIGN_OR_RETURN(s->body, ParseBody({"endset"}, &end));
        ++i_;
      }
    } else if (keyword == "macro") {
      s->kind = Stmt::Kind::kMacro;
      ASSIGN_OR_RETURN(s->name, p.ExpectName());
      RETURN_IF_ERROR(p.ExpectOp("("));
      while (!p.IsOp(")")) {
        ASSIGN_OR_RETURN(std::string param, p.ExpectName());
        ExprPtr dflt;
        if (p.SkipOp("=")) {
          ASSIGN_OR_RETURN(dflt, p.Expression());
        }
        s->params.emplace_back(std::move(param), std::move(dflt));
        if (!p.SkipOp(",")) break;
      }
      RETURN_IF_ERROR(p.ExpectOp(")"));
      RETURN_IF_ERROR(p.ExpectEnd());
      ASSIGN_OR_RETURN(s->body, ParseBody({"endmacro"}, &end));
      ++i_;
    } else if (keyword == "break" || keyword == "continue") {
      s->kind = keyword == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      RETURN_IF_ERROR(p.ExpectEnd());
    } else if (keyword == "generation") {
      s->kind = Stmt::Kind::kBlock;
      RETURN_IF_ERROR(p.ExpectEnd());
      ASSIGN_OR_RETURN(s->body, ParseBody({"endgeneration"}, &end));
      ++i_;
    } else {
      return Error(s->line, Cat("unsupported or unexpected statement '", keyword, "'"));
    }
    return s;
  }

  const std::vector<TemplateToken>& t_;
  size_t i_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<TemplateToken>& tokens) {
  return TemplateParser(tokens).Run();
}

}  // namespace tandem::jinja
