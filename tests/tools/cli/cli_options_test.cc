// tandem-cli's options: token-id lists, validation messages, the request built from flags, and
// the JSON line printed per response.
#include "tools/cli/cli_options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CliOptions Basic() {
  CliOptions o;
  o.router = "127.0.0.1:5000";
  o.prompt = "Hello";
  return o;
}

TEST(ParseTokenIdListTest, CommaSeparated) {
  auto ids = ParseTokenIdList("1, 2,300");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(1, 2, 300));
  EXPECT_FALSE(ParseTokenIdList("").ok());
  EXPECT_FALSE(ParseTokenIdList("1,,2").ok());
  EXPECT_FALSE(ParseTokenIdList("1,x").ok());
  EXPECT_FALSE(ParseTokenIdList("-1").ok());
  EXPECT_FALSE(ParseTokenIdList("99999999999").ok());
}

TEST(ValidateCliOptionsTest, AcceptsEachPromptForm) {
  EXPECT_EQ(ValidateCliOptions(Basic()), "");
  CliOptions chat = Basic();
  chat.prompt.reset();
  chat.chat = "Hi";
  EXPECT_EQ(ValidateCliOptions(chat), "");
  CliOptions ids = Basic();
  ids.prompt.reset();
  ids.token_ids = std::vector<int32_t>{1, 2};
  EXPECT_EQ(ValidateCliOptions(ids), "");
}

TEST(ValidateCliOptionsTest, NamesTheBadFlag) {
  struct Case {
    std::function<void(CliOptions&)> change;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](CliOptions& o) { o.router.clear(); }, "--router HOST:PORT is required"},
      {[](CliOptions& o) { o.router = "localhost"; }, "--router expects HOST:PORT"},
      {[](CliOptions& o) { o.prompt.reset(); }, "give exactly one of"},
      {[](CliOptions& o) { o.chat = "x"; }, "give exactly one of"},
      {[](CliOptions& o) { o.max_tokens = 0; }, "--max-tokens must be >= 1"},
      {[](CliOptions& o) { o.temperature = -0.5f; }, "--temperature must be >= 0"},
      {[](CliOptions& o) { o.top_p = 0; }, "--top-p must be in (0, 1]"},
      {[](CliOptions& o) { o.top_p = 1.5f; }, "--top-p must be in (0, 1]"},
      {[](CliOptions& o) { o.logprobs = 21; }, "--logprobs must be between 0 and 20"},
      {[](CliOptions& o) { o.stop = {""}; }, "--stop needs a non-empty string"},
      {[](CliOptions& o) { o.timeout_s = -1; }, "--timeout-s must be >= 0"},
  };
  for (const Case& c : cases) {
    CliOptions o = Basic();
    c.change(o);
    EXPECT_THAT(ValidateCliOptions(o), HasSubstr(c.message));
  }
}

TEST(BuildGenerateRequestTest, TextWithEverySamplingField) {
  CliOptions o = Basic();
  o.model = "m";
  o.request_id = "req-1";
  o.max_tokens = 8;
  o.temperature = 0;
  o.top_p = 0.9f;
  o.top_k = 40;
  o.seed = 7;
  o.stop = {"\n", "END"};
  o.ignore_eos = true;
  o.logprobs = 2;
  v1::GenerateRequest r = BuildGenerateRequest(o);
  EXPECT_EQ(r.prompt_case(), v1::GenerateRequest::kText);
  EXPECT_EQ(r.text(), "Hello");
  EXPECT_EQ(r.model(), "m");
  EXPECT_EQ(r.request_id(), "req-1");
  EXPECT_EQ(r.sampling().max_tokens(), 8);
  ASSERT_TRUE(r.sampling().has_temperature());  // greedy is sent, not left unset
  EXPECT_EQ(r.sampling().temperature(), 0.0f);
  EXPECT_FLOAT_EQ(r.sampling().top_p(), 0.9f);
  EXPECT_EQ(r.sampling().top_k(), 40);
  EXPECT_EQ(r.sampling().seed(), 7u);
  EXPECT_TRUE(r.sampling().ignore_eos());
  EXPECT_EQ(r.sampling().logprobs(), 2);
  EXPECT_THAT(r.stop(), ElementsAre("\n", "END"));
}

TEST(BuildGenerateRequestTest, UnsetFlagsLeaveTheServersDefaults) {
  v1::GenerateRequest r = BuildGenerateRequest(Basic());
  EXPECT_FALSE(r.sampling().has_temperature());
  EXPECT_FALSE(r.sampling().has_max_tokens());
  EXPECT_FALSE(r.sampling().has_seed());
  EXPECT_FALSE(r.sampling().has_logprobs());
  EXPECT_FALSE(r.sampling().has_top_p());
  EXPECT_FALSE(r.has_add_special_tokens());
}

TEST(BuildGenerateRequestTest, ChatAndTokenIds) {
  CliOptions chat = Basic();
  chat.prompt.reset();
  chat.chat = "What is 2+2?";
  v1::GenerateRequest r = BuildGenerateRequest(chat);
  ASSERT_EQ(r.prompt_case(), v1::GenerateRequest::kChat);
  ASSERT_EQ(r.chat().messages_size(), 1);
  EXPECT_EQ(r.chat().messages(0).role(), "user");
  EXPECT_EQ(r.chat().messages(0).content(), "What is 2+2?");

  CliOptions ids = Basic();
  ids.prompt.reset();
  ids.token_ids = std::vector<int32_t>{791, 6864};
  r = BuildGenerateRequest(ids);
  ASSERT_EQ(r.prompt_case(), v1::GenerateRequest::kTokenIds);
  EXPECT_THAT(r.token_ids().ids(), ElementsAre(791, 6864));
}

TEST(ResponseToJsonLineTest, OneLineWithProtoFieldNames) {
  v1::GenerateResponse response;
  response.set_request_id("r");
  response.set_text("a\nb");
  v1::Token* token = response.add_tokens();
  token->set_id(5);
  token->set_logprob(-0.5f);
  response.set_finish_reason("length");
  response.mutable_usage()->set_prompt_tokens(3);
  response.mutable_usage()->set_completion_tokens(1);
  response.add_prompt_token_ids(1);
  std::string line = ResponseToJsonLine(response);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  nlohmann::json json = nlohmann::json::parse(line);
  EXPECT_EQ(json["text"], "a\nb");
  EXPECT_EQ(json["finish_reason"], "length");
  EXPECT_EQ(json["usage"]["completion_tokens"], 1);
  EXPECT_EQ(json["prompt_token_ids"], nlohmann::json({1}));
  EXPECT_EQ(json["tokens"][0]["id"], 5);
  EXPECT_EQ(json["tokens"][0]["logprob"], -0.5);
}

}  // namespace
}  // namespace tandem
