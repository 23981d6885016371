// OpenAI request bodies → v1::GenerateRequest + RunOptions + output options: every parameter's
// mapping onto the proto, the endpoints' defaults, and a 400 naming the parameter for every kind
// of bad input (malformed JSON, invalid UTF-8, unknown fields, wrong types, out-of-range values,
// unsupported parameters).
#include "router/http/openai_request.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/http/openai_error.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

OpenAiRequest ParseOk(OpenAiEndpoint endpoint, const std::string& body) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body);
  EXPECT_TRUE(r.ok()) << body << " → " << r.status();
  return r.ok() ? *std::move(r) : OpenAiRequest{};
}

OpenAiRequest Completions(const std::string& fields) {
  return ParseOk(OpenAiEndpoint::kCompletions, "{\"prompt\": \"Hi\"" + fields + "}");
}

OpenAiRequest Chat(const std::string& fields) {
  return ParseOk(OpenAiEndpoint::kChatCompletions,
                 R"({"messages": [{"role": "user", "content": "Hi"}])" + fields + "}");
}

// The body is refused with a 400 that names `param` and whose message contains `message`.
void ExpectBad(OpenAiEndpoint endpoint, const std::string& body, const std::string& param,
               const std::string& message = "") {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body);
  ASSERT_FALSE(r.ok()) << "accepted: " << body;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  EXPECT_EQ(ParamOf(r.status()), param) << body << " → " << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(message)) << body;
  const OpenAiError e = ErrorFromParseStatus(r.status());
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(e.param, param);
}

void BadCompletions(const std::string& fields, const std::string& param,
                    const std::string& message = "") {
  ExpectBad(OpenAiEndpoint::kCompletions, "{\"prompt\": \"Hi\"" + fields + "}", param, message);
}

void BadChat(const std::string& fields, const std::string& param, const std::string& message = "") {
  ExpectBad(OpenAiEndpoint::kChatCompletions,
            R"({"messages": [{"role": "user", "content": "Hi"}])" + fields + "}", param, message);
}

TEST(OpenAiRequestTest, CompletionsDefaults) {
  OpenAiRequest r = Completions("");
  EXPECT_EQ(r.request.text(), "Hi");
  EXPECT_EQ(r.run_options.api, RequestApi::kCompletions);
  EXPECT_FALSE(r.run_options.unset_max_tokens_fills_context);
  ASSERT_TRUE(r.request.sampling().has_max_tokens());
  EXPECT_EQ(r.request.sampling().max_tokens(), 16);  // OpenAI's default, set explicitly
  EXPECT_FALSE(r.request.sampling().has_temperature());
  EXPECT_FALSE(r.request.sampling().has_logprobs());
  EXPECT_FALSE(r.request.sampling().has_seed());
  EXPECT_FALSE(r.request.has_add_special_tokens());
  EXPECT_FALSE(r.request.has_skip_special_tokens());
  EXPECT_EQ(r.request.model(), "");
  EXPECT_EQ(r.output.endpoint, OpenAiEndpoint::kCompletions);
  EXPECT_FALSE(r.output.stream);
  EXPECT_FALSE(r.output.include_usage);
  EXPECT_EQ(r.output.logprobs, -1);
  EXPECT_FALSE(r.output.return_token_ids);
}

TEST(OpenAiRequestTest, ChatDefaultsFillTheContext) {
  OpenAiRequest r = Chat("");
  EXPECT_EQ(r.run_options.api, RequestApi::kChatCompletions);
  EXPECT_TRUE(r.run_options.unset_max_tokens_fills_context);
  EXPECT_FALSE(r.request.sampling().has_max_tokens());
  ASSERT_EQ(r.request.chat().messages_size(), 1);
  EXPECT_EQ(r.request.chat().messages(0).role(), "user");
  EXPECT_EQ(r.request.chat().messages(0).content(), "Hi");
  EXPECT_EQ(r.output.endpoint, OpenAiEndpoint::kChatCompletions);
}

