// Jinja tests and global functions (the filters are in filters.cc).
#include "common/tokenizer/jinja/builtins.h"

#include <algorithm>

#include "common/tokenizer/unicode/str_util.h"
#include "common/util/status_macros.h"

namespace tandem::jinja {
namespace {

absl::Status Error(std::string_view what) { return absl::InvalidArgumentError(std::string(what)); }

}  // namespace

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& args) {
  const Value* arg = args.Get(0, "");
  auto need_arg = [&]() -> absl::Status {
    if (arg == nullptr) return Error(Cat("test '", name, "' needs an argument"));
    return absl::OkStatus();
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number() || v.is_bool();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.is_callable();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) return Error(Cat("test '", name, "' needs an integer"));
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    RETURN_IF_ERROR(need_arg());
    if (!v.is_int() || !arg->is_int() || arg->as_int() == 0)
      return Error("divisibleby needs integers");
    return v.as_int() % arg->as_int() == 0;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    ASSIGN_OR_RETURN(Value r, CallMethod(v, name == "lower" ? "islower" : "isupper"));
    return r.as_bool();
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") {
    RETURN_IF_ERROR(need_arg());
    return v.Equals(*arg);
  }
  if (name == "ne" || name == "!=") {
    RETURN_IF_ERROR(need_arg());
    return !v.Equals(*arg);
  }
  if (name == "lt" || name == "<" || name == "gt" || name == ">" || name == "le" || name == "<=" ||
      name == "ge" || name == ">=") {
    RETURN_IF_ERROR(need_arg());
    const bool greater = name[0] == 'g' || name[0] == '>';
    const bool or_equal = name.size() == 2 && (name[1] == 'e' || name[1] == '=');
    ASSIGN_OR_RETURN(bool less, greater ? arg->Less(v) : v.Less(*arg));
    return less || (or_equal && v.Equals(*arg));
  }
  if (name == "in") {
    RETURN_IF_ERROR(need_arg());
    if (arg->is_string() && v.is_string())
      return arg->as_string().find(v.as_string()) != std::string::npos;
    if (arg->is_dict()) return v.is_string() && arg->as_dict().Find(v.as_string()) != nullptr;
    ASSIGN_OR_RETURN(ValueList items, Iterate(*arg));
    return std::any_of(items.begin(), items.end(), [&](const Value& x) { return x.Equals(v); });
  }
  return Error(Cat("unknown test '", name, "'"));
}

void AddDefaultGlobals(ValueDict* globals) {
  auto add = [&](const char* name, Function fn) {
    if (globals->Find(name) == nullptr) globals->Set(name, Value(std::move(fn)));
  };
  add("range", [](const CallArgs& args) -> absl::StatusOr<Value> {
    std::vector<int64_t> a;
    for (const Value& v : args.positional) {
      if (!v.is_int()) return Error("range() needs integers");
      a.push_back(v.as_int());
    }
    if (a.empty() || a.size() > 3) return Error("range() takes 1 to 3 arguments");
    const int64_t start = a.size() == 1 ? 0 : a[0];
    const int64_t stop = a.size() == 1 ? a[0] : a[1];
    const int64_t step = a.size() == 3 ? a[2] : 1;
    if (step == 0) return Error("range() step must not be zero");
    // The count in 128 bits: stop - start can exceed int64's range.
    const __int128 span = static_cast<__int128>(stop) - start;
    const __int128 count = span / step + ((span % step != 0) ? 1 : 0);
    if (count > 100000) return Error("range() too large");
    ValueList out;
    for (__int128 k = 0; k < count; ++k) out.emplace_back(static_cast<int64_t>(start + k * step));
    return Value(std::move(out));
  });
  auto make_dict = [](bool is_namespace) {
    return [is_namespace](const CallArgs& args) -> absl::StatusOr<Value> {
      ValueDict d;
      d.is_namespace = is_namespace;
      for (const Value& v : args.positional) {
        if (!v.is_dict()) return Error("expected a mapping argument");
        for (const auto& [k, x] : v.as_dict().items()) d.Set(k, x);
      }
      for (const auto& [k, x] : args.keyword) d.Set(k, x);
      return Value(std::move(d));
    };
  };
  add("namespace", make_dict(true));
  add("dict", make_dict(false));
}

}  // namespace tandem::jinja
