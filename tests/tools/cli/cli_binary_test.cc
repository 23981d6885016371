// tandem-cli as a user runs it, against an in-process fake of the Generate API: streamed text,
// --json lines, the request it sends, server errors and bad flags.
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/fake_generation_service.h"
#include "tests/integration/process_launcher.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CliBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(MissingBinaries({"tandem-cli"}), "");
    FakeGenerationService::Script script;
    script.responses = {TextResponse("Hel", 10), TextResponse("lo ✓", 11)};
    script.responses[0].add_prompt_token_ids(1);
    script.responses[0].add_prompt_token_ids(2);
    script.responses[1].set_finish_reason("length");
    script.responses[1].mutable_usage()->set_prompt_tokens(2);
    script.responses[1].mutable_usage()->set_completion_tokens(2);
    fake_.service().SetScript(script);
  }

  CommandResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"--router", fake_.address()});
    return RunCommand(BinaryPath("tandem-cli"), args, {}, absl::Seconds(60));
  }

  FakeGenerationServer fake_;
};

TEST_F(CliBinaryTest, StreamsTextThenANewline) {
  CommandResult r = Cli({"--prompt", "Hi there"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "Hello ✓\n");
  EXPECT_EQ(r.stderr_text, "");
  ASSERT_EQ(fake_.service().requests().size(), 1u);
  EXPECT_EQ(fake_.service().requests()[0].text(), "Hi there");
}

TEST_F(CliBinaryTest, JsonPrintsOneLinePerResponse) {
  CommandResult r = Cli({"--prompt", "Hi", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  std::vector<nlohmann::json> lines;
  std::istringstream in(r.stdout_text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["text"], "Hel");
  EXPECT_EQ(lines[0]["prompt_token_ids"], nlohmann::json({1, 2}));
  EXPECT_EQ(lines[1]["text"], "lo ✓");
  EXPECT_EQ(lines[1]["finish_reason"], "length");
  EXPECT_EQ(lines[1]["usage"]["completion_tokens"], 2);
}

TEST_F(CliBinaryTest, SendsEveryFlag) {
  CommandResult r = Cli({"--chat", "What?",        "--max-tokens", "5",       "--temperature",
                         "0.5",    "--top-p",      "0.8",          "--top-k", "20",
                         "--seed", "42",           "--stop",       "\n",      "--stop",
                         "END",    "--ignore-eos", "--logprobs",   "3",       "--model",
                         "llama",  "--request-id", "abc"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  ASSERT_EQ(fake_.service().requests().size(), 1u);
  const v1::GenerateRequest req = fake_.service().requests()[0];
  ASSERT_EQ(req.prompt_case(), v1::GenerateRequest::kChat);
  EXPECT_EQ(req.chat().messages(0).content(), "What?");
  EXPECT_EQ(req.sampling().max_tokens(), 5);
  EXPECT_FLOAT_EQ(req.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(req.sampling().top_p(), 0.8f);
  EXPECT_EQ(req.sampling().top_k(), 20);
  EXPECT_EQ(req.sampling().seed(), 42u);
  EXPECT_TRUE(req.sampling().ignore_eos());
  EXPECT_EQ(req.sampling().logprobs(), 3);
  EXPECT_THAT(req.stop(), ElementsAre("\n", "END"));
  EXPECT_EQ(req.model(), "llama");
  EXPECT_EQ(req.request_id(), "abc");
}

TEST_F(CliBinaryTest, TokenIdsPrompt) {
  CommandResult r = Cli({"--token-ids", "791,6864,315"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  ASSERT_EQ(fake_.service().requests().size(), 1u);
  EXPECT_THAT(fake_.service().requests()[0].token_ids().ids(), ElementsAre(791, 6864, 315));
}

TEST_F(CliBinaryTest, ServerErrorExitsOneWithTheStatusMessage) {
  FakeGenerationService::Script script;
  script.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "text: prompt is empty");
  fake_.service().SetScript(script);
  CommandResult r = Cli({"--prompt", ""});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_THAT(r.stderr_text, HasSubstr("tandem-cli: INVALID_ARGUMENT: text: prompt is empty"));
}

TEST_F(CliBinaryTest, FailureAfterTextEndsTheLineFirst) {
  FakeGenerationService::Script script;
  script.responses = {TextResponse("partial", 1)};
  script.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode node lost");
  fake_.service().SetScript(script);
  CommandResult r = Cli({"--prompt", "x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.stdout_text, "partial\n");
  EXPECT_THAT(r.stderr_text, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(r.stderr_text, HasSubstr("decode node lost"));
}

TEST(CliFlagsTest, HelpExitsZero) {
  CommandResult r = RunCommand(BinaryPath("tandem-cli"), {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.stdout_text, HasSubstr("Usage: tandem-cli --router HOST:PORT"));
}

TEST(CliFlagsTest, BadFlagsExitTwoWithAMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"--prompt", "x"}, "--router HOST:PORT is required"},
      {{"--router", "127.0.0.1:1"}, "give exactly one of --prompt TEXT, --chat TEXT"},
      {{"--router", "127.0.0.1:1", "--prompt", "a", "--chat", "b"}, "give exactly one of"},
      {{"--router", "127.0.0.1:1", "--token-ids", "1,x"},
       "--token-ids expects comma-separated non-negative token ids, got '1,x'"},
      {{"--router", "127.0.0.1:1", "--prompt", "a", "--max-tokens", "many"},
       "--max-tokens expects an integer, got 'many'"},
      {{"--router", "127.0.0.1:1", "--prompt", "a", "--temperature", "-1"},
       "--temperature must be >= 0"},
      {{"--router", "127.0.0.1:1", "--prompt", "a", "--frobnicate"}, "unknown flag --frobnicate"},
      {{"--router", "127.0.0.1:1", "--prompt"}, "--prompt needs a value"},
  };
  for (const Case& c : cases) {
    CommandResult r = RunCommand(BinaryPath("tandem-cli"), c.args);
    EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
    EXPECT_THAT(r.stderr_text, HasSubstr("tandem-cli: " + c.message));
  }
}

TEST(CliFlagsTest, UnreachableRouterExitsOne) {
  CommandResult r = RunCommand(BinaryPath("tandem-cli"),
                               {"--router", "127.0.0.1:1", "--prompt", "x", "--timeout-s", "10"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("UNAVAILABLE: cannot reach 127.0.0.1:1"));
}

}  // namespace
}  // namespace tandem