TEST(OpenAiRequestTest, MaxTokensAndMaxCompletionTokens) {
  EXPECT_EQ(Completions(R"(, "max_tokens": 7)").request.sampling().max_tokens(), 7);
  EXPECT_EQ(Completions(R"(, "max_completion_tokens": 9)").request.sampling().max_tokens(), 9);
  OpenAiRequest chat = Chat(R"(, "max_completion_tokens": 5)");
  EXPECT_EQ(chat.request.sampling().max_tokens(), 5);
  EXPECT_FALSE(chat.run_options.unset_max_tokens_fills_context);
  EXPECT_EQ(Chat(R"(, "max_tokens": 6)").request.sampling().max_tokens(), 6);
  EXPECT_EQ(
      Chat(R"(, "max_tokens": 6, "max_completion_tokens": 6)").request.sampling().max_tokens(), 6);
  EXPECT_EQ(Completions(R"(, "max_tokens": 3.0)").request.sampling().max_tokens(), 3);
  // null is "not given".
  EXPECT_TRUE(Chat(R"(, "max_tokens": null)").run_options.unset_max_tokens_fills_context);

  BadChat(R"(, "max_tokens": 6, "max_completion_tokens": 7)", "max_completion_tokens", "disagree");
  BadCompletions(R"(, "max_tokens": -1)", "max_tokens", ">= 1");
  BadCompletions(R"(, "max_tokens": 0)", "max_tokens", ">= 1");
  BadCompletions(R"(, "max_tokens": 1.5)", "max_tokens", "integer");
  BadCompletions(R"(, "max_tokens": "10")", "max_tokens", "integer");
  BadCompletions(R"(, "max_tokens": 10000000000)", "max_tokens", "<= 2147483647");
  BadChat(R"(, "max_completion_tokens": -5)", "max_completion_tokens");
}

TEST(OpenAiRequestTest, SamplingParametersMapOntoTheProto) {
  OpenAiRequest r = Completions(
      R"(, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 1234,
         "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
         "ignore_eos": true, "stop_token_ids": [5, 7])");
  const v1::SamplingParams& s = r.request.sampling();
  EXPECT_FLOAT_EQ(s.temperature(), 0.5f);
  EXPECT_FLOAT_EQ(s.top_p(), 0.9f);
  EXPECT_EQ(s.top_k(), 40);
  EXPECT_FLOAT_EQ(s.min_p(), 0.05f);
  EXPECT_EQ(s.seed(), 1234u);
  EXPECT_FLOAT_EQ(s.presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty(), -0.5f);
  EXPECT_FLOAT_EQ(s.repetition_penalty(), 1.1f);
  EXPECT_TRUE(s.ignore_eos());
  EXPECT_THAT(s.stop_token_ids(), ElementsAre(5, 7));

  EXPECT_FLOAT_EQ(Completions(R"(, "temperature": 0)").request.sampling().temperature(), 0.0f);
  EXPECT_TRUE(Completions(R"(, "temperature": 0)").request.sampling().has_temperature());
  EXPECT_EQ(Completions(R"(, "top_k": -1)").request.sampling().top_k(), -1);
  // Negative seeds are valid: the same int64 maps to the same uint64.
  EXPECT_EQ(Completions(R"(, "seed": -1)").request.sampling().seed(), ~uint64_t{0});
  EXPECT_EQ(Completions(R"(, "seed": 18446744073709551615)").request.sampling().seed(),
            ~uint64_t{0});
}

