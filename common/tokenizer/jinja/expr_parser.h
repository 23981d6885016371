// Parses the expression tokens of one Jinja tag into a syntax tree (the template parser,
// parser.cc, calls it for each {{ }} and {% %}), following Jinja2's operator precedence. Bounds
// the expression's length, nesting and depth so that no template can exhaust the stack.
#ifndef TANDEM_COMMON_TOKENIZER_JINJA_EXPR_PARSER_H_
#define TANDEM_COMMON_TOKENIZER_JINJA_EXPR_PARSER_H_

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/jinja/ast.h"
#include "common/tokenizer/jinja/lexer.h"
#include "common/tokenizer/unicode/str_util.h"

namespace tandem::jinja {

// One tag's expression tokens (ending in a kEnd token).
class ExprParser {
 public:
  using K = ExprToken::Kind;

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

  absl::StatusOr<ExprPtr> Expression(bool with_condexpr = true);

  // A comma-separated sequence; more than one element (or a trailing comma) makes a tuple.
  absl::StatusOr<ExprPtr> TupleOrExpression(bool with_condexpr = true);

 private:
  // Bounds on one tag's expression, so that no template, however written, can exhaust the stack:
  // while it is parsed (nested parentheses, `not not ...`, `- - ...`), while it is evaluated and
  // while its tree is freed (left-deep chains like `1 + 1 + ...` recurse there too). Real chat
  // templates stay far below them.
  static constexpr size_t kMaxTagTokens = 8192;
  // Parser recursion: each ( [ { counts 3 (CondExpr, Not, Unary: 64 brackets deep), each
  // `not`, `-` or `+` in a row 1.
  static constexpr int kMaxNesting = 192;
  static constexpr int kMaxTreeDepth = 256;

  // Counts one level of parser recursion for the life of the object.
  class NestingGuard {
   public:
    explicit NestingGuard(int* depth) : depth_(depth) { ++*depth_; }
    ~NestingGuard() { --*depth_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    int* depth_;
  };
  absl::Status TooDeep() const;

  // Runs `parse` as a top-level expression (checking the tag's length first and the tree's depth
  // after) or as a nested one.
  template <typename Parse>
  absl::StatusOr<ExprPtr> Checked(Parse parse);

  // The grammar, loosest binding first: tuple, `x if c else y`, or, and, not, comparisons,
  // + -, ~, * / // %, **, unary - +, then primaries with their postfixes (.a [i] (args)) and
  // filters / tests.
  absl::StatusOr<ExprPtr> Tuple(bool with_condexpr);
  absl::StatusOr<ExprPtr> CondExpr();
  absl::StatusOr<ExprPtr> Or();
  absl::StatusOr<ExprPtr> And();
  // operand (keyword operand)*, as a left-deep tree of `kind` nodes.
  absl::StatusOr<ExprPtr> LeftAssociative(std::string_view keyword, Expr::Kind kind,
                                          absl::StatusOr<ExprPtr> (ExprParser::*operand)());
  absl::StatusOr<ExprPtr> Not();
  absl::StatusOr<ExprPtr> Compare();
  absl::StatusOr<ExprPtr> Binary(ExprPtr left, std::string op, ExprPtr right, int line);
  absl::StatusOr<ExprPtr> Math1();
  absl::StatusOr<ExprPtr> Concat();
  absl::StatusOr<ExprPtr> Math2();
  absl::StatusOr<ExprPtr> Pow();
  absl::StatusOr<ExprPtr> Unary(bool with_filter);
  absl::StatusOr<ExprPtr> Primary();
  absl::StatusOr<ExprPtr> Postfix(ExprPtr node);
  absl::StatusOr<ExprPtr> Subscript(ExprPtr object, int line);
  // Parses "(a, b, key=c)" into node->children (after those already there) and kwarg_names.
  absl::Status CallArgs(Expr* node);
  absl::StatusOr<ExprPtr> FilterExpr(ExprPtr node);

  const std::vector<ExprToken>& t_;
  size_t i_ = 0;
  int entered_ = 0;  // Expression / TupleOrExpression calls in progress
  int nesting_ = 0;  // NestingGuards alive
};

}  // namespace tandem::jinja

#endif  // TANDEM_COMMON_TOKENIZER_JINJA_EXPR_PARSER_H_
