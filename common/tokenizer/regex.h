// Regular expressions of tokenizer.json files (Split pre-tokenizers, Replace normalizers and
// decoders), run by PCRE2 (8-bit library, UTF + UCP, JIT-compiled where the platform has a JIT).
//
// Hugging Face compiles these patterns with Oniguruma; `TranslateOnigurumaPattern` rewrites the
// constructs whose meaning differs between the two engines so that matching follows Oniguruma:
//   - \s \S: Unicode White_Space (PCRE2's UCP \s also matches U+180E); \w \W \b \B: letters,
//     marks, decimal digits and connector punctuation (PCRE2's UCP \w is L, N and '_');
//   - \h \H: hexadecimal digits (PCRE2: horizontal space); \v: U+000B (PCRE2: vertical space);
//   - \uHHHH; {,n} (= {0,n}); long general-category names (\p{Letter}, \p{Lowercase_Letter});
//   - (?m) is "dot matches newline" (PCRE2's (?s)); ^ and $ are always line anchors.
// Rejected with an error: nested classes ([a[b]]) and class intersection ([a&&b]), whose
// syntax means something else to PCRE2, and inline flags other than i, m and x.
//
// Every match runs under a match limit and a JIT stack limit: a pattern that backtracks
// catastrophically makes the search fail with RESOURCE_EXHAUSTED instead of running unbounded.
// A Regex is immutable after Compile and may be used from many threads at once.
#ifndef TANDEM_COMMON_TOKENIZER_REGEX_H_
#define TANDEM_COMMON_TOKENIZER_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {

// Oniguruma (Hugging Face) pattern syntax -> an equivalent PCRE2 pattern (see above).
absl::StatusOr<std::string> TranslateOnigurumaPattern(std::string_view pattern);

class Regex {
 public:
  // Compiles a pattern given as UTF-8 in Oniguruma syntax. Errors name the pattern
  // ("regex /.../: ...").
  static absl::StatusOr<Regex> Compile(std::string_view pattern);

  // Finds the leftmost match that begins at or after byte `start` of UTF-8 `text`; look-behind
  // and ^ see the text before `start`. Returns false when there is none; RESOURCE_EXHAUSTED
  // when a limit stopped the search; INVALID_ARGUMENT for invalid UTF-8.
  absl::StatusOr<bool> Find(std::string_view text, size_t start, size_t* match_begin,
                            size_t* match_end) const;

  // Calls on_match(begin, end) with the byte bounds of each non-overlapping non-empty match,
  // left to right, the way Hugging Face iterates (an empty match moves the search one code point
  // on and is not reported). Stops early when on_match returns false. On an error (see Find)
  // the matches before the failing search have been reported.
  absl::Status ForEachMatch(std::string_view text,
                            absl::FunctionRef<bool(size_t begin, size_t end)> on_match) const;

  // All matches of ForEachMatch.
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> FindAll(std::string_view text) const;

  // The pattern as given (Oniguruma syntax).
  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;  // the compiled pcre2_code
  Regex() = default;
  // One pcre2_match from byte `start`, without checking UTF-8 again.
  absl::StatusOr<bool> MatchFrom(std::string_view text, size_t start, size_t* match_begin,
                                 size_t* match_end) const;

  std::string pattern_;
  std::shared_ptr<const Code> code_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_REGEX_H_