TEST(OpenAiRequestTest, SamplingParametersOutOfRange) {
  BadCompletions(R"(, "temperature": -0.1)", "temperature", ">= 0");
  BadCompletions(R"(, "temperature": "hot")", "temperature", "must be a number");
  BadCompletions(R"(, "temperature": true)", "temperature", "must be a number");
  BadCompletions(R"(, "top_p": 0)", "top_p", "(0, 1]");
  BadCompletions(R"(, "top_p": 1.5)", "top_p");
  BadCompletions(R"(, "top_k": -2)", "top_k", ">= -1");
  BadCompletions(R"(, "top_k": 1.5)", "top_k", "integer");
  BadCompletions(R"(, "min_p": 1.5)", "min_p", "[0, 1]");
  BadCompletions(R"(, "presence_penalty": 3)", "presence_penalty", "[-2, 2]");
  BadCompletions(R"(, "frequency_penalty": -2.5)", "frequency_penalty", "[-2, 2]");
  BadCompletions(R"(, "repetition_penalty": 0)", "repetition_penalty", "> 0");
  BadCompletions(R"(, "seed": "abc")", "seed", "integer");
  BadCompletions(R"(, "seed": 1.5)", "seed", "integer");
  BadCompletions(R"(, "ignore_eos": 1)", "ignore_eos", "boolean");
  BadCompletions(R"(, "stop_token_ids": 5)", "stop_token_ids", "array");
  BadCompletions(R"(, "stop_token_ids": [5, -1])", "stop_token_ids[1]", ">= 0");
  BadCompletions(R"(, "user": 5)", "user", "string");
  BadCompletions(R"(, "model": 5)", "model", "string");
}

TEST(OpenAiRequestTest, StopIsAStringOrAnArrayOfStrings) {
  EXPECT_THAT(Completions(R"(, "stop": "\n")").request.stop(), ElementsAre("\n"));
  EXPECT_THAT(Completions(R"(, "stop": ["a", "bc"])").request.stop(), ElementsAre("a", "bc"));
  EXPECT_TRUE(Completions(R"(, "stop": null)").request.stop().empty());
  EXPECT_TRUE(Completions(R"(, "stop": [])").request.stop().empty());
  BadCompletions(R"(, "stop": 5)", "stop", "a string or an array of strings");
  BadCompletions(R"(, "stop": ["a", 5])", "stop[1]", "string");
  BadCompletions(R"(, "stop": "")", "stop", "empty");
  BadCompletions(R"(, "stop": ["a", ""])", "stop[1]", "empty");
}

TEST(OpenAiRequestTest, OutputOptionsAndVllmExtensions) {
  OpenAiRequest r = Completions(
      R"(, "model": "m", "user": "u1", "stream": true, "stream_options": {"include_usage": true},
         "return_token_ids": true, "skip_special_tokens": false,
         "include_stop_str_in_output": true, "add_special_tokens": false)");
  EXPECT_EQ(r.request.model(), "m");
  EXPECT_EQ(r.output.model, "m");
  EXPECT_TRUE(r.output.stream);
  EXPECT_TRUE(r.output.include_usage);
  EXPECT_TRUE(r.output.return_token_ids);
  ASSERT_TRUE(r.request.has_skip_special_tokens());
  EXPECT_FALSE(r.request.skip_special_tokens());
  EXPECT_TRUE(r.request.include_stop_str_in_output());
  ASSERT_TRUE(r.request.has_add_special_tokens());
  EXPECT_FALSE(r.request.add_special_tokens());

  EXPECT_FALSE(Completions(R"(, "stream": true)").output.include_usage);
  EXPECT_FALSE(Completions(R"(, "stream": true, "stream_options": {"include_usage": false})")
                   .output.include_usage);
  EXPECT_FALSE(Completions(R"(, "stream": false)").output.stream);
  EXPECT_TRUE(Completions(R"(, "stream": true, "stream_options": null)").output.stream);

  BadCompletions(R"(, "stream": "yes")", "stream", "boolean");
  BadCompletions(R"(, "stream_options": {"include_usage": true})", "stream_options",
                 "only allowed when stream is true");
  BadCompletions(R"(, "stream": false, "stream_options": {"include_usage": true})",
                 "stream_options");
  BadCompletions(R"(, "stream": true, "stream_options": {"foo": 1})", "stream_options.foo",
                 "Unrecognized");
  BadCompletions(R"(, "stream": true, "stream_options": {"include_usage": 1})",
                 "stream_options.include_usage", "boolean");
  BadCompletions(R"(, "stream": true, "stream_options": [])", "stream_options", "object");
  BadCompletions(R"(, "return_token_ids": "yes")", "return_token_ids", "boolean");
  // Chat prompts get their special tokens from the template.
  EXPECT_FALSE(Chat(R"(, "add_special_tokens": false)").request.add_special_tokens());
  BadChat(R"(, "add_special_tokens": true)", "add_special_tokens", "chat template");
}

