// The {"String": ...} / {"Regex": ...} patterns of tokenizer.json (Split, Replace).
//
// Matching works on UTF-8 text with byte offsets. When the regex engine gives up on a search (a
// pattern that backtracks catastrophically hits the match limit, see regex.h), the rest of the
// text from that search on is treated as containing no match: the result is still a split of
// the whole text, and the cost stays bounded. The event is logged.
#ifndef TANDEM_COMMON_TOKENIZER_PATTERN_H_
#define TANDEM_COMMON_TOKENIZER_PATTERN_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/tokenizer/regex.h"
#include "nlohmann/json.hpp"

namespace tandem {

class TextPattern {
 public:
  // `config` is the pattern object; `where` names it in errors.
  static absl::StatusOr<TextPattern> FromJson(const nlohmann::json& config, std::string_view where);
  // A literal UTF-8 string.
  static TextPattern Literal(std::string literal);

  // Calls on_match(begin, end) for each non-overlapping non-empty match in valid UTF-8 `text`,
  // left to right, with byte offsets; stops when on_match returns false.
  void ForEachMatch(std::string_view text,
                    absl::FunctionRef<bool(size_t begin, size_t end)> on_match) const;

  // All matches of ForEachMatch.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

  // Replaces every match in UTF-8 `text` with `content`.
  std::string ReplaceAll(std::string_view text, std::string_view content) const;

 private:
  std::string literal_;
  std::optional<Regex> regex_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_PATTERN_H_
