#include "common/util/cli_flags.h"

#include <cmath>
#include <cstdlib>

namespace tandem {

bool ParseFlagDouble(std::string_view text, double* out) {
  std::string s(text);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(d)) return false;
  *out = d;
  return true;
}

void FlagSet::Switch(const std::string& name, bool* dst, bool value) {
  switches_[name] = [dst, value] { *dst = value; };
}

void FlagSet::String(const std::string& name, std::string* dst) {
  Custom(name, [dst](std::string_view value) {
    *dst = std::string(value);
    return std::string();
  });
}

void FlagSet::String(const std::string& name, std::optional<std::string>* dst) {
  Custom(name, [dst](std::string_view value) {
    *dst = std::string(value);
    return std::string();
  });
}

void FlagSet::Custom(const std::string& name, ValueParser parse) {
  valued_[name] = std::move(parse);
}

std::string FlagSet::Parse(int argc, const char* const* argv, bool* help) const {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return "";
    }
    if (arg.substr(0, 2) != "--" || arg.size() == 2) {
      return "unexpected argument '" + std::string(arg) + "'";
    }
    std::string name(arg.substr(2));
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (auto sw = switches_.find(name); sw != switches_.end()) {
      if (value.has_value()) return "--" + name + " takes no value";
      sw->second();
      continue;
    }
    auto flag = valued_.find(name);
    if (flag == valued_.end()) return "unknown flag --" + name + " (see --help)";
    if (!value.has_value()) {
      if (i + 1 >= argc) return "--" + name + " needs a value";
      value = argv[++i];
    }
    std::string problem = flag->second(*value);
    if (!problem.empty()) return "--" + name + " " + problem + ", got '" + *value + "'";
  }
  return "";
}

}  // namespace tandem