TEST(OpenAiRequestTest, CompletionsPromptForms) {
  EXPECT_EQ(ParseOk(OpenAiEndpoint::kCompletions, R"({"prompt": ["Hello"]})").request.text(),
            "Hello");
  OpenAiRequest ids = ParseOk(OpenAiEndpoint::kCompletions, R"({"prompt": [1, 2, 3]})");
  EXPECT_THAT(ids.request.token_ids().ids(), ElementsAre(1, 2, 3));
  OpenAiRequest nested = ParseOk(OpenAiEndpoint::kCompletions, R"({"prompt": [[4, 5]]})");
  EXPECT_THAT(nested.request.token_ids().ids(), ElementsAre(4, 5));

  const auto bad = [](const std::string& body, const std::string& param,
                      const std::string& message = "") {
    ExpectBad(OpenAiEndpoint::kCompletions, body, param, message);
  };
  bad(R"({"prompt": ["a", "b"]})", "prompt", "only one prompt per request");
  bad(R"({"prompt": [[1], [2]]})", "prompt", "only one prompt per request");
  bad(R"({})", "prompt", "required");
  bad(R"({"prompt": null})", "prompt", "required");
  bad(R"({"prompt": ""})", "prompt", "empty");
  bad(R"({"prompt": []})", "prompt", "empty");
  bad(R"({"prompt": [[]]})", "prompt[0]", "empty");
  bad(R"({"prompt": 5})", "prompt");
  bad(R"({"prompt": [1, "a"]})", "prompt[1]", "integer");
  bad(R"({"prompt": [1, -2]})", "prompt[1]", ">= 0");
  bad(R"({"prompt": [1.5]})", "prompt[0]", "integer");
  bad(R"({"prompt": [{"a": 1}]})", "prompt[0]");
}

TEST(OpenAiRequestTest, ChatMessages) {
  OpenAiRequest r = ParseOk(OpenAiEndpoint::kChatCompletions, R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hello, "},
                                   {"type": "text", "text": "world"}], "name": "bob"},
      {"role": "assistant", "content": null},
      {"role": "developer", "content": "x", "tool_calls": []}]})");
  ASSERT_EQ(r.request.chat().messages_size(), 4);
  EXPECT_EQ(r.request.chat().messages(0).role(), "system");
  EXPECT_EQ(r.request.chat().messages(0).content(), "Be brief.");
  EXPECT_EQ(r.request.chat().messages(1).content(), "Hello, world");  // parts concatenated
  EXPECT_EQ(r.request.chat().messages(2).role(), "assistant");
  EXPECT_EQ(r.request.chat().messages(2).content(), "");
  EXPECT_EQ(r.request.chat().messages(3).role(), "developer");

  const auto bad = [](const std::string& messages, const std::string& param,
                      const std::string& message = "") {
    ExpectBad(OpenAiEndpoint::kChatCompletions, R"({"messages": )" + messages + "}", param,
              message);
  };
  bad("[]", "messages", "empty");
  bad(R"("hi")", "messages", "array");
  bad(R"(["hi"])", "messages[0]", "object");
  bad(R"([{"content": "x"}])", "messages[0].role", "required");
  bad(R"([{"role": 1, "content": "x"}])", "messages[0].role", "string");
  bad(R"([{"role": "wizard", "content": "x"}])", "messages[0].role", "one of");
  bad(R"([{"role": "tool", "content": "x", "tool_call_id": "1"}])", "messages[0].tool_call_id",
      "not supported");
  bad(R"([{"role": "tool", "content": "x"}])", "messages[0].role", "not supported");
  bad(R"([{"role": "user"}])", "messages[0].content", "required");
  bad(R"([{"role": "user", "content": 5}])", "messages[0].content");
  bad(R"([{"role": "user", "content": "x", "mood": "happy"}])", "messages[0].mood", "Unrecognized");
  bad(R"([{"role": "assistant", "content": "x", "tool_calls": [{"id": "1"}]}])",
      "messages[0].tool_calls", "not supported");
  bad(R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])",
      "messages[0].content[0].type", "not supported");
  bad(R"([{"role": "user", "content": [{"type": "text"}]}])", "messages[0].content[0].text",
      "required");
  bad(R"([{"role": "user", "content": [{"type": "text", "text": 5}]}])",
      "messages[0].content[0].text", "string");
  bad(R"([{"role": "user", "content": ["x"]}])", "messages[0].content[0]", "object");
  bad(R"([{"role": "user", "content": "x", "name": 5}])", "messages[0].name", "string");
  ExpectBad(OpenAiEndpoint::kChatCompletions, "{}", "messages", "required");
}

