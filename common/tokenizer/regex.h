// A small backtracking regular-expression engine with Oniguruma semantics (leftmost match,
// alternatives tried in order, greedy quantifiers that give back) for the patterns found in
// tokenizer.json files: Split pre-tokenizers (GPT-2, Llama 3, Qwen2/3, ...) and Replace
// normalizers/decoders. RE2 cannot be used for these because they rely on look-ahead
// (`\s+(?!\S)`) and because RE2's `\s` is ASCII-only while Hugging Face's is Unicode.
//
// Supported: literals and escapes (\t \n \r \f \v \e \0 \xHH \x{H..} \uHHHH, escaped
// punctuation), `.`, classes `[...]` with ranges and negation, \s \S \d \D \w \W, \p{..} \P{..}
// (general categories such as L, Lu, N, Nd, P, and scripts such as Han), `^` `$` \A \z \Z,
// groups `(...)` `(?:...)` `(?<name>...)`, case-insensitive `(?i:...)` / `(?i)`, look-ahead
// `(?=...)` `(?!...)`, quantifiers * + ? {n} {n,} {n,m} and their lazy forms.
// Not supported (rejected with an error): back-references, look-behind, atomic groups,
// possessive quantifiers, nested classes, and unbounded repetition of a sub-pattern that can
// match the empty string.
#ifndef TANDEM_COMMON_TOKENIZER_REGEX_H_
#define TANDEM_COMMON_TOKENIZER_REGEX_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {

class Regex {
 public:
  // Compiles a pattern given as UTF-8.
  static absl::StatusOr<Regex> Compile(std::string_view pattern);

  // Finds the leftmost match that begins at or after `start`. On success stores its bounds
  // (code point indices into `text`) and returns true.
  bool Find(std::u32string_view text, size_t start, size_t* match_begin, size_t* match_end) const;

  // All non-overlapping matches as [begin, end) pairs, scanning left to right. An empty match
  // advances the scan by one code point.
  std::vector<std::pair<size_t, size_t>> FindAll(std::u32string_view text) const;

  const std::string& pattern() const { return pattern_; }

  // Implementation types, public so the compiler and matcher translation units can share them.
  struct ClassItem {
    enum class Kind : uint8_t { kRange, kCategoryMask, kScript, kWhitespace, kWord, kDigit };
    Kind kind = Kind::kRange;
    bool negated = false;
    char32_t lo = 0, hi = 0;  // kRange
    uint32_t value = 0;       // category mask or script code
  };
  struct CharClass {
    std::vector<ClassItem> items;
    bool negated = false;
    bool fold = false;  // case-insensitive
    bool Matches(char32_t c) const;
  };
  enum class Op : uint8_t {
    kChar,       // ch (folded when `flag`)
    kClass,      // x = class index
    kAny,        // any code point except '\n'
    kSplit,      // try x first, then y
    kJmp,        // x
    kMatch,      // success
    kLook,       // look-ahead; sub-program at pc + 2 (ends with kMatch); flag = negative
    kLineStart,  // ^
    kLineEnd,    // $
    kTextStart,  // \A
    kTextEnd,    // \z
    kTextEndNl,  // \Z
  };
  struct Inst {
    Op op = Op::kMatch;
    bool flag = false;
    char32_t ch = 0;
    int32_t x = 0, y = 0;
  };

 private:
  Regex() = default;
  // Runs the program from `pc` at `pos`; `depth` is the look-ahead nesting level.
  bool MatchAt(std::u32string_view text, int pc, size_t pos, size_t* end, int depth) const;

  std::string pattern_;
  std::vector<Inst> program_;
  std::vector<CharClass> classes_;

  friend absl::StatusOr<Regex> CompileRegex(std::string_view pattern);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_REGEX_H_
