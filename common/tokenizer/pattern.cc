#include "common/tokenizer/pattern.h"

#include "common/tokenizer/json_util.h"
#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {

absl::StatusOr<TextPattern> TextPattern::FromJson(const nlohmann::json& config,
                                                  std::string_view where) {
  if (!config.is_object()) return json_util::FieldError(where, "expected a pattern object");
  if (auto it = config.find("String"); it != config.end() && it->is_string()) {
    return Literal(unicode::Utf8ToCodePoints(it->get<std::string>()));
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

TextPattern TextPattern::Literal(std::u32string literal) {
  TextPattern p;
  p.literal_ = std::move(literal);
  return p;
}

std::vector<std::pair<size_t, size_t>> TextPattern::FindAll(std::u32string_view text) const {
  if (regex_) return regex_->FindAll(text);
  std::vector<std::pair<size_t, size_t>> out;
  if (literal_.empty()) return out;
  size_t pos = 0;
  while ((pos = text.find(literal_, pos)) != std::u32string_view::npos) {
    out.emplace_back(pos, pos + literal_.size());
    pos += literal_.size();
  }
  return out;
}

std::string TextPattern::ReplaceAll(std::string_view text, std::string_view content) const {
  if (!regex_) {
    // Literal patterns work directly on the UTF-8 bytes.
    const std::string needle = unicode::CodePointsToUtf8(literal_);
    if (needle.empty()) return std::string(text);
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (true) {
      const size_t hit = text.find(needle, pos);
      if (hit == std::string_view::npos) break;
      out.append(text.substr(pos, hit - pos));
      out.append(content);
      pos = hit + needle.size();
    }
    out.append(text.substr(pos));
    return out;
  }
  const std::u32string cps = unicode::Utf8ToCodePoints(text);
  std::string out;
  size_t prev = 0;
  for (auto [b, e] : regex_->FindAll(cps)) {
    out += unicode::CodePointsToUtf8(std::u32string_view(cps).substr(prev, b - prev));
    out.append(content);
    prev = e;
  }
  out += unicode::CodePointsToUtf8(std::u32string_view(cps).substr(prev));
  return out;
}

}  // namespace tandem
