// Parses lexed Jinja templates into a syntax tree, following Jinja2's grammar and operator
// precedence (filters and tests bind tighter than arithmetic; `not` looser than comparisons).
// Statements: if/elif/else, for (with tuple targets, `if` filter, else, break/continue), set
// (including `ns.attr = ...` and block set), macro, generation, raw.
#ifndef TANDEM_COMMON_TOKENIZER_JINJA_PARSER_H_
#define TANDEM_COMMON_TOKENIZER_JINJA_PARSER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/jinja/ast.h"
#include "common/tokenizer/jinja/lexer.h"

namespace tandem::jinja {

absl::StatusOr<Body> Parse(const std::vector<TemplateToken>& tokens);

}  // namespace tandem::jinja

#endif  // TANDEM_COMMON_TOKENIZER_JINJA_PARSER_H_
