#include "common/tokenizer/jinja/parser.h"

#include <initializer_list>
#include <string_view>

#include "common/tokenizer/jinja/expr_parser.h"
#include "common/tokenizer/unicode/str_util.h"
#include "common/util/status_macros.h"

namespace tandem::jinja {
namespace {

using K = ExprToken::Kind;

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
    // Blocks inside blocks recurse here and in the interpreter: bounded like expressions.
    if (++body_depth_ > kMaxBlockNesting) {
      return Error(i_ < t_.size() ? t_[i_].line : 0,
                   Cat("blocks nested more than ", kMaxBlockNesting, " levels deep"));
    }
    struct Exit {
      int* depth;
      ~Exit() { --*depth; }
    } exit{&body_depth_};
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

  static constexpr int kMaxBlockNesting = 64;
  const std::vector<TemplateToken>& t_;
  size_t i_ = 0;
  int body_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<TemplateToken>& tokens) {
  return TemplateParser(tokens).Run();
}

}  // namespace tandem::jinja
