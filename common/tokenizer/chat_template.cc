#include "common/tokenizer/chat_template.h"

#include "common/util/status_macros.h"

namespace tandem {
namespace {

using jinja::Value;
using jinja::ValueDict;

Value MessageValue(const ChatMessage& m) {
  ValueDict d;
  d.Set("role", Value(m.role));
  d.Set("content", m.content ? Value(*m.content) : Value::MakeNone());
  if (m.reasoning_content) d.Set("reasoning_content", Value(*m.reasoning_content));
  if (!m.tool_calls.is_null()) d.Set("tool_calls", Value::FromJson(m.tool_calls));
  if (m.tool_call_id) d.Set("tool_call_id", Value(*m.tool_call_id));
  if (m.name) d.Set("name", Value(*m.name));
  if (m.extra.is_object()) {
    for (const auto& [k, v] : m.extra.items()) d.Set(k, Value::FromJson(v));
  }
  return Value(std::move(d));
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::Parse(source));
  return ChatTemplate(std::move(t));
}

absl::StatusOr<std::string> ChatTemplate::Render(const ChatTemplateInputs& inputs) const {
  ValueDict globals;
  jinja::ValueList messages;
  for (const ChatMessage& m : inputs.messages) messages.push_back(MessageValue(m));
  globals.Set("messages", Value(std::move(messages)));
  globals.Set("tools", inputs.tools.is_null() ? Value::MakeNone() : Value::FromJson(inputs.tools));
  globals.Set("documents",
              inputs.documents.is_null() ? Value::MakeNone() : Value::FromJson(inputs.documents));
  globals.Set("add_generation_prompt", Value(inputs.add_generation_prompt));
  globals.Set("bos_token", Value(inputs.bos_token));
  globals.Set("eos_token", Value(inputs.eos_token));
  globals.Set(
      "raise_exception",
      Value(jinja::Function([](const jinja::CallArgs& args) -> absl::StatusOr<Value> {
        const Value* msg = args.Get(0, "message");
        return absl::InvalidArgumentError("chat template raised: " + (msg ? msg->Str() : ""));
      })));
  const std::time_t now = inputs.now.value_or(std::time(nullptr));
  globals.Set("strftime_now",
              Value(jinja::Function([now](const jinja::CallArgs& args) -> absl::StatusOr<Value> {
                const Value* fmt = args.Get(0, "format");
                if (fmt == nullptr || !fmt->is_string()) {
                  return absl::InvalidArgumentError("strftime_now() needs a format string");
                }
                std::tm local{};
                localtime_r(&now, &local);
                char buf[256];
                const size_t n = std::strftime(buf, sizeof(buf), fmt->as_string().c_str(), &local);
                return Value(std::string(buf, n));
              })));
  if (inputs.extra_context.is_object()) {
    for (const auto& [k, v] : inputs.extra_context.items()) globals.Set(k, Value::FromJson(v));
  }
  return template_.Render(globals);
}

}  // namespace tandem
