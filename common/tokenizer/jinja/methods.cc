// Python methods of str and dict values, slicing and iteration.
#include <unicode/locid.h>
#include <unicode/unistr.h>

#include "common/tokenizer/jinja/builtins.h"
#include "common/tokenizer/unicode/str_util.h"
#include "common/tokenizer/unicode/unicode_util.h"
#include "common/util/status_macros.h"

namespace tandem::jinja {
namespace {

absl::Status TypeError(std::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

// Optional string argument (None counts as absent).
absl::StatusOr<std::optional<std::string>> OptString(const CallArgs& args, size_t index,
                                                     std::string_view name) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || v->is_none() || v->is_undefined()) return std::nullopt;
  if (!v->is_string()) return TypeError(Cat(name, " must be a string, not ", v->TypeName()));
  return v->as_string();
}

int64_t OptInt(const CallArgs& args, size_t index, std::string_view name, int64_t dflt) {
  const Value* v = args.Get(index, name);
  return v != nullptr && v->is_int() ? v->as_int() : dflt;
}

std::string Strip(const std::string& s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string cps = unicode::Utf8ToCodePoints(s);
  const std::u32string set = chars ? unicode::Utf8ToCodePoints(*chars) : std::u32string();
  auto strip = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : unicode::IsWhitespace(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) --e;
  }
  return unicode::CodePointsToUtf8(std::u32string_view(cps).substr(b, e - b));
}

// Python str.split / str.rsplit.
absl::StatusOr<Value> Split(const std::string& s, const std::optional<std::string>& sep,
                            int64_t maxsplit, bool from_right) {
  ValueList parts;
  if (sep && sep->empty()) return TypeError("empty separator");
  if (!sep) {
    // Runs of whitespace separate; leading/trailing whitespace is ignored.
    const std::u32string cps = unicode::Utf8ToCodePoints(s);
    std::vector<std::pair<size_t, size_t>> words;
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && unicode::IsWhitespace(cps[i])) ++i;
      if (i >= cps.size()) break;
      size_t j = i;
      while (j < cps.size() && !unicode::IsWhitespace(cps[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    if (maxsplit >= 0 && static_cast<int64_t>(words.size()) > maxsplit + 1) {
      // Past maxsplit, the rest of the string is one item, including its whitespace on the
      // far side (Python keeps trailing whitespace for split, leading for rsplit).
      if (from_right) {
        const size_t keep = words.size() - static_cast<size_t>(maxsplit);
        const std::pair<size_t, size_t> head{0, words[keep - 1].second};
        words.erase(words.begin(), words.begin() + static_cast<long>(keep));
        words.insert(words.begin(), head);
      } else {
        const std::pair<size_t, size_t> tail{words[static_cast<size_t>(maxsplit)].first,
                                             cps.size()};
        words.resize(static_cast<size_t>(maxsplit));
        words.push_back(tail);
      }
    }
    for (auto [b, e] : words) {
      parts.emplace_back(unicode::CodePointsToUtf8(std::u32string_view(cps).substr(b, e - b)));
    }
    return Value(std::move(parts));
  }
  std::vector<std::string> pieces;
  if (!from_right) {
    size_t pos = 0;
    int64_t splits = 0;
    while (maxsplit < 0 || splits < maxsplit) {
      const size_t hit = s.find(*sep, pos);
      if (hit == std::string::npos) break;
      pieces.push_back(s.substr(pos, hit - pos));
      pos = hit + sep->size();
      ++splits;
    }
    pieces.push_back(s.substr(pos));
  } else {
    size_t end = s.size();
    int64_t splits = 0;
    std::vector<std::string> rev;
    while (maxsplit < 0 || splits < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string::npos) break;
      rev.push_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
      ++splits;
    }
    rev.push_back(s.substr(0, end));
    pieces.assign(rev.rbegin(), rev.rend());
  }
  for (auto& p : pieces) parts.emplace_back(std::move(p));
  return Value(std::move(parts));
}

absl::StatusOr<bool> AffixMatch(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const std::string& a) {
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_string()) return one(affix.as_string());
  if (affix.is_list()) {
    for (const Value& v : affix.as_list()) {
      if (!v.is_string()) return TypeError("startswith/endswith tuple items must be strings");
      if (one(v.as_string())) return true;
    }
    return false;
  }
  return TypeError(
      Cat("startswith/endswith argument must be str or tuple, not ", affix.TypeName()));
}

