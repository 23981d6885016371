// Splits a Jinja template into text, {{ output }} and {% statement %} pieces, applying the
// whitespace rules of the environment Hugging Face renders chat templates with:
// trim_blocks and lstrip_blocks on, keep_trailing_newline off, `-` / `+` modifiers, newlines
// normalized to "\n". Comments are dropped; {% raw %} blocks become text.
#ifndef TANDEM_COMMON_TOKENIZER_JINJA_LEXER_H_
#define TANDEM_COMMON_TOKENIZER_JINJA_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::jinja {

struct ExprToken {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;  // name, operator, or the decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  int line = 0;
};

struct TemplateToken {
  enum class Kind { kText, kOutput, kStatement };
  Kind kind = Kind::kText;
  std::string text;               // kText
  std::vector<ExprToken> tokens;  // kOutput / kStatement, ending with a kEnd token
  int line = 0;
};

absl::StatusOr<std::vector<TemplateToken>> Lex(std::string_view source);

}  // namespace tandem::jinja

#endif  // TANDEM_COMMON_TOKENIZER_JINJA_LEXER_H_
