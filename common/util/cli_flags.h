// Command-line flags for tandem's binaries: "--name value", "--name=value" and "--switch".
// Each binary declares its flags against fields of its options struct in main.cc, then Parse
// fills them and reports the first problem as a message naming the flag.
//
//   FlagSet flags;
//   flags.String("model", &options.model_dir);
//   flags.Number("max-tokens", &options.max_tokens);
//   flags.Switch("chat", &options.chat);
//   std::string error = flags.Parse(argc, argv, &help);
#ifndef TANDEM_COMMON_UTIL_CLI_FLAGS_H_
#define TANDEM_COMMON_UTIL_CLI_FLAGS_H_

#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace tandem {

class FlagSet {
 public:
  // Returns "" when `value` is fine, else what is wrong with it ("expects ..., got '...'").
  using ValueParser = std::function<std::string(std::string_view value)>;

  // --name (no value) sets *dst to `value`.
  void Switch(const std::string& name, bool* dst, bool value = true);
  void String(const std::string& name, std::string* dst);
  void String(const std::string& name, std::optional<std::string>* dst);
  // Integers (any width, signedness checked) and floating point.
  template <typename T>
  void Number(const std::string& name, T* dst);
  template <typename T>
  void Number(const std::string& name, std::optional<T>* dst);
  // Anything else: `parse` stores the value itself or explains what is wrong.
  void Custom(const std::string& name, ValueParser parse);

  // Fills the declared destinations from argv[1..]. Returns "" on success, else one message
  // ("unknown flag --x (see --help)", "--x needs a value", "--x expects an integer, got 'y'").
  // Sets *help and stops at --help or -h.
  std::string Parse(int argc, const char* const* argv, bool* help) const;

 private:
  std::map<std::string, ValueParser> valued_;
  std::map<std::string, std::function<void()>> switches_;
};

// True when `text` is a finite number (strtod syntax), stored in *out.
bool ParseFlagDouble(std::string_view text, double* out);

// True when `text` is a whole number of type T (or any finite number for floating T).
template <typename T>
bool ParseFlagNumber(std::string_view text, T* out) {
  if (text.empty()) return false;
  if constexpr (std::is_floating_point_v<T>) {
    double d = 0;
    bool ok = ParseFlagDouble(text, &d);
    if (ok) *out = static_cast<T>(d);
    return ok;
  } else {
    T v{};
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size()) return false;
    *out = v;
    return true;
  }
}

template <typename T>
void FlagSet::Number(const std::string& name, T* dst) {
  Custom(name, [dst](std::string_view value) -> std::string {
    if (ParseFlagNumber(value, dst)) return "";
    if constexpr (std::is_floating_point_v<T>) return "expects a number";
    if constexpr (std::is_unsigned_v<T>) return "expects a non-negative integer";
    return "expects an integer";
  });
}

template <typename T>
void FlagSet::Number(const std::string& name, std::optional<T>* dst) {
  Custom(name, [dst](std::string_view value) -> std::string {
    T v{};
    if (!ParseFlagNumber(value, &v)) {
      if constexpr (std::is_floating_point_v<T>) return "expects a number";
      if constexpr (std::is_unsigned_v<T>) return "expects a non-negative integer";
      return "expects an integer";
    }
    *dst = v;
    return "";
  });
}

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_CLI_FLAGS_H_
