// Small helpers for reading tokenizer.json / tokenizer_config.json fields with errors that name
// the file and the field.
#ifndef TANDEM_COMMON_TOKENIZER_JSON_UTIL_H_
#define TANDEM_COMMON_TOKENIZER_JSON_UTIL_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tokenizer/unicode/str_util.h"
#include "nlohmann/json.hpp"

namespace tandem::json_util {

// "<where>.<field>" — `where` is "path/to/tokenizer.json: pre_tokenizer" style context.
inline std::string Field(std::string_view where, std::string_view field) {
  return Cat(where, ".", field);
}

inline absl::Status FieldError(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(Cat(where, ": ", what));
}

// Optional typed members; a present member of the wrong type is an error.
inline absl::StatusOr<bool> GetBool(const nlohmann::json& obj, std::string_view key, bool dflt,
                                    std::string_view where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) return FieldError(Field(where, key), "expected a boolean");
  return it->get<bool>();
}

inline absl::StatusOr<std::string> GetString(const nlohmann::json& obj, std::string_view key,
                                             std::string_view dflt, std::string_view where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string(dflt);
  if (!it->is_string()) return FieldError(Field(where, key), "expected a string");
  return it->get<std::string>();
}

inline absl::StatusOr<int64_t> GetInt(const nlohmann::json& obj, std::string_view key, int64_t dflt,
                                      std::string_view where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return dflt;
  if (!it->is_number_integer()) return FieldError(Field(where, key), "expected an integer");
  return it->get<int64_t>();
}

// The "type" member of a component object.
inline absl::StatusOr<std::string> GetType(const nlohmann::json& obj, std::string_view where) {
  if (!obj.is_object()) return FieldError(where, "expected an object");
  auto it = obj.find("type");
  if (it == obj.end() || !it->is_string()) return FieldError(where, "missing string field 'type'");
  return it->get<std::string>();
}

}  // namespace tandem::json_util

#endif  // TANDEM_COMMON_TOKENIZER_JSON_UTIL_H_
