#include "common/tokenizer/jinja/template.h"

#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/tokenizer/jinja/builtins.h"
#include "common/tokenizer/jinja/int_math.h"
#include "common/tokenizer/jinja/lexer.h"
#include "common/tokenizer/jinja/parser.h"
#include "common/tokenizer/unicode/str_util.h"
#include "common/util/status_macros.h"

namespace tandem::jinja {
namespace {

using Scope = absl::flat_hash_map<std::string, Value, StringViewHash, StringViewEq>;

absl::Status LineError(int line, std::string_view what) {
  return absl::InvalidArgumentError(Cat("template line ", line, ": ", what));
}

// Adds the line to an error that does not name one yet.
absl::Status WithLine(const absl::Status& s, int line) {
  if (s.ok() || ToStd(s.message()).rfind("template line", 0) == 0) return s;
  return absl::Status(s.code(), Cat("template line ", line, ": ", ToStd(s.message())));
}

absl::Status UndefinedError(const Value& v, int line) {
  return LineError(line, Cat("'", v.undefined_name(), "' is undefined"));
}

class Interpreter {
 public:
  explicit Interpreter(const ValueDict& globals) {
    Scope root;
    for (const auto& [k, v] : globals.items()) root[k] = v;
    scopes_.push_back(std::move(root));
    scopes_.emplace_back();  // the template's own top-level scope
  }

  // Namespaces are the only objects a template can change after making them, so every reference
  // cycle runs through one (a bound method like `d.get` can close one that Reaches cannot see).
  // Emptying each namespace that was assigned to frees them all when the render ends.
  ~Interpreter() {
    for (Value& ns : assigned_namespaces_) ns.mutable_dict().Clear();
  }
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  absl::Status Exec(const Body& body, std::string* out) {
    for (const StmtPtr& stmt : body) {
      if (auto s = ExecOne(*stmt, out); !s.ok()) return WithLine(s, stmt->line);
      if (flow_ != Flow::kNormal) return absl::OkStatus();
    }
    return absl::OkStatus();
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Value Lookup(std::string_view name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value::MakeUndefined(std::string(name));
  }

  absl::Status Assign(const std::vector<std::string>& targets, const Value& value, int line) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = value;
      return absl::OkStatus();
    }
    if (!value.is_list() || value.as_list().size() != targets.size()) {
      return LineError(line,
                       Cat("cannot unpack ", value.TypeName(), " into ", targets.size(), " names"));
    }
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = value.as_list()[i];
    return absl::OkStatus();
  }

  // Every recursion of the interpreter passes through ExecOne or Eval: the parser bounds a
  // template's nesting, this bounds what macros calling macros add to it (Python's recursion
  // limit, for Jinja2).
  static constexpr int kMaxDepth = 1000;
  struct DepthGuard {
    explicit DepthGuard(int* depth) : depth(depth) { ++*depth; }
    ~DepthGuard() { --*depth; }
    int* depth;
  };
  absl::Status TooDeep(int line) const {
    return LineError(line, Cat("recursion deeper than ", kMaxDepth,
                               " levels (a macro calling "
                               "itself?)"));
  }

