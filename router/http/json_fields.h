// Typed, null-tolerant reads of OpenAI request fields from nlohmann::json, each failure an
// InvalidParam (openai_error.h) naming the field: "max_tokens must be an integer, got a string".
// An explicit null counts as "not given", as in OpenAI's API.
#ifndef TANDEM_ROUTER_HTTP_JSON_FIELDS_H_
#define TANDEM_ROUTER_HTTP_JSON_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tandem {

// "a string", "an integer", ... for messages.
std::string JsonTypeName(const nlohmann::json& v);
// "`param` must be `expected`, got <type of v>".
absl::Status WrongType(const std::string& param, const char* expected, const nlohmann::json& v);

// The value of `key` in `obj`; nullptr when it is absent or null.
const nlohmann::json* FindField(const nlohmann::json& obj, const char* key);

// An integer in [lo, hi] named `param`. A number with a fractional part is a type error; 5.0 is 5.
absl::StatusOr<int64_t> IntValue(const std::string& param, const nlohmann::json& v, int64_t lo,
                                 int64_t hi);

// Optional fields of `obj` (nullopt when absent or null), named by `key` in errors.
absl::StatusOr<std::optional<bool>> OptBool(const nlohmann::json& obj, const char* key);
absl::StatusOr<std::optional<double>> OptNumber(const nlohmann::json& obj, const char* key);
absl::StatusOr<std::optional<int64_t>> OptInt(const nlohmann::json& obj, const char* key,
                                              int64_t lo, int64_t hi);
absl::StatusOr<std::optional<std::string>> OptString(const nlohmann::json& obj, const char* key);

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_JSON_FIELDS_H_
