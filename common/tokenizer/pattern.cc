#include "common/tokenizer/pattern.h"

#include <atomic>

#include "common/tokenizer/json_util.h"
#include "common/tokenizer/unicode/unicode_util.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

// Logs the first regex failure and then every 1000th, so a flood of bad input cannot flood the
// log.
void LogRegexFailure(const absl::Status& status) {
  static std::atomic<uint64_t> failures{0};
  const uint64_t n = failures.fetch_add(1, std::memory_order_relaxed);
  if (n % 1000 == 0) {
    spdlog::warn("tokenizer: {} (the rest of the text is left unsplit; {} such failure(s) so far)",
                 ToStd(status.message()), n + 1);
  }
}

}  // namespace

absl::StatusOr<TextPattern> TextPattern::FromJson(const nlohmann::json& config,
                                                  std::string_view where) {
  if (!config.is_object()) return json_util::FieldError(where, "expected a pattern object");
  if (auto it = config.find("String"); it != config.end() && it->is_string()) {
    return Literal(it->get<std::string>());
  }
  if (auto it = config.find("Regex"); it != config.end() && it->is_string()) {
    auto re = Regex::Compile(it->get<std::string>());
    if (!re.ok())
      return json_util::FieldError(json_util::Field(where, "Regex"), ToStd(re.status().message()));
    TextPattern p;
    p.regex_ = std::move(*re);
    return p;
  }
  return json_util::FieldError(where, "expected {\"String\": ...} or {\"Regex\": ...}");
}

TextPattern TextPattern::Literal(std::string literal) {
  TextPattern p;
  p.literal_ = std::move(literal);
  return p;
}

void TextPattern::ForEachMatch(std::string_view text,
                               absl::FunctionRef<bool(size_t begin, size_t end)> on_match) const {
  if (regex_) {
    if (absl::Status s = regex_->ForEachMatch(text, on_match); !s.ok()) LogRegexFailure(s);
    return;
  }
  // On valid UTF-8 a byte match of a UTF-8 literal starts and ends on code point boundaries.
  if (literal_.empty()) return;
  size_t pos = 0;
  while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
    if (!on_match(pos, pos + literal_.size())) return;
    pos += literal_.size();
  }
}

std::vector<std::pair<size_t, size_t>> TextPattern::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  ForEachMatch(text, [&out](size_t b, size_t e) {
    out.emplace_back(b, e);
    return true;
  });
  return out;
}

std::string TextPattern::ReplaceAll(std::string_view text, std::string_view content) const {
  std::string repaired;
  if (regex_ && !unicode::IsValidUtf8(text)) {
    repaired = unicode::Utf8Lossy(text);
    text = repaired;
  }
  std::string out;
  out.reserve(text.size());
  size_t prev = 0;
  ForEachMatch(text, [&](size_t b, size_t e) {
    out.append(text.substr(prev, b - prev));
    out.append(content);
    prev = e;
    return true;
  });
  out.append(text.substr(prev));
  return out;
}

}  // namespace tandem
