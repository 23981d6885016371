// Jinja filters (`value | name(args)`): one function per filter, looked up by name in a table.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "common/tokenizer/jinja/builtins.h"
#include "common/tokenizer/jinja/int_math.h"
#include "common/tokenizer/unicode/str_util.h"
#include "common/tokenizer/unicode/unicode_util.h"
#include "common/util/status_macros.h"

namespace tandem::jinja {
namespace {

absl::Status FilterError(std::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}
// Arguments after the first `skip` positional ones, as a new CallArgs.
CallArgs Rest(const CallArgs& args, size_t skip) {
  CallArgs rest;
  for (size_t i = skip; i < args.positional.size(); ++i)
    rest.positional.push_back(args.positional[i]);
  rest.keyword = args.keyword;
  return rest;
}

// Jinja's attribute lookup for filters such as map(attribute="a.b") and selectattr.
Value Attribute(const Value& v, const std::string& path) {
  Value cur = v;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (cur.is_dict()) {
      const Value* f = cur.as_dict().Find(part);
      cur = f != nullptr ? *f : Value::MakeUndefined(part);
    } else if (cur.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const size_t i = std::stoul(part);
      cur = i < cur.as_list().size() ? cur.as_list()[i] : Value::MakeUndefined(part);
    } else {
      cur = Value::MakeUndefined(part);
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// Jinja's title filter: capitalizes words separated by whitespace, '-', and opening brackets.
std::string Title(const std::string& s) {
  const std::u32string cps = unicode::Utf8ToCodePoints(s);
  std::string out;
  bool word_start = true;
  for (char32_t c : cps) {
    const bool separator =
        unicode::IsWhitespace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    std::string one;
    unicode::AppendUtf8(c, &one);
    if (separator) {
      out += one;
      word_start = true;
      continue;
    }
    auto mapped = CallMethod(Value(one), word_start ? "upper" : "lower");
    out += mapped.ok() ? mapped->as_string() : one;
    word_start = false;
  }
  return out;
}

absl::StatusOr<Value> SortList(ValueList items, bool reverse, bool case_sensitive,
                               const std::optional<std::string>& attribute) {
  absl::Status error;
  auto key = [&](const Value& v) -> Value {
    Value k = attribute ? Attribute(v, *attribute) : v;
    if (!case_sensitive && k.is_string()) {
      auto lower = CallMethod(k, "lower");
      if (lower.ok()) return *lower;
    }
    return k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    auto less = reverse ? key(b).Less(key(a)) : key(a).Less(key(b));
    if (!less.ok()) {
      error = less.status();
      return false;
    }
    return *less;
  });
  if (!error.ok()) return error;
  return Value(std::move(items));
}

std::optional<std::string> OptStringArg(const CallArgs& args, size_t i, std::string_view name) {
  const Value* v = args.Get(i, name);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->as_string();
}

bool BoolArg(const CallArgs& args, size_t i, std::string_view name, bool dflt) {
  const Value* v = args.Get(i, name);
  return v == nullptr ? dflt : v->Truthy();
}

// select / reject / selectattr / rejectattr.
absl::StatusOr<Value> SelectFilter(const Value& input, const CallArgs& args, bool by_attr,
                                   bool keep_if) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  size_t next = 0;
  std::optional<std::string> attr;
  if (by_attr) {
    attr = OptStringArg(args, next++, "attribute");
    if (!attr) return FilterError("selectattr/rejectattr need an attribute name");
  }
  std::optional<std::string> test = OptStringArg(args, next, "");
  if (test) ++next;
  CallArgs test_args;
  for (size_t i = next; i < args.positional.size(); ++i)
    test_args.positional.push_back(args.positional[i]);
  ValueList out;
  for (const Value& item : items) {
    const Value subject = attr ? Attribute(item, *attr) : item;
    bool ok;
    if (test) {
      ASSIGN_OR_RETURN(ok, ApplyTest(*test, subject, test_args));
    } else {
      ok = subject.Truthy();
    }
    if (ok == keep_if) out.push_back(item);
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> MapFilter(const Value& input, const CallArgs& args) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  ValueList out;
  if (auto attr = OptStringArg(args, 999, "attribute")) {
    const Value* dflt = args.Get(999, "default");
    for (const Value& item : items) {
      Value v = Attribute(item, *attr);
      out.push_back(v.is_undefined() && dflt != nullptr ? *dflt : v);
    }
    return Value(std::move(out));
  }
  auto filter = OptStringArg(args, 0, "");
  if (!filter) return FilterError("map needs a filter name or attribute=");
  const CallArgs rest = Rest(args, 1);
  for (const Value& item : items) {
    ASSIGN_OR_RETURN(Value v, ApplyFilter(*filter, item, rest));
    out.push_back(std::move(v));
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> ToNumber(const Value& input, const CallArgs& args, bool integer) {
  const Value* dflt = args.Get(0, "default");
  const Value fallback = dflt != nullptr ? *dflt : (integer ? Value(0) : Value(0.0));
  // Jinja's int filter: int(value), else int(float(value)), else the default (NaN, infinities).
  auto truncated = [&](double d) -> absl::StatusOr<Value> {
    if (!std::isfinite(d)) return fallback;
    std::optional<int64_t> i = TruncateToInt64(d);
    if (!i) return FilterError("int: the value does not fit in 64 bits");
    return Value(*i);
  };
  if (input.is_int()) return integer ? input : Value(input.as_double());
  if (input.is_bool()) return integer ? Value(input.as_bool() ? 1 : 0) : Value(input.as_double());
  if (input.is_float()) return integer ? truncated(input.as_double()) : input;
  if (input.is_string()) {
    const std::string s = input.as_string();
    char* end = nullptr;
    if (integer) {
      errno = 0;
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (end != s.c_str() && *end == '\0') {
        if (errno == ERANGE) return FilterError("int: the value does not fit in 64 bits");
        return Value(static_cast<int64_t>(v));
      }
      const double d = std::strtod(s.c_str(), &end);
      if (end != s.c_str() && *end == '\0') return truncated(d);
    } else {
      const double d = std::strtod(s.c_str(), &end);
      if (end != s.c_str() && *end == '\0') return Value(d);
    }
  }
  return fallback;
}

// Python's printf-style `format % args` for the `format` filter: %s %r %d %i %f %x %%, with
// optional width and precision (e.g. %5.2f).
absl::StatusOr<Value> PercentFormat(const std::string& format, const ValueList& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    size_t j = i + 1;
    while (j < format.size() && (std::isdigit(static_cast<unsigned char>(format[j])) ||
                                 format[j] == '.' || format[j] == '-' || format[j] == '+')) {
      ++j;
    }
    if (j >= format.size()) return FilterError("incomplete format");
    const char conv = format[j];
    const std::string spec = format.substr(i + 1, j - i - 1);
    i = j;
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (next >= args.size()) return FilterError("not enough arguments for format string");
    const Value& v = args[next++];
    char buf[128];
    if (conv == 's' || conv == 'r') {
      const std::string s = conv == 's' ? v.Str() : v.Repr();
      std::snprintf(buf, sizeof(buf), ("%" + spec + "s").c_str(), s.c_str());
      out += s.size() >= sizeof(buf) - 1 ? s : std::string(buf);
    } else if (conv == 'd' || conv == 'i' || conv == 'x') {
      if (!v.is_number() && !v.is_bool()) return FilterError("%d format: a number is required");
      std::snprintf(buf, sizeof(buf), ("%" + spec + "ll" + (conv == 'x' ? "x" : "d")).c_str(),
                    static_cast<long long>(v.as_double()));
      out += buf;
    } else if (conv == 'f' || conv == 'e' || conv == 'g') {
      if (!v.is_number() && !v.is_bool()) return FilterError("%f format: a number is required");
      std::snprintf(buf, sizeof(buf), ("%" + spec + conv).c_str(), v.as_double());
      out += buf;
    } else {
      return FilterError(Cat("unsupported format character '", std::string(1, conv), "'"));
    }
  }
  if (next < args.size())
    return FilterError("not all arguments converted during string formatting");
  return Value(std::move(out));
}

// The filters, each `input | name(args)`. Filters that come in pairs (first/last, min/max) share
// one function with a parameter; the table below binds it.

absl::StatusOr<Value> Default(const Value& input, const CallArgs& args) {
  const Value* dflt = args.Get(0, "default_value");
  const bool boolean = BoolArg(args, 1, "boolean", false);
  if (input.is_undefined() || (boolean && !input.Truthy())) return dflt ? *dflt : Value("");
  return input;
}

absl::StatusOr<Value> ToJson(const Value& input, const CallArgs& args) {
  const Value* indent = args.Get(0, "indent");
  std::optional<int> ind;
  if (indent != nullptr && indent->is_int()) ind = static_cast<int>(indent->as_int());
  ASSIGN_OR_RETURN(std::string json, input.ToJson(ind, BoolArg(args, 999, "sort_keys", false)));
  return Value(std::move(json));
}

absl::StatusOr<Value> Length(const Value& input, const CallArgs&) {
  if (input.is_string()) return Value(static_cast<int64_t>(CodePointLength(input.as_string())));
  if (input.is_list()) return Value(static_cast<int64_t>(input.as_list().size()));
  if (input.is_dict()) return Value(static_cast<int64_t>(input.as_dict().size()));
  if (input.is_undefined()) return Value(0);
  return FilterError(Cat("object of type '", input.TypeName(), "' has no len()"));
}

absl::StatusOr<Value> ToString(const Value& input, const CallArgs&) { return Value(input.Str()); }

absl::StatusOr<Value> Safe(const Value& input, const CallArgs&) { return input; }

absl::StatusOr<Value> Escape(const Value& input, const CallArgs&) {
  return Value(HtmlEscape(input.Str()));
}

absl::StatusOr<Value> List(const Value& input, const CallArgs&) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  return Value(std::move(items));
}

absl::StatusOr<Value> Abs(const Value& input, const CallArgs&) {
  if (input.is_int()) return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
  if (input.is_float()) return Value(std::fabs(input.as_double()));
  return FilterError("abs needs a number");
}

absl::StatusOr<Value> Round(const Value& input, const CallArgs& args) {
  if (!input.is_number()) return FilterError("round needs a number");
  const Value* p = args.Get(0, "precision");
  const int64_t precision = p != nullptr && p->is_int() ? p->as_int() : 0;
  const std::string method = OptStringArg(args, 1, "method").value_or("common");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = input.as_double() * scale;
  // "common" is Python's round(): halves go to the even neighbour.
  const double r = method == "floor"  ? std::floor(x)
                   : method == "ceil" ? std::ceil(x)
                                      : std::nearbyint(x);
  return Value(r / scale);
}

// first / last.
absl::StatusOr<Value> FirstOrLast(const Value& input, bool first) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  if (items.empty()) return Value::MakeUndefined(first ? "first" : "last");
  return first ? items.front() : items.back();
}

absl::StatusOr<Value> Join(const Value& input, const CallArgs& args) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  const std::string sep = OptStringArg(args, 0, "d").value_or("");
  const auto attr = OptStringArg(args, 1, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += (attr ? Attribute(items[i], *attr) : items[i]).Str();
  }
  return Value(std::move(out));
}

// upper / lower / trim: the str method of the same job on the input as a string.
absl::StatusOr<Value> StringMethodFilter(const Value& input, std::string_view method,
                                         const CallArgs& args) {
  return CallMethod(Value(input.Str()), method, args);
}

absl::StatusOr<Value> TitleFilter(const Value& input, const CallArgs&) {
  return Value(Title(input.Str()));
}

// capitalize: first character upper-cased, the rest lower-cased.
absl::StatusOr<Value> Capitalize(const Value& input, const CallArgs&) {
  const std::string s = input.Str();
  if (s.empty()) return Value(s);
  size_t first_end = 0;
  unicode::DecodeUtf8(s, &first_end);
  ASSIGN_OR_RETURN(Value head, CallMethod(Value(s.substr(0, first_end)), "upper"));
  ASSIGN_OR_RETURN(Value tail, CallMethod(Value(s.substr(first_end)), "lower"));
  return Value(head.as_string() + tail.as_string());
}

absl::StatusOr<Value> Items(const Value& input, const CallArgs&) {
  if (input.is_undefined()) return Value(ValueList{});
  if (!input.is_dict()) return FilterError("items filter needs a mapping");
  return CallMethod(input, "items");
}

absl::StatusOr<Value> DictSort(const Value& input, const CallArgs& args) {
  if (!input.is_dict()) return FilterError("dictsort needs a mapping");
  ASSIGN_OR_RETURN(Value items, CallMethod(input, "items"));
  ValueList list = items.as_list();
  const bool case_sensitive = BoolArg(args, 0, "case_sensitive", false);
  const bool by_value = OptStringArg(args, 1, "by").value_or("key") == "value";
  const bool reverse = BoolArg(args, 2, "reverse", false);
  return SortList(std::move(list), reverse, case_sensitive, std::string(by_value ? "1" : "0"));
}

absl::StatusOr<Value> Sort(const Value& input, const CallArgs& args) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  return SortList(std::move(items), BoolArg(args, 0, "reverse", false),
                  BoolArg(args, 1, "case_sensitive", false), OptStringArg(args, 2, "attribute"));
}

