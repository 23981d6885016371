// The {"String": ...} / {"Regex": ...} patterns of tokenizer.json (Split, Replace).
#ifndef TANDEM_COMMON_TOKENIZER_PATTERN_H_
#define TANDEM_COMMON_TOKENIZER_PATTERN_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/regex.h"
#include "nlohmann/json.hpp"

namespace tandem {

class TextPattern {
 public:
  // `config` is the pattern object; `where` names it in errors.
  static absl::StatusOr<TextPattern> FromJson(const nlohmann::json& config, std::string_view where);
  static TextPattern Literal(std::u32string literal);

  // Non-overlapping matches, left to right, as code point [begin, end) ranges.
  std::vector<std::pair<size_t, size_t>> FindAll(std::u32string_view text) const;

  // Replaces every match in UTF-8 `text` with `content`.
  std::string ReplaceAll(std::string_view text, std::string_view content) const;

 private:
  std::u32string literal_;
  std::optional<Regex> regex_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_PATTERN_H_
