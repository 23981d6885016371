#include "tools/generate/prompt_input.h"

#include <fstream>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tandem {

absl::StatusOr<PromptInput> ParsePromptLine(std::string_view line, const std::string& where) {
  nlohmann::json value = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not valid JSON"));
  }
  PromptInput input;
  if (value.is_string()) {
    input.kind = PromptInput::Kind::kText;
    input.text = value.get<std::string>();
    return input;
  }
  if (!value.is_array() || value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where,
                     ": expected a JSON string, a non-empty array of token ids, or an array of "
                     "{\"role\", \"content\"} messages"));
  }
  if (value[0].is_object()) {
    input.kind = PromptInput::Kind::kMessages;
    for (size_t i = 0; i < value.size(); ++i) {
      const nlohmann::json& m = value[i];
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          !m.contains("content") || !m["content"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": message ", i, " needs string fields \"role\" and \"content\""));
      }
      input.messages.emplace_back(m["role"].get<std::string>(), m["content"].get<std::string>());
    }
    return input;
  }
  input.kind = PromptInput::Kind::kTokenIds;
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& t = value[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<TokenId>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": token id at index ", i, " is not a non-negative integer"));
    }
    input.token_ids.push_back(static_cast<TokenId>(t.get<int64_t>()));
  }
  return input;
}

absl::StatusOr<std::vector<PromptInput>> ReadPromptsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open prompts file"));
  std::vector<PromptInput> prompts;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    auto prompt = ParsePromptLine(line, absl::StrCat(path, ":", line_no));
    if (!prompt.ok()) return prompt.status();
    prompts.push_back(*std::move(prompt));
  }
  if (prompts.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no prompts"));
  return prompts;
}

}  // namespace tandem