absl::StatusOr<Value> Reverse(const Value& input, const CallArgs&) {
  if (input.is_string()) return SliceValue(input, std::nullopt, std::nullopt, -1);
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

absl::StatusOr<Value> Unique(const Value& input, const CallArgs&) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  ValueList out;
  for (const Value& v : items) {
    if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return o.Equals(v); }))
      out.push_back(v);
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> Sum(const Value& input, const CallArgs& args) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  const auto attr = OptStringArg(args, 0, "attribute");
  const Value* start = args.Get(1, "start");
  Value total = start != nullptr ? *start : Value(0);
  for (const Value& v : items) {
    const Value x = attr ? Attribute(v, *attr) : v;
    if (!x.is_number() || !total.is_number()) return FilterError("sum needs numbers");
    total = total.is_int() && x.is_int() ? Value(total.as_int() + x.as_int())
                                         : Value(total.as_double() + x.as_double());
  }
  return total;
}

// min / max.
absl::StatusOr<Value> MinOrMax(const Value& input, bool min) {
  ASSIGN_OR_RETURN(ValueList items, Iterate(input));
  if (items.empty()) return Value::MakeUndefined(min ? "min" : "max");
  Value best = items[0];
  for (const Value& v : items) {
    ASSIGN_OR_RETURN(bool less, min ? v.Less(best) : best.Less(v));
    if (less) best = v;
  }
  return best;
}

