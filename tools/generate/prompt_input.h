// Prompts for tandem-generate: text, token ids, or chat messages, read from a JSON-lines file.
#ifndef TANDEM_TOOLS_GENERATE_PROMPT_INPUT_H_
#define TANDEM_TOOLS_GENERATE_PROMPT_INPUT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/types/dtype.h"

namespace tandem {

struct PromptInput {
  enum class Kind { kText, kTokenIds, kMessages };
  Kind kind = Kind::kText;
  std::string text;                                           // kText
  std::vector<TokenId> token_ids;                             // kTokenIds
  std::vector<std::pair<std::string, std::string>> messages;  // kMessages: (role, content)
};

// Parses one line: a JSON string (text), an array of integers (token ids), or an array of
// {"role", "content"} objects (chat messages). `where` (e.g. "prompts.jsonl:3") prefixes errors.
absl::StatusOr<PromptInput> ParsePromptLine(std::string_view line, const std::string& where);

// Reads every non-blank line of `path`. InvalidArgument names the file and line of a bad one;
// an empty file is an error too.
absl::StatusOr<std::vector<PromptInput>> ReadPromptsFile(const std::string& path);

}  // namespace tandem

#endif  // TANDEM_TOOLS_GENERATE_PROMPT_INPUT_H_
