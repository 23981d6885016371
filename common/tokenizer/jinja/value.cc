#include "common/tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/tokenizer/unicode/str_util.h"
#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem::jinja {

const Value* ValueDict::Find(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* ValueDict::Find(std::string_view key) {
  for (auto& [k, v] : items_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ValueDict::Set(std::string key, Value value) {
  if (Value* existing = Find(key)) {
    *existing = std::move(value);
  } else {
    items_.emplace_back(std::move(key), std::move(value));
  }
}

const Value* CallArgs::Get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return index < positional.size() ? &positional[index] : nullptr;
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return MakeNone();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList list;
      for (const auto& e : json) list.push_back(FromJson(e));
      return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict dict;
      for (const auto& [k, v] : json.items()) dict.Set(k, FromJson(v));
      return Value(std::move(dict));
    }
    default:
      return MakeNone();
  }
}

double Value::as_double() const {
  if (is_int()) return static_cast<double>(as_int());
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  return std::get<double>(v_);
}

bool Value::Truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return as_double() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_list()) return !as_list().empty();
  if (is_dict()) return as_dict().size() != 0;
  return true;
}

std::string FormatFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.25e-05"
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = sign;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt)) + "." +
             digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  const int shown = decpt - 1;
  out += shown < 0 ? "e-" : "e+";
  const std::string mag = std::to_string(std::abs(shown));
  out += (mag.size() < 2 ? "0" : "") + mag;
  return out;
}

namespace {

std::string ReprString(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    const char32_t c = unicode::DecodeUtf8(s, &i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out.append(s, start, i - start);
    }
  }
  out += quote;
  return out;
}

void JsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

absl::Status JsonDump(const Value& v, std::optional<int> indent, bool sort_keys, int depth,
                      std::string* out) {
  auto newline = [&](int level) {
    out->push_back('\n');
    out->append(static_cast<size_t>(*indent * level), ' ');
  };
  const char* item_sep = indent ? "," : ", ";
  if (v.is_none()) {
    *out += "null";
  } else if (v.is_bool()) {
    *out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    *out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const double d = v.as_double();
    *out += std::isnan(d)   ? "NaN"
            : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                            : FormatFloat(d);
  } else if (v.is_string()) {
    JsonString(v.as_string(), out);
  } else if (v.is_list()) {
    const ValueList& list = v.as_list();
    if (list.empty()) {
      *out += "[]";
      return absl::OkStatus();
    }
    out->push_back('[');
    for (size_t i = 0; i < list.size(); ++i) {
      if (i > 0) *out += item_sep;
      if (indent) newline(depth + 1);
      if (auto s = JsonDump(list[i], indent, sort_keys, depth + 1, out); !s.ok()) return s;
    }
    if (indent) newline(depth);
    out->push_back(']');
  } else if (v.is_dict()) {
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& item : v.as_dict().items()) items.push_back(&item);
    if (sort_keys) {
      std::stable_sort(items.begin(), items.end(),
                       [](const auto* a, const auto* b) { return a->first < b->first; });
    }
    if (items.empty()) {
      *out += "{}";
      return absl::OkStatus();
    }
    out->push_back('{');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) *out += item_sep;
      if (indent) newline(depth + 1);
      JsonString(items[i]->first, out);
      *out += ": ";
      if (auto s = JsonDump(items[i]->second, indent, sort_keys, depth + 1, out); !s.ok()) {
        return s;
      }
    }
    if (indent) newline(depth);
    out->push_back('}');
  } else {
    return absl::InvalidArgumentError(
        Cat("Object of type ", v.TypeName(), " is not JSON serializable"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string Value::Str() const {
  if (is_undefined()) return "";
  if (is_string()) return as_string();
  return Repr();
}

std::string Value::Repr() const {
  if (is_undefined()) return "";
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return FormatFloat(as_double());
  if (is_string()) return ReprString(as_string());
  if (is_list()) {
    std::string out = tuple_ ? "(" : "[";
    const ValueList& list = as_list();
    for (size_t i = 0; i < list.size(); ++i) {
      if (i > 0) out += ", ";
      out += list[i].Repr();
    }
    if (tuple_ && list.size() == 1) out += ",";
    return out + (tuple_ ? ")" : "]");
  }
  if (is_dict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : as_dict().items()) {
      if (!first) out += ", ";
      first = false;
      out += ReprString(k) + ": " + v.Repr();
    }
    return out + "}";
  }
  return "<function>";
}

absl::StatusOr<std::string> Value::ToJson(std::optional<int> indent, bool sort_keys) const {
  std::string out;
  if (auto s = JsonDump(*this, indent, sort_keys, 0, &out); !s.ok()) return s;
  return out;
}

std::string Value::TypeName() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_list()) return tuple_ ? "tuple" : "list";
  if (is_dict()) return as_dict().is_namespace ? "Namespace" : "dict";
  return "function";
}

bool Value::Equals(const Value& other) const {
  if ((is_number() || is_bool()) && (other.is_number() || other.is_bool())) {
    if (is_int() && other.is_int()) return as_int() == other.as_int();
    return as_double() == other.as_double();
  }
  if (is_undefined() || other.is_undefined()) return is_undefined() && other.is_undefined();
  if (is_none() || other.is_none()) return is_none() && other.is_none();
  if (is_string() && other.is_string()) return as_string() == other.as_string();
  if (is_list() && other.is_list()) {
    const ValueList &a = as_list(), &b = other.as_list();
    if (a.size() != b.size() || tuple_ != other.tuple_) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].Equals(b[i])) return false;
    }
    return true;
  }
  if (is_dict() && other.is_dict()) {
    const ValueDict &a = as_dict(), &b = other.as_dict();
    if (a.size() != b.size()) return false;
    for (const auto& [k, v] : a.items()) {
      const Value* o = b.Find(k);
      if (o == nullptr || !v.Equals(*o)) return false;
    }
    return true;
  }
  if (is_callable() && other.is_callable()) {
    return std::get<std::shared_ptr<Function>>(v_) == std::get<std::shared_ptr<Function>>(other.v_);
  }
  return false;
}

absl::StatusOr<bool> Value::Less(const Value& other) const {
  if ((is_number() || is_bool()) && (other.is_number() || other.is_bool())) {
    if (is_int() && other.is_int()) return as_int() < other.as_int();
    return as_double() < other.as_double();
  }
  if (is_string() && other.is_string()) return as_string() < other.as_string();
  if (is_list() && other.is_list()) {
    const ValueList &a = as_list(), &b = other.as_list();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i].Equals(b[i])) continue;
      return a[i].Less(b[i]);
    }
    return a.size() < b.size();
  }
  return absl::InvalidArgumentError(Cat("'<' not supported between instances of '", TypeName(),
                                        "' and '", other.TypeName(), "'"));
}

}  // namespace tandem::jinja