TEST(OpenAiRequestTest, Logprobs) {
  OpenAiRequest c = Completions(R"(, "logprobs": 3)");
  EXPECT_EQ(c.output.logprobs, 3);
  EXPECT_EQ(c.request.sampling().logprobs(), 3);
  EXPECT_EQ(Completions(R"(, "logprobs": 0)").request.sampling().logprobs(), 0);
  EXPECT_FALSE(Completions(R"(, "logprobs": null)").request.sampling().has_logprobs());
  BadCompletions(R"(, "logprobs": 21)", "logprobs", "<= 20");
  BadCompletions(R"(, "logprobs": -1)", "logprobs", ">= 0");
  BadCompletions(R"(, "logprobs": true)", "logprobs", "integer");

  OpenAiRequest chat = Chat(R"(, "logprobs": true, "top_logprobs": 2)");
  EXPECT_EQ(chat.output.logprobs, 2);
  EXPECT_EQ(chat.request.sampling().logprobs(), 2);
  OpenAiRequest chosen_only = Chat(R"(, "logprobs": true)");
  EXPECT_EQ(chosen_only.output.logprobs, 0);
  EXPECT_EQ(chosen_only.request.sampling().logprobs(), 0);
  OpenAiRequest off = Chat(R"(, "logprobs": false)");
  EXPECT_EQ(off.output.logprobs, -1);
  EXPECT_FALSE(off.request.sampling().has_logprobs());
  BadChat(R"(, "top_logprobs": 2)", "top_logprobs", "requires logprobs");
  BadChat(R"(, "logprobs": false, "top_logprobs": 2)", "top_logprobs");
  BadChat(R"(, "logprobs": true, "top_logprobs": 21)", "top_logprobs", "<= 20");
  BadChat(R"(, "logprobs": 2)", "logprobs", "boolean");
}

TEST(OpenAiRequestTest, UnsupportedParametersAreNamed) {
  const auto unsupported = [](OpenAiEndpoint endpoint, const std::string& body,
                              const std::string& param) {
    absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(endpoint, body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(ParamOf(r.status()), param) << body;
    const OpenAiError e = ErrorFromParseStatus(r.status());
    EXPECT_EQ(e.http_status, 400);
    EXPECT_EQ(e.code, "unsupported_parameter") << body;
    EXPECT_THAT(e.message, HasSubstr("not supported")) << body;
  };
  const auto C = OpenAiEndpoint::kCompletions;
  const auto K = OpenAiEndpoint::kChatCompletions;
  const std::string p = R"({"prompt": "Hi", )";
  const std::string m = R"({"messages": [{"role": "user", "content": "Hi"}], )";
  unsupported(C, p + R"("n": 2})", "n");
  unsupported(K, m + R"("n": 3})", "n");
  unsupported(C, p + R"("best_of": 2})", "best_of");
  unsupported(C, p + R"("echo": true})", "echo");
  unsupported(C, p + R"("suffix": "end"})", "suffix");
  unsupported(C, p + R"("logit_bias": {"50256": -100}})", "logit_bias");
  unsupported(K, m + R"("logit_bias": {"1": 5}})", "logit_bias");
  unsupported(K, m + R"("tools": [{"type": "function", "function": {"name": "f"}}]})", "tools");
  unsupported(K, m + R"("tool_choice": "auto"})", "tool_choice");
  unsupported(K, m + R"("functions": [{"name": "f"}]})", "functions");
  unsupported(K, m + R"("function_call": "auto"})", "function_call");
  unsupported(K, m + R"("response_format": {"type": "json_object"}})", "response_format");
  unsupported(K, m + R"("response_format": {"type": "json_schema", "json_schema": {}}})",
              "response_format");
  unsupported(C, p + R"("stream": true, "stream_options": {"continuous_usage_stats": true}})",
              "stream_options.continuous_usage_stats");

  // Their "off" values are accepted.
  ParseOk(C, p + R"("n": 1, "best_of": 1, "echo": false, "suffix": "", "logit_bias": {}})");
  ParseOk(K, m + R"("n": 1, "tools": [], "tool_choice": "none", "functions": null,
                  "response_format": {"type": "text"}, "parallel_tool_calls": false,
                  "logit_bias": null})");
  BadCompletions(R"(, "n": 0)", "n", ">= 1");
  BadChat(R"(, "response_format": {"type": "xml"})", "response_format.type");
  BadChat(R"(, "response_format": "text")", "response_format", "object");
  BadChat(R"(, "tools": {})", "tools", "array");
}

