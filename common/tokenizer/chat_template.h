// Chat templates: renders a model's Jinja `chat_template` (from tokenizer_config.json) the way
// Hugging Face transformers' apply_chat_template does: variables `messages`, `tools`,
// `documents`, `add_generation_prompt`, `bos_token`, `eos_token` and any extra ones (e.g.
// `enable_thinking`), plus the helpers `raise_exception(msg)` and `strftime_now(format)`.
#ifndef TANDEM_COMMON_TOKENIZER_CHAT_TEMPLATE_H_
#define TANDEM_COMMON_TOKENIZER_CHAT_TEMPLATE_H_

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/jinja/template.h"
#include "nlohmann/json.hpp"

namespace tandem {

struct ChatMessage {
  std::string role;
  // Absent content renders as None (assistant turns that only call tools).
  std::optional<std::string> content;
  std::optional<std::string> reasoning_content;
  // OpenAI-style tool calls: [{"type": "function", "function": {"name": ..., "arguments": ...}}].
  nlohmann::ordered_json tool_calls;  // null when absent
  std::optional<std::string> tool_call_id;
  std::optional<std::string> name;
  // Further fields merged into the message object (they win over the ones above), e.g. a
  // list-of-parts "content".
  nlohmann::ordered_json extra;  // null or object
};

struct ChatTemplateInputs {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json tools;      // null or an array of JSON tool schemas
  nlohmann::ordered_json documents;  // null or an array
  // Extra template variables, e.g. {"enable_thinking": false}.
  nlohmann::ordered_json extra_context;  // null or object
  // The time strftime_now() formats; the current time when unset.
  std::optional<std::time_t> now;
};

class ChatTemplate {
 public:
  static absl::StatusOr<ChatTemplate> Parse(std::string_view source);
  absl::StatusOr<std::string> Render(const ChatTemplateInputs& inputs) const;

 private:
  explicit ChatTemplate(jinja::Template t) : template_(std::move(t)) {}
  jinja::Template template_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_CHAT_TEMPLATE_H_
