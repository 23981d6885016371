#include "router/api_keys.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem {
namespace {

// RFC 6750: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
bool IsB64Token(std::string_view s) {
  size_t i = 0;
  while (i < s.size() &&
         (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' || s[i] == '.' ||
          s[i] == '_' || s[i] == '~' || s[i] == '+' || s[i] == '/')) {
    ++i;
  }
  if (i == 0) return false;
  while (i < s.size() && s[i] == '=') ++i;
  return i == s.size();
}

absl::Status CheckKey(std::string_view key, std::string_view where) {
  if (!IsB64Token(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::string_view(where.data(), where.size()),
                     ": an API key must be 1 or more of A-Z a-z 0-9 - . _ ~ + / then "
                     "optional '=' (RFC 6750 b64token)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the API key file ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> keys;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string_view key(line.data(), line.size());
    if (absl::Status s = CheckKey(key, absl::StrCat(path, ":", line_number)); !s.ok()) return s;
    keys.emplace_back(key);
  }
  if (keys.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " holds no API key"));
  return keys;
}

// Compares every byte of `expected`, whatever the first difference.
bool SameKey(std::string_view got, std::string_view expected) {
  unsigned char diff = got.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < got.size() ? static_cast<unsigned char>(got[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

}  // namespace

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  }
  std::string_view rest = authorization.substr(kScheme.size());
  if (rest.front() != ' ') return {};  // 1*SP after the scheme
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  return IsB64Token(rest) ? rest : std::string_view();
}

absl::StatusOr<std::shared_ptr<ApiKeys>> ApiKeys::Create(std::vector<std::string> keys,
                                                         std::string file) {
  for (const std::string& key : keys) {
    if (absl::Status s = CheckKey(key, "--api-key"); !s.ok()) return s;
  }
  std::shared_ptr<ApiKeys> out(new ApiKeys(std::move(keys), std::move(file)));
  if (!out->file_.empty()) {
    if (absl::Status s = out->Reload(); !s.ok()) return s;
  } else {
    absl::MutexLock lock(&out->mu_);
    out->keys_ = out->literal_;
  }
  return out;
}

absl::Status ApiKeys::Reload() {
  if (file_.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> from_file = ReadKeyFile(file_);
  if (!from_file.ok()) return from_file.status();
  std::vector<std::string> keys = literal_;
  keys.insert(keys.end(), from_file->begin(), from_file->end());
  absl::MutexLock lock(&mu_);
  keys_ = std::move(keys);
  return absl::OkStatus();
}

bool ApiKeys::enabled() const {
  absl::MutexLock lock(&mu_);
  return !keys_.empty();
}

size_t ApiKeys::size() const {
  absl::MutexLock lock(&mu_);
  return keys_.size();
}

bool ApiKeys::Authorizes(std::string_view authorization) const {
  const std::string_view token = BearerToken(authorization);
  absl::MutexLock lock(&mu_);
  if (keys_.empty()) return true;
  if (token.empty()) return false;
  bool match = false;
  for (const std::string& key : keys_) match |= SameKey(token, key);  // no early exit
  return match;
}

}  // namespace tandem
