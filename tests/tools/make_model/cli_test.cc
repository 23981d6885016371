// Runs the tandem-make-model binary: flag handling, exit codes and messages.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "common/model/model_weights.h"
#include "common/model/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/model/test_model_dir.h"
#include "tests/tools/make_model/fake_tokenizer.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

RunResult RunTool(const std::string& args) {
  const std::string cmd =
      std::string(TANDEM_BINARY_DIR) + "/bin/tandem-make-model " + args + " 2>&1";
  RunResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFakeTokenizer(dir_.path());
    tok_ = " --tokenizer " + dir_.file("tokenizer.json");
    out_ = " --out " + dir_.file("model");
  }
  testing::ScopedTempDir dir_;
  std::string tok_, out_;
};

TEST_F(CliTest, Help) {
  RunResult r = RunTool("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("Usage: tandem-make-model"));
  EXPECT_THAT(r.output, HasSubstr("--preset"));
}

TEST_F(CliTest, WritesALoadableModel) {
  RunResult r = RunTool(out_ + tok_ + " --arch qwen3 --dtype f16 --seed 7 --shards 2 --layers=3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Qwen3ForCausalLM"));
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir_.file("model"));
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->config.num_layers, 3);
  EXPECT_EQ(w->config.dtype, DType::kF16);
  EXPECT_EQ(w->store->Files().size(), 2u);
}

TEST_F(CliTest, BadInputFailsWithAMessage) {
  struct Case {
    std::string args;
    const char* expect;
  };
  const Case cases[] = {
      {"", "--out DIR is required"},
      {tok_ + " --arch llama", "--out DIR is required"},
      {out_ + tok_, "--arch is required"},
      {out_ + " --arch llama", "--tokenizer"},
      {out_ + tok_ + " --arch gpt2", "unknown --arch 'gpt2'"},
      {out_ + tok_ + " --arch llama --preset huge", "unknown --preset 'huge'"},
      {out_ + tok_ + " --arch llama --hidden abc",
       "--hidden expects a positive integer, got 'abc'"},
      {out_ + tok_ + " --arch llama --layers -2", "--layers expects a positive integer"},
      {out_ + tok_ + " --arch llama --heads 4x", "--heads expects a positive integer, got '4x'"},
      {out_ + tok_ + " --arch llama --seed -1", "--seed expects a non-negative integer"},
      {out_ + tok_ + " --arch llama --dtype f64", "--dtype must be f32, bf16 or f16"},
      {out_ + tok_ + " --arch llama --frobnicate 1", "unknown flag --frobnicate"},
      {out_ + tok_ + " --arch llama stray", "unexpected argument 'stray'"},
      {out_ + tok_ + " --arch llama --vocab", "--vocab needs a value"},
      {out_ + " --arch llama --tokenizer /nonexistent/tokenizer.json", "/nonexistent/tokenizer"},
  };
  for (const Case& k : cases) {
    RunResult r = RunTool(k.args);
    EXPECT_NE(r.exit_code, 0) << k.args;
    EXPECT_THAT(r.output, HasSubstr(k.expect)) << k.args;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.file("model/model.safetensors")));
}

}  // namespace
}  // namespace tandem