TEST(OpenAiRequestTest, UnknownFieldsAreRefusedByName) {
  BadCompletions(R"(, "temprature": 0.5)", "temprature", "Unrecognized request argument");
  BadChat(R"(, "foo": null)", "foo", "Unrecognized");
  // Endpoint-specific parameters are unknown on the other endpoint.
  BadCompletions(R"(, "top_logprobs": 2)", "top_logprobs", "Unrecognized");
  BadChat(R"(, "echo": false)", "echo", "Unrecognized");
  ExpectBad(OpenAiEndpoint::kChatCompletions, R"({"prompt": "x", "messages": []})", "prompt",
            "Unrecognized");
}

TEST(OpenAiRequestTest, MalformedBodies) {
  const auto bad_body = [](const std::string& body, const std::string& message) {
    ExpectBad(OpenAiEndpoint::kCompletions, body, "", message);
  };
  bad_body("", "not valid JSON");
  bad_body("{", "not valid JSON");
  bad_body(R"({"prompt": "Hi",})", "not valid JSON");
  bad_body("[1, 2]", "must be a JSON object");
  bad_body("\"text\"", "must be a JSON object");
  bad_body("null", "must be a JSON object");
  // Invalid UTF-8 inside a string: nlohmann's parser refuses it.
  bad_body("{\"prompt\": \"\xff\xfe\"}", "not valid JSON");
  bad_body("{\"prompt\": \"\xc3\"}", "not valid JSON");
}

// Red team, issue 14 row 1: 1e400 overflows a double, and nlohmann's parser throws out_of_range
// (not parse_error) for it; that exception used to escape and abort the router.
TEST(OpenAiRequestTest, NumbersBeyondADoubleAreRefusedByName) {
  BadCompletions(R"(, "max_tokens": 1e400)", "max_tokens", "out of range");
  BadCompletions(R"(, "temperature": -1e400)", "temperature", "out of range");
  BadChat(R"(, "seed": 1e99999)", "seed", "out of range");
  ExpectBad(OpenAiEndpoint::kCompletions, R"([1e400])", "", "out of range");
  // Integers beyond 64 bits parse as doubles and are refused by the range checks.
  BadCompletions(R"(, "max_tokens": 123456789012345678901234567890)", "max_tokens");
}

TEST(OpenAiRequestTest, ParserMessagesDoNotLeakTheParsersOwnText) {
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(OpenAiEndpoint::kCompletions, "{not json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("the request body is not valid JSON (at byte "));
  EXPECT_EQ(r.status().message().find("json.exception"), std::string_view::npos);
  r = ParseOpenAiRequest(OpenAiEndpoint::kCompletions, R"({"max_tokens": 1e400})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().find("json.exception"), std::string_view::npos);
}

TEST(OpenAiRequestTest, DeeplyNestedJsonIsRefusedWithoutRecursingToDeath) {
  const int depth = 200000;
  const std::string body =
      "{\"prompt\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(OpenAiEndpoint::kCompletions, body);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(ParamOf(r.status()), "prompt[0][0]");
}

}  // namespace
}  // namespace tandem
