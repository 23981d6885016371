// A Jinja2 template interpreter for chat templates: lexer (lexer.h), parser (parser.h) and the
// evaluator here. Semantics follow Jinja2 3.1 in the environment Hugging Face transformers
// uses for chat templates (trim_blocks, lstrip_blocks, loop controls, Python value semantics,
// default Undefined: printing it gives "", using it in arithmetic or attribute access fails).
#ifndef TANDEM_COMMON_TOKENIZER_JINJA_TEMPLATE_H_
#define TANDEM_COMMON_TOKENIZER_JINJA_TEMPLATE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/tokenizer/jinja/ast.h"
#include "common/tokenizer/jinja/value.h"

namespace tandem::jinja {

class Template {
 public:
  // Fails with InvalidArgument naming the line for syntax errors and unsupported constructs.
  static absl::StatusOr<Template> Parse(std::string_view source);

  // Renders with `globals` as the template's variables (range, namespace and dict are added).
  // Errors (undefined attribute access, raise_exception(), type errors) name the line.
  absl::StatusOr<std::string> Render(const ValueDict& globals) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace tandem::jinja

#endif  // TANDEM_COMMON_TOKENIZER_JINJA_TEMPLATE_H_