  absl::Status ExecOne(const Stmt& s, std::string* out) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxDepth) return TooDeep(s.line);
    return ExecStmt(s, out);
  }

  absl::Status ExecStmt(const Stmt& s, std::string* out) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        out->append(s.text);
        return absl::OkStatus();
      case Stmt::Kind::kOutput: {
        ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        out->append(v.Str());
        return absl::OkStatus();
      }
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          ASSIGN_OR_RETURN(Value c, Eval(*cond));
          if (c.Truthy()) return Exec(body, out);
        }
        return Exec(s.else_body, out);
      case Stmt::Kind::kFor:
        return ExecFor(s, out);
      case Stmt::Kind::kSet: {
        ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        if (s.attr_object.empty()) return Assign(s.targets, v, s.line);
        Value ns = Lookup(s.attr_object);
        if (!ns.is_dict() || !ns.as_dict().is_namespace) {
          return LineError(
              s.line, Cat("cannot assign attribute on non-namespace object '", s.attr_object, "'"));
        }
        if (Reaches(v, ns.as_dict())) {
          return LineError(s.line, Cat("cannot store namespace '", s.attr_object,
                                       "' inside itself (attribute '", s.attr_name, "')"));
        }
        ns.mutable_dict().Set(s.attr_name, std::move(v));
        assigned_namespaces_.push_back(ns);
        return absl::OkStatus();
      }
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        RETURN_IF_ERROR(Exec(s.body, &captured));
        scopes_.back()[s.targets[0]] = Value(std::move(captured));
        return absl::OkStatus();
      }
      case Stmt::Kind::kMacro:
        scopes_.back()[s.name] = MakeMacro(s);
        return absl::OkStatus();
      case Stmt::Kind::kBreak:
        flow_ = Flow::kBreak;
        return absl::OkStatus();
      case Stmt::Kind::kContinue:
        flow_ = Flow::kContinue;
        return absl::OkStatus();
      case Stmt::Kind::kBlock:
        return Exec(s.body, out);
    }
    return absl::OkStatus();
  }

  absl::Status ExecFor(const Stmt& s, std::string* out) {
    ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
    if (iterable.is_none()) return LineError(s.line, "'NoneType' object is not iterable");
    ASSIGN_OR_RETURN(ValueList all, Iterate(iterable));
    scopes_.emplace_back();
    ValueList items;
    if (s.filter) {
      for (const Value& item : all) {
        RETURN_IF_ERROR(Assign(s.targets, item, s.line));
        ASSIGN_OR_RETURN(Value keep, Eval(*s.filter));
        if (keep.Truthy()) items.push_back(item);
      }
    } else {
      items = std::move(all);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      RETURN_IF_ERROR(Assign(s.targets, items[i], s.line));
      ValueDict loop;
      loop.Set("index", Value(i + 1));
      loop.Set("index0", Value(i));
      loop.Set("revindex", Value(n - i));
      loop.Set("revindex0", Value(n - i - 1));
      loop.Set("first", Value(i == 0));
      loop.Set("last", Value(i == n - 1));
      loop.Set("length", Value(n));
      loop.Set("depth", Value(1));
      loop.Set("depth0", Value(0));
      loop.Set("previtem", i > 0 ? items[i - 1] : Value::MakeUndefined("previtem"));
      loop.Set("nextitem", i + 1 < n ? items[i + 1] : Value::MakeUndefined("nextitem"));
      loop.Set("cycle", Value(Function([i](const CallArgs& args) -> absl::StatusOr<Value> {
                 if (args.positional.empty())
                   return absl::InvalidArgumentError("cycle() needs arguments");
                 return args.positional[static_cast<size_t>(i) % args.positional.size()];
               })));
      scopes_.back()["loop"] = Value(std::move(loop));
      RETURN_IF_ERROR(Exec(s.body, out));
      if (flow_ == Flow::kBreak) {
        flow_ = Flow::kNormal;
        break;
      }
      flow_ = Flow::kNormal;
    }
    scopes_.pop_back();
    if (n == 0) return Exec(s.else_body, out);
    return absl::OkStatus();
  }

  Value MakeMacro(const Stmt& s) {
    const Stmt* macro = &s;
    return Value(Function([this, macro](const CallArgs& args) -> absl::StatusOr<Value> {
      // A macro sees the globals and the template's top-level names, plus its parameters.
      std::vector<Scope> saved = std::move(scopes_);
      scopes_ = {saved[0], saved[1], Scope()};
      const Flow saved_flow = flow_;
      flow_ = Flow::kNormal;
      absl::Status status;
      for (size_t i = 0; i < macro->params.size() && status.ok(); ++i) {
        const auto& [name, dflt] = macro->params[i];
        const Value* given = args.Get(i, name);
        if (given != nullptr) {
          scopes_.back()[name] = *given;
        } else if (dflt) {
          auto v = Eval(*dflt);
          if (v.ok()) {
            scopes_.back()[name] = *v;
          } else {
            status = v.status();
          }
        } else {
          scopes_.back()[name] = Value::MakeUndefined(name);
        }
      }
      std::string out;
      if (status.ok()) status = Exec(macro->body, &out);
      scopes_ = std::move(saved);
      flow_ = saved_flow;
      if (!status.ok()) return status;
      return Value(std::move(out));
    }));
  }

  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first) {
    CallArgs args;
    const size_t n_kw = e.kwarg_names.size();
    const size_t n_pos = e.children.size() - first - n_kw;
    for (size_t i = first; i < e.children.size(); ++i) {
      ASSIGN_OR_RETURN(Value v, Eval(*e.children[i]));
      if (i - first < n_pos) {
        args.positional.push_back(std::move(v));
      } else {
        args.keyword.emplace_back(e.kwarg_names[i - first - n_pos], std::move(v));
      }
    }
    return args;
  }

  absl::StatusOr<Value> GetAttr(const Value& obj, const std::string& name, int line) {
    if (obj.is_undefined()) return UndefinedError(obj, line);
    if (obj.is_dict()) {
      if (const Value* v = obj.as_dict().Find(name)) return *v;
    }
    if (auto m = GetMethod(obj, name)) return *m;
    return Value::MakeUndefined(name);
  }

  absl::StatusOr<Value> GetItem(const Value& obj, const Value& key, int line) {
    if (obj.is_undefined()) return UndefinedError(obj, line);
    if (key.is_int() && (obj.is_list() || obj.is_string())) {
      int64_t i = key.as_int();
      if (obj.is_list()) {
        const int64_t n = static_cast<int64_t>(obj.as_list().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::MakeUndefined(Cat("[", key.as_int(), "]"));
        return obj.as_list()[static_cast<size_t>(i)];
      }
      ASSIGN_OR_RETURN(
          Value ch, SliceValue(obj, i, i == -1 ? std::nullopt : std::optional<int64_t>(i + 1), 1));
      if (ch.as_string().empty()) return Value::MakeUndefined(Cat("[", key.as_int(), "]"));
      return ch;
    }
    if (key.is_string()) return GetAttr(obj, key.as_string(), line);
    return Value::MakeUndefined(key.Str());
  }

  // Integers and booleans (0/1, as in Python).
  static int64_t IntOf(const Value& v) { return v.is_int() ? v.as_int() : (v.as_bool() ? 1 : 0); }

  static absl::StatusOr<Value> IntArithmetic(std::string_view op, const Value& a, const Value& b,
                                             int line) {
    std::optional<int64_t> r = CheckedIntOp(op, IntOf(a), IntOf(b));
    if (!r) return LineError(line, Cat("integer overflow in ", op, " (beyond 64 bits)"));
    return Value(*r);
  }

  absl::StatusOr<Value> Arithmetic(const std::string& op, const Value& a, const Value& b,
                                   int line) {
    if (op == "~") return Value(a.Str() + b.Str());
    if (a.is_undefined()) return UndefinedError(a, line);
    if (b.is_undefined()) return UndefinedError(b, line);
    const bool nums = (a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool());
    const bool ints = nums && !a.is_float() && !b.is_float();
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
      if (a.is_list() && b.is_list()) {
        ValueList l = a.as_list();
        l.insert(l.end(), b.as_list().begin(), b.as_list().end());
        return Value(std::move(l));
      }
      if (ints) return IntArithmetic(op, a, b, line);
      if (nums) return Value(a.as_double() + b.as_double());
    } else if (op == "-") {
      if (ints) return IntArithmetic(op, a, b, line);
      if (nums) return Value(a.as_double() - b.as_double());
    } else if (op == "*") {
      if (ints) return IntArithmetic(op, a, b, line);
      if (nums) return Value(a.as_double() * b.as_double());
      const Value* seq = a.is_int() ? &b : &a;
      const Value* count = a.is_int() ? &a : &b;
      if (count->is_int() && (seq->is_string() || seq->is_list())) {
        const int64_t k = std::max<int64_t>(0, count->as_int());
        if (k > 100000) return LineError(line, "repetition count too large");
        if (seq->is_string()) {
          std::string s;
          for (int64_t i = 0; i < k; ++i) s += seq->as_string();
          return Value(std::move(s));
        }
        ValueList l;
        for (int64_t i = 0; i < k; ++i)
          l.insert(l.end(), seq->as_list().begin(), seq->as_list().end());
        return Value(std::move(l));
      }
    } else if (op == "/" || op == "//" || op == "%") {
      if (nums) {
        if (b.as_double() == 0) return LineError(line, "division by zero");
        if (op == "/") return Value(a.as_double() / b.as_double());
        if (ints) return IntArithmetic(op, a, b, line);
        const double q = std::floor(a.as_double() / b.as_double());
        return Value(op == "//" ? q : a.as_double() - q * b.as_double());
      }
    } else if (op == "**") {
      if (ints && IntOf(b) >= 0) return IntArithmetic(op, a, b, line);
      if (nums) return Value(std::pow(a.as_double(), b.as_double()));
    }
    return LineError(line, Cat("unsupported operand type(s) for ", op, ": '", a.TypeName(),
                               "' and '", b.TypeName(), "'"));
  }

  absl::StatusOr<bool> CompareOp(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "==") return a.Equals(b);
    if (op == "!=") return !a.Equals(b);
    if (op == "in" || op == "not in") {
      CallArgs args;
      args.positional.push_back(b);
      if (b.is_string() && !a.is_string()) {
        return LineError(line,
                         Cat("'in <string>' requires string as left operand, not ", a.TypeName()));
      }
      ASSIGN_OR_RETURN(bool in, ApplyTest("in", a, args));
      return op == "in" ? in : !in;
    }
    if (a.is_undefined()) return UndefinedError(a, line);
    if (b.is_undefined()) return UndefinedError(b, line);
    absl::StatusOr<bool> r = op == "<"   ? a.Less(b)
                             : op == ">" ? b.Less(a)
                                         : absl::StatusOr<bool>(false);
    if (op == "<=" || op == ">=") {
      ASSIGN_OR_RETURN(bool strict, op == "<=" ? a.Less(b) : b.Less(a));
      return strict || a.Equals(b);
    }
    if (!r.ok()) return LineError(line, ToStd(r.status().message()));
    return r;
  }

  absl::StatusOr<Value> Eval(const Expr& e) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxDepth) return TooDeep(e.line);
    return EvalExpr(e);
  }

  absl::StatusOr<Value> EvalExpr(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName:
        return Lookup(e.name);
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        ValueList items;
        for (const ExprPtr& c : e.children) {
          ASSIGN_OR_RETURN(Value v, Eval(*c));
          items.push_back(std::move(v));
        }
        if (e.kind == Expr::Kind::kTuple) return Value::MakeTuple(std::move(items));
        return Value(std::move(items));
      }
      case Expr::Kind::kDict: {
        ValueDict d;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          ASSIGN_OR_RETURN(Value k, Eval(*e.children[i]));
          ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1]));
          d.Set(k.Str(), std::move(v));
        }
        return Value(std::move(d));
      }
      case Expr::Kind::kAttr: {
        ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
        return GetAttr(obj, e.name, e.line);
      }
      case Expr::Kind::kItem: {
        ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
        ASSIGN_OR_RETURN(Value key, Eval(*e.children[1]));
        return GetItem(obj, key, e.line);
      }
      case Expr::Kind::kSlice: {
        ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
        if (obj.is_undefined()) return UndefinedError(obj, e.line);
        std::optional<int64_t> bounds[3];
        for (int k = 0; k < 3; ++k) {
          if (!e.children[k + 1]) continue;
          ASSIGN_OR_RETURN(Value b, Eval(*e.children[k + 1]));
          if (b.is_none()) continue;
          if (!b.is_int()) return LineError(e.line, "slice indices must be integers");
          bounds[k] = b.as_int();
        }
        return SliceValue(obj, bounds[0], bounds[1], bounds[2]);
      }
      case Expr::Kind::kCall: {
        ASSIGN_OR_RETURN(Value fn, Eval(*e.children[0]));
        if (fn.is_undefined()) return UndefinedError(fn, e.line);
        if (!fn.is_callable())
          return LineError(e.line, Cat("'", fn.TypeName(), "' object is not callable"));
        ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
        auto result = fn.as_function()(args);
        if (!result.ok()) return WithLine(result.status(), e.line);
        return result;
      }
      case Expr::Kind::kFilter: {
        ASSIGN_OR_RETURN(Value input, Eval(*e.children[0]));
        ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
        auto result = ApplyFilter(e.name, input, args);
        if (!result.ok()) return WithLine(result.status(), e.line);
        return result;
      }
      case Expr::Kind::kTest: {
        ASSIGN_OR_RETURN(Value input, Eval(*e.children[0]));
        ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
        auto result = ApplyTest(e.name, input, args);
        if (!result.ok()) return WithLine(result.status(), e.line);
        return Value(*result != e.negated);
      }
      case Expr::Kind::kUnary: {
        ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
        if (v.is_undefined()) return UndefinedError(v, e.line);
        if (v.is_int() || v.is_bool()) {
          if (e.name != "-") return Value(IntOf(v));
          return IntArithmetic("-", Value(0), v, e.line);
        }
        if (v.is_float()) return Value(e.name == "-" ? -v.as_double() : v.as_double());
        return LineError(e.line,
                         Cat("bad operand type for unary ", e.name, ": '", v.TypeName(), "'"));
      }
      case Expr::Kind::kBinary: {
        ASSIGN_OR_RETURN(Value a, Eval(*e.children[0]));
        ASSIGN_OR_RETURN(Value b, Eval(*e.children[1]));
        return Arithmetic(e.name, a, b, e.line);
      }
      case Expr::Kind::kCompare: {
        ASSIGN_OR_RETURN(Value left, Eval(*e.children[0]));
        for (size_t i = 0; i < e.ops.size(); ++i) {
          ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1]));
          ASSIGN_OR_RETURN(bool ok, CompareOp(e.ops[i], left, right, e.line));
          if (!ok) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::kAnd:
      case Expr::Kind::kOr: {
        ASSIGN_OR_RETURN(Value a, Eval(*e.children[0]));
        if (a.Truthy() == (e.kind == Expr::Kind::kOr)) return a;
        return Eval(*e.children[1]);
      }
      case Expr::Kind::kNot: {
        ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
        return Value(!v.Truthy());
      }
      case Expr::Kind::kCond: {
        ASSIGN_OR_RETURN(Value c, Eval(*e.children[1]));
        if (c.Truthy()) return Eval(*e.children[0]);
        if (e.children[2]) return Eval(*e.children[2]);
        return Value::MakeUndefined("else");
      }
    }
    return LineError(e.line, "unknown expression");
  }

  // Whether `target` is `v` or is inside it, through lists and dicts: storing such a `v` in
  // `target` would make a structure that prints forever.
  static bool Reaches(const Value& v, const ValueDict& target) {
    absl::flat_hash_set<const void*> seen;  // shared sublists are walked once
    std::vector<const Value*> todo = {&v};
    while (!todo.empty()) {
      const Value* x = todo.back();
      todo.pop_back();
      if (x->is_dict()) {
        if (&x->as_dict() == &target) return true;
        if (!seen.insert(&x->as_dict()).second) continue;
        for (const auto& [k, item] : x->as_dict().items()) todo.push_back(&item);
      } else if (x->is_list()) {
        if (!seen.insert(&x->as_list()).second) continue;
        for (const Value& item : x->as_list()) todo.push_back(&item);
      }
    }
    return false;
  }

  std::vector<Scope> scopes_;
  std::vector<Value> assigned_namespaces_;
  Flow flow_ = Flow::kNormal;
  int depth_ = 0;  // ExecOne and Eval calls in progress
};

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source) {
  ASSIGN_OR_RETURN(std::vector<TemplateToken> tokens, Lex(source));
  ASSIGN_OR_RETURN(Body body, jinja::Parse(tokens));
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  return t;
}

absl::StatusOr<std::string> Template::Render(const ValueDict& globals) const {
  ValueDict all = globals;
  AddDefaultGlobals(&all);
  Interpreter interpreter(all);
  std::string out;
  RETURN_IF_ERROR(interpreter.Exec(*body_, &out));
  return out;
}

}  // namespace tandem::jinja