absl::StatusOr<Value> Format(const Value& input, const CallArgs& args) {
  if (!input.is_string()) return FilterError("format needs a format string");
  return PercentFormat(input.as_string(), args.positional);
}

absl::StatusOr<Value> Attr(const Value& input, const CallArgs& args) {
  const auto attr = OptStringArg(args, 0, "name");
  if (!attr) return FilterError("attr needs a name");
  return input.is_dict() && input.as_dict().Find(*attr) ? *input.as_dict().Find(*attr)
                                                        : Value::MakeUndefined(*attr);
}

absl::StatusOr<Value> Indent(const Value& input, const CallArgs& args) {
  const Value* w = args.Get(0, "width");
  const std::string pad =
      w != nullptr && w->is_string()
          ? w->as_string()
          : std::string(w != nullptr && w->is_int() ? static_cast<size_t>(w->as_int()) : 4, ' ');
  const bool first = BoolArg(args, 1, "first", false), blank = BoolArg(args, 2, "blank", false);
  const std::string s = input.Str();
  std::string out;
  size_t start = 0;
  bool is_first = true;
  while (start <= s.size()) {
    const size_t nl = s.find('\n', start);
    const std::string line =
        s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((is_first ? first : true) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return Value(std::move(out));
}

using Filter = absl::StatusOr<Value> (*)(const Value& input, const CallArgs& args);

// Every filter by name, aliases included.
const absl::flat_hash_map<std::string_view, Filter>& Filters() {
  static const auto* const kFilters = new absl::flat_hash_map<std::string_view, Filter>{
      {"default", Default},
      {"d", Default},
      {"tojson", ToJson},
      {"length", Length},
      {"count", Length},
      {"string", ToString},
      {"safe", Safe},
      {"escape", Escape},
      {"e", Escape},
      {"list", List},
      {"int", [](const Value& in, const CallArgs& a) { return ToNumber(in, a, /*integer=*/true); }},
      {"float",
       [](const Value& in, const CallArgs& a) { return ToNumber(in, a, /*integer=*/false); }},
      {"abs", Abs},
      {"round", Round},
      {"first", [](const Value& in, const CallArgs&) { return FirstOrLast(in, /*first=*/true); }},
      {"last", [](const Value& in, const CallArgs&) { return FirstOrLast(in, /*first=*/false); }},
      {"join", Join},
      {"upper",
       [](const Value& in, const CallArgs&) { return StringMethodFilter(in, "upper", {}); }},
      {"lower",
       [](const Value& in, const CallArgs&) { return StringMethodFilter(in, "lower", {}); }},
      {"trim",
       [](const Value& in, const CallArgs& a) { return StringMethodFilter(in, "strip", a); }},
      {"replace",
       [](const Value& in, const CallArgs& a) { return StringMethodFilter(in, "replace", a); }},
      {"title", TitleFilter},
      {"capitalize", Capitalize},
      {"items", Items},
      {"dictsort", DictSort},
      {"sort", Sort},
      {"reverse", Reverse},
      {"unique", Unique},
      {"sum", Sum},
      {"min", [](const Value& in, const CallArgs&) { return MinOrMax(in, /*min=*/true); }},
      {"max", [](const Value& in, const CallArgs&) { return MinOrMax(in, /*min=*/false); }},
      {"select",
       [](const Value& in, const CallArgs& a) { return SelectFilter(in, a, false, true); }},
      {"reject",
       [](const Value& in, const CallArgs& a) { return SelectFilter(in, a, false, false); }},
      {"selectattr",
       [](const Value& in, const CallArgs& a) { return SelectFilter(in, a, true, true); }},
      {"rejectattr",
       [](const Value& in, const CallArgs& a) { return SelectFilter(in, a, true, false); }},
      {"map", MapFilter},
      {"format", Format},
      {"attr", Attr},
      {"indent", Indent},
  };
  return *kFilters;
}

}  // namespace

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, const CallArgs& args) {
  const auto it = Filters().find(name);
  if (it == Filters().end()) return FilterError(Cat("unknown filter '", name, "'"));
  return it->second(input, args);
}

}  // namespace tandem::jinja
