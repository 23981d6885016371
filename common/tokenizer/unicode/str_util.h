// String helpers that work with std::string_view. Debian's Abseil is built with its own
// absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0), so absl::StrCat and absl's
// heterogeneous hash-map lookup do not accept std::string_view.
#ifndef TANDEM_COMMON_TOKENIZER_UNICODE_STR_UTIL_H_
#define TANDEM_COMMON_TOKENIZER_UNICODE_STR_UTIL_H_

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/hash/hash.h"

namespace tandem {

namespace str_internal {
inline void Append(std::string* out, std::string_view s) { out->append(s); }
inline void Append(std::string* out, const char* s) { out->append(s); }
inline void Append(std::string* out, char c) { out->push_back(c); }
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
void Append(std::string* out, T v) {
  out->append(std::to_string(v));
}
}  // namespace str_internal

// Concatenates strings, string views, characters and numbers.
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (str_internal::Append(&out, args), ...);
  return out;
}

// absl::string_view (e.g. absl::Status::message()) as std::string_view.
inline std::string_view ToStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// Transparent hash and equality so maps keyed by std::string accept std::string_view lookups.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const {
    return absl::Hash<absl::string_view>{}(absl::string_view(s.data(), s.size()));
  }
};
struct StringViewEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_UNICODE_STR_UTIL_H_
