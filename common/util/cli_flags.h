// Command-line flags for tandem's binaries: "--name value", "--name=value" and "--switch".
// Each binary declares its flags against fields of its options struct, each with the line --help
// shows for it; Parse fills them and reports the first problem as a message naming the flag, and
// Help generates the --help text from the declarations, so no flag goes undocumented.
//
//   FlagSet flags;
//   flags.Section("Input");
//   flags.String("model", &options.model_dir, {"DIR", "Hugging Face model directory"});
//   flags.Number("max-tokens", &options.max_tokens, {"N", "tokens to generate (default 16)"});
//   flags.Switch("chat", &options.chat, "render the prompt with the chat template");
//   bool help = false;
//   std::string error = flags.Parse(argc, argv, &help);
//   if (help) std::fputs(flags.Help("Usage: tandem-x --model DIR [options]\n").c_str(), stdout);
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
#include <vector>

namespace tandem {

// How a flag that takes a value shows in --help: "  --name VALUE_NAME   help".
struct FlagDoc {
  std::string value_name;  // the placeholder after the name: "DIR", "N", "HOST:PORT"
  // What the flag does, its default as "(default X)". Help() wraps it; a '\n' starts a new line
  // (leading spaces after it are kept, for small tables).
  std::string help;
};

class FlagSet {
 public:
  // Returns "" when `value` is fine, else what is wrong with it ("expects ..., got '...'").
  using ValueParser = std::function<std::string(std::string_view value)>;

  // Flags declared from here on are listed under "`title`:" in Help(); sections appear in the
  // order they are first named, a flag declared before any section above them all.
  void Section(std::string title);

  // --name (no value) sets *dst to `value`.
  void Switch(const std::string& name, bool* dst, std::string help, bool value = true);
  void String(const std::string& name, std::string* dst, FlagDoc doc);
  void String(const std::string& name, std::optional<std::string>* dst, FlagDoc doc);
  // Integers (any width, signedness checked) and floating point.
  template <typename T>
  void Number(const std::string& name, T* dst, FlagDoc doc);
  template <typename T>
  void Number(const std::string& name, std::optional<T>* dst, FlagDoc doc);
  // Anything else: `parse` stores the value itself or explains what is wrong.
  void Custom(const std::string& name, FlagDoc doc, ValueParser parse);

  // Fills the declared destinations from argv[1..]. Returns "" on success, else one message
  // ("unknown flag --x (see --help)", "unknown flag --modle (did you mean --model? see --help)",
  // "--x needs a value", "--x expects an integer, got 'y'"). Sets *help and stops at --help or -h.
  std::string Parse(int argc, const char* const* argv, bool* help) const;

  // The --help text: `intro` (the usage line and what the binary does, newline-terminated), a
  // blank line, every declared flag under its section, "--help", then `outro` (notes after the
  // flags, newline-terminated).
  std::string Help(std::string_view intro, std::string_view outro = "") const;

 private:
  struct Listing {
    std::string name;
    std::string value_name;  // "" for a switch
    std::string help;
    std::string section;
  };
  void List(const std::string& name, std::string value_name, std::string help);
  // The declared flag nearest to an unknown `name` (a typo), or "".
  std::string Suggest(std::string_view name) const;

  std::map<std::string, ValueParser> valued_;
  std::map<std::string, std::function<void()>> switches_;
  std::vector<Listing> listings_;  // declaration order; a redeclared flag keeps its place
  std::vector<std::string> sections_;
  std::string current_section_;
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

// What a Number flag of type T says about a value it cannot take.
template <typename T>
std::string NumberFlagProblem() {
  if constexpr (std::is_floating_point_v<T>) return "expects a number";
  if constexpr (std::is_unsigned_v<T>) return "expects a non-negative integer";
  return "expects an integer";
}

template <typename T>
void FlagSet::Number(const std::string& name, T* dst, FlagDoc doc) {
  Custom(name, std::move(doc), [dst](std::string_view value) -> std::string {
    if (ParseFlagNumber(value, dst)) return "";
    return NumberFlagProblem<T>();
  });
}

template <typename T>
void FlagSet::Number(const std::string& name, std::optional<T>* dst, FlagDoc doc) {
  Custom(name, std::move(doc), [dst](std::string_view value) -> std::string {
    T v{};
    if (!ParseFlagNumber(value, &v)) return NumberFlagProblem<T>();
    *dst = v;
    return "";
  });
}

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_CLI_FLAGS_H_