std::string CaseMap(const std::string& s, bool upper) {
  icu::UnicodeString u =
      icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  if (upper) {
    u.toUpper(icu::Locale::getRoot());
  } else {
    u.toLower(icu::Locale::getRoot());
  }
  std::string out;
  u.toUTF8String(out);
  return out;
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  std::string out;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    size_t i = 0;
    while (i < s.size()) {
      if (count >= 0 && done >= count) break;
      out += to;
      ++done;
      const size_t start = i;
      unicode::DecodeUtf8(s, &i);
      out.append(s, start, i - start);
    }
    out.append(s, i, std::string::npos);
    if (i >= s.size() && (count < 0 || done < count)) out += to;
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::optional<Value> StringMethod(const std::string& s, std::string_view name) {
  auto bind = [&](auto fn) -> std::optional<Value> {
    return Value(
        Function([s, fn](const CallArgs& args) -> absl::StatusOr<Value> { return fn(s, args); }));
  };
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return bind([prefix](const std::string& str, const CallArgs& args) -> absl::StatusOr<Value> {
      const Value* a = args.Get(0, "prefix");
      if (a == nullptr) return TypeError("startswith/endswith needs an argument");
      ASSIGN_OR_RETURN(bool r, AffixMatch(str, *a, prefix));
      return Value(r);
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return bind([right](const std::string& str, const CallArgs& args) -> absl::StatusOr<Value> {
      ASSIGN_OR_RETURN(auto sep, OptString(args, 0, "sep"));
      return Split(str, sep, OptInt(args, 1, "maxsplit", -1), right);
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return bind(
        [left, right](const std::string& str, const CallArgs& args) -> absl::StatusOr<Value> {
          ASSIGN_OR_RETURN(auto chars, OptString(args, 0, "chars"));
          return Value(Strip(str, chars, left, right));
        });
  }
  if (name == "upper" || name == "lower") {
    const bool upper = name == "upper";
    return bind([upper](const std::string& str, const CallArgs&) -> absl::StatusOr<Value> {
      return Value(CaseMap(str, upper));
    });
  }
  if (name == "title" || name == "capitalize") {
    const std::string filter(name);
    return bind([filter](const std::string& str, const CallArgs& args) -> absl::StatusOr<Value> {
      return ApplyFilter(filter, Value(str), args);
    });
  }
  if (name == "replace") {
    return bind([](const std::string& str, const CallArgs& args) -> absl::StatusOr<Value> {
      const Value* from = args.Get(0, "old");
      const Value* to = args.Get(1, "new");
      if (from == nullptr || to == nullptr || !from->is_string() || !to->is_string()) {
        return TypeError("replace() needs two strings");
      }
      return Value(Replace(str, from->as_string(), to->as_string(), OptInt(args, 2, "count", -1)));
    });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const std::string method(name);
    return bind([method](const std::string& str, const CallArgs& args) -> absl::StatusOr<Value> {
      const Value* sub = args.Get(0, "sub");
      if (sub == nullptr || !sub->is_string()) return TypeError(method + "() needs a string");
      const std::string& t = sub->as_string();
      if (method == "count") {
        if (t.empty()) return Value(static_cast<int64_t>(CodePointLength(str) + 1));
        int64_t n = 0;
        for (size_t p = str.find(t); p != std::string::npos; p = str.find(t, p + t.size())) ++n;
        return Value(n);
      }
      const size_t hit = method[0] == 'r' ? str.rfind(t) : str.find(t);
      if (hit == std::string::npos) {
        if (method == "index" || method == "rindex") return TypeError("substring not found");
        return Value(static_cast<int64_t>(-1));
      }
      return Value(static_cast<int64_t>(CodePointLength(str.substr(0, hit))));
    });
  }
  if (name == "join") {
    return bind([](const std::string& str, const CallArgs& args) -> absl::StatusOr<Value> {
      const Value* items = args.Get(0, "iterable");
      if (items == nullptr) return TypeError("join() needs an iterable");
      ASSIGN_OR_RETURN(ValueList list, Iterate(*items));
      std::string out;
      for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_string()) return TypeError("join() items must be strings");
        if (i > 0) out += str;
        out += list[i].as_string();
      }
      return Value(std::move(out));
    });
  }
  if (name == "splitlines") {
    return bind([](const std::string& str, const CallArgs&) -> absl::StatusOr<Value> {
      ValueList lines;
      size_t start = 0;
      for (size_t i = 0; i < str.size(); ++i) {
        if (str[i] == '\n' || str[i] == '\r') {
          lines.emplace_back(str.substr(start, i - start));
          if (str[i] == '\r' && i + 1 < str.size() && str[i + 1] == '\n') ++i;
          start = i + 1;
        }
      }
      if (start < str.size()) lines.emplace_back(str.substr(start));
      return Value(std::move(lines));
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "isupper" || name == "islower") {
    const std::string method(name);
    return bind([method](const std::string& str, const CallArgs&) -> absl::StatusOr<Value> {
      if (str.empty()) return Value(false);
      if (method == "isupper" || method == "islower") {
        const bool up = method == "isupper";
        return Value(CaseMap(str, !up) != str && CaseMap(str, up) == str);
      }
      size_t i = 0;
      while (i < str.size()) {
        const char32_t c = unicode::DecodeUtf8(str, &i);
        const bool ok = method == "isdigit"   ? unicode::IsDecimalDigit(c)
                        : method == "isalpha" ? unicode::IsLetter(c)
                        : method == "isalnum" ? unicode::IsAlphanumeric(c)
                                              : unicode::IsWhitespace(c);
        if (!ok) return Value(false);
      }
      return Value(true);
    });
  }
  return std::nullopt;
}

std::optional<Value> DictMethod(const Value& dict, std::string_view name) {
  if (name == "items" || name == "keys" || name == "values") {
    const std::string method(name);
    return Value(Function([dict, method](const CallArgs&) -> absl::StatusOr<Value> {
      ValueList out;
      for (const auto& [k, v] : dict.as_dict().items()) {
        if (method == "items") {
          out.push_back(Value::MakeTuple(ValueList{Value(k), v}));
        } else {
          out.push_back(method == "keys" ? Value(k) : v);
        }
      }
      return Value(std::move(out));
    }));
  }
  if (name == "get") {
    return Value(Function([dict](const CallArgs& args) -> absl::StatusOr<Value> {
      const Value* key = args.Get(0, "key");
      if (key == nullptr) return TypeError("get() needs a key");
      const Value* found = key->is_string() ? dict.as_dict().Find(key->as_string()) : nullptr;
      if (found != nullptr) return *found;
      const Value* dflt = args.Get(1, "default");
      return dflt != nullptr ? *dflt : Value::MakeNone();
    }));
  }
  return std::nullopt;
}

}  // namespace

size_t CodePointLength(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::optional<Value> GetMethod(const Value& object, std::string_view name) {
  if (object.is_string()) return StringMethod(object.as_string(), name);
  if (object.is_dict() && !object.as_dict().is_namespace) return DictMethod(object, name);
  return std::nullopt;
}

absl::StatusOr<Value> CallMethod(const Value& object, std::string_view name, const CallArgs& args) {
  auto m = GetMethod(object, name);
  if (!m) {
    return TypeError(Cat("'", object.TypeName(), "' object has no attribute '", name, "'"));
  }
  return m->as_function()(args);
}

absl::StatusOr<Value> SliceValue(const Value& seq, std::optional<int64_t> start,
                                 std::optional<int64_t> stop, std::optional<int64_t> step) {
  const int64_t st = step.value_or(1);
  if (st == 0) return TypeError("slice step cannot be zero");
  std::u32string cps;
  const bool is_str = seq.is_string();
  if (!is_str && !seq.is_list())
    return TypeError(Cat("'", seq.TypeName(), "' object is not subscriptable"));
  if (is_str) cps = unicode::Utf8ToCodePoints(seq.as_string());
  const int64_t n =
      is_str ? static_cast<int64_t>(cps.size()) : static_cast<int64_t>(seq.as_list().size());
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1);
  const int64_t e = clamp(stop, st > 0 ? n : -1);
  std::u32string out_str;
  ValueList out_list;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (is_str) {
      out_str.push_back(cps[static_cast<size_t>(i)]);
    } else {
      out_list.push_back(seq.as_list()[static_cast<size_t>(i)]);
    }
  }
  if (is_str) return Value(unicode::CodePointsToUtf8(out_str));
  return Value(std::move(out_list));
}

absl::StatusOr<ValueList> Iterate(const Value& value) {
  if (value.is_undefined()) return ValueList{};
  if (value.is_list()) return value.as_list();
  if (value.is_dict()) {
    ValueList keys;
    for (const auto& [k, v] : value.as_dict().items()) keys.emplace_back(k);
    return keys;
  }
  if (value.is_string()) {
    ValueList chars;
    const std::string& s = value.as_string();
    size_t i = 0;
    while (i < s.size()) {
      const size_t start = i;
      unicode::DecodeUtf8(s, &i);
      chars.emplace_back(s.substr(start, i - start));
    }
    return chars;
  }
  return TypeError(Cat("'", value.TypeName(), "' object is not iterable"));
}

}  // namespace tandem::jinja
