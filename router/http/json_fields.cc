#include "router/http/json_fields.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"
#include "router/http/openai_error.h"

namespace tandem {

using json = nlohmann::json;

std::string JsonTypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

absl::Status WrongType(const std::string& param, const char* expected, const json& v) {
  return InvalidParam(param, absl::StrCat(param, " must be ", expected, ", got ", JsonTypeName(v)));
}

const json* FindField(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<bool>> OptBool(const json& obj, const char* key) {
  const json* v = FindField(obj, key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return WrongType(key, "a boolean", *v);
  return std::optional<bool>(v->get<bool>());
}

absl::StatusOr<std::optional<double>> OptNumber(const json& obj, const char* key) {
  const json* v = FindField(obj, key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return WrongType(key, "a number", *v);
  return std::optional<double>(v->get<double>());
}

absl::StatusOr<int64_t> IntValue(const std::string& param, const json& v, int64_t lo, int64_t hi) {
  int64_t value = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) {
      return InvalidParam(param, absl::StrCat(param, " must be <= ", hi, ", got ", u));
    }
    value = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    value = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(std::floor(d) == d) || std::fabs(d) > 9.0e18) {
      return WrongType(param, "an integer", v);
    }
    value = static_cast<int64_t>(d);
  } else {
    return WrongType(param, "an integer", v);
  }
  if (value < lo)
    return InvalidParam(param, absl::StrCat(param, " must be >= ", lo, ", got ", value));
  if (value > hi)
    return InvalidParam(param, absl::StrCat(param, " must be <= ", hi, ", got ", value));
  return value;
}

absl::StatusOr<std::optional<int64_t>> OptInt(const json& obj, const char* key, int64_t lo,
                                              int64_t hi) {
  const json* v = FindField(obj, key);
  if (v == nullptr) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t value, IntValue(key, *v, lo, hi));
  return std::optional<int64_t>(value);
}

absl::StatusOr<std::optional<std::string>> OptString(const json& obj, const char* key) {
  const json* v = FindField(obj, key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return WrongType(key, "a string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

}  // namespace tandem
