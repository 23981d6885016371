// Fuzzes chat template rendering (common/tokenizer/chat_template.h and its Jinja interpreter) on
// both of its inputs. An input is `TEMPLATE` or `TEMPLATE \0 CONVERSATION`:
//   - TEMPLATE (no \0): the template source, rendered with a fixed conversation;
//   - an empty TEMPLATE before the \0: the CONVERSATION rendered with the real Llama 3 and Qwen3
//     templates (from the conformance packages' tokenizer_config.json);
//   - both: that conversation with that template.
// CONVERSATION is JSON: an array of messages, or {"messages": [...], "tools": [...],
// "documents": [...], "add_generation_prompt": bool, "extra": {...}}. Fields a message has besides
// role, content, reasoning_content, tool_calls, tool_call_id and name go into ChatMessage::extra,
// as do non-string contents (lists of parts).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/tokenizer/chat_template.h"
#include "common/tokenizer/tokenizer_config.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/fuzz_common.h"

namespace tandem {
namespace {

using ordered_json = nlohmann::ordered_json;

struct RealTemplate {
  ChatTemplate chat_template;
  std::string bos, eos;
};

std::vector<RealTemplate> LoadRealTemplates() {
  std::vector<RealTemplate> out;
  for (const char* models : {fuzz::kLlama3Models, fuzz::kQwen3Models}) {
    const std::string path = fuzz::SourceDir() + models + "/tokenizer_config.json";
    auto config = ParseTokenizerConfig(fuzz::ReadFileOrDie(path), path);
    FUZZ_CHECK(config.ok());
    auto parsed = ChatTemplate::Parse(config->chat_template);
    FUZZ_CHECK(parsed.ok());
    out.push_back(
        {*std::move(parsed), config->bos_token.value_or(""), config->eos_token.value_or("")});
  }
  return out;
}

std::optional<std::string> StringField(const ordered_json& m, const char* key) {
  auto it = m.find(key);
  if (it == m.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

ChatMessage MessageFromJson(const ordered_json& m) {
  ChatMessage out;
  if (!m.is_object()) {
    out.role = "user";
    if (m.is_string()) out.content = m.get<std::string>();
    return out;
  }
  out.role = StringField(m, "role").value_or("user");
  out.content = StringField(m, "content");
  out.reasoning_content = StringField(m, "reasoning_content");
  out.tool_call_id = StringField(m, "tool_call_id");
  out.name = StringField(m, "name");
  if (auto it = m.find("tool_calls"); it != m.end()) out.tool_calls = *it;
  out.extra = ordered_json::object();
  for (auto it = m.begin(); it != m.end(); ++it) {
    const std::string& key = it.key();
    if (key == "role" || key == "reasoning_content" || key == "tool_call_id" || key == "name" ||
        key == "tool_calls") {
      continue;
    }
    if (key == "content" && (it->is_string() || it->is_null())) continue;
    out.extra[key] = *it;
  }
  return out;
}

ChatTemplateInputs InputsFromJson(std::string_view text) {
  ChatTemplateInputs inputs;
  inputs.now = 1700000000;  // strftime_now() is deterministic
  ordered_json doc = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Not JSON: one user turn with the bytes as they are.
    inputs.messages.push_back({.role = "user", .content = std::string(text)});
    inputs.add_generation_prompt = true;
    return inputs;
  }
  const ordered_json* messages = &doc;
  if (doc.is_object()) {
    auto get = [&doc](const char* key) -> const ordered_json* {
      auto it = doc.find(key);
      return it == doc.end() ? nullptr : &*it;
    };
    messages = get("messages");
    if (const ordered_json* v = get("tools")) inputs.tools = *v;
    if (const ordered_json* v = get("documents")) inputs.documents = *v;
    if (const ordered_json* v = get("extra")) inputs.extra_context = *v;
    if (const ordered_json* v = get("add_generation_prompt"); v != nullptr && v->is_boolean()) {
      inputs.add_generation_prompt = v->get<bool>();
    }
  }
  if (messages != nullptr && messages->is_array()) {
    for (const ordered_json& m : *messages) inputs.messages.push_back(MessageFromJson(m));
  }
  return inputs;
}

ChatTemplateInputs FixedInputs() {
  ChatTemplateInputs inputs;
  inputs.now = 1700000000;
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  inputs.add_generation_prompt = true;
  inputs.messages.push_back({.role = "system", .content = "You are terse."});
  inputs.messages.push_back({.role = "user", .content = "What is 2+2?"});
  ChatMessage call{.role = "assistant"};
  call.tool_calls = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}])");
  inputs.messages.push_back(std::move(call));
  inputs.messages.push_back({.role = "tool", .content = "4", .tool_call_id = "call_0"});
  inputs.messages.push_back({.role = "assistant", .content = "4", .reasoning_content = "2+2=4"});
  inputs.messages.push_back({.role = "user", .content = "Thanks."});
  inputs.tools = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}])");
  return inputs;
}

}  // namespace
}  // namespace tandem

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<tandem::RealTemplate> real = tandem::LoadRealTemplates();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view source = input.substr(0, split);
  if (split == std::string_view::npos) {
    auto parsed = tandem::ChatTemplate::Parse(source);
    if (parsed.ok()) (void)parsed->Render(tandem::FixedInputs());
    return 0;
  }
  tandem::ChatTemplateInputs inputs = tandem::InputsFromJson(input.substr(split + 1));
  if (source.empty()) {
    for (const tandem::RealTemplate& t : real) {
      inputs.bos_token = t.bos;
      inputs.eos_token = t.eos;
      (void)t.chat_template.Render(inputs);
    }
    return 0;
  }
  auto parsed = tandem::ChatTemplate::Parse(source);
  if (parsed.ok()) (void)parsed->Render(inputs);
  return 0;
}
