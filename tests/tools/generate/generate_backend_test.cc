// tandem-generate's --backend: the cpu backend with the options it was given, the machine-readable
// token-id output the GPU comparison with transformers reads (scripts/gpu/compare_transformers.py),
// and --backend cuda failing cleanly in a build without CUDA or on a machine without a GPU (and
// working where there is one).
#include "tools/generate/generate_backend.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/model/model_weights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/test_model_dir.h"
#include "tools/make_model/make_model.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Scratch() {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "/tandem_generate_backend_" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

Result RunCli(const std::string& args) {
  const std::string err_path = Scratch() + "/stderr.txt";
  const std::string cmd =
      std::string(TANDEM_BINARY_DIR) + "/bin/tandem-generate " + args + " 2>" + err_path;
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  r.err.assign(std::istreambuf_iterator<char>(err), {});
  return r;
}

std::vector<nlohmann::json> Lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

// A bf16 model the GPU kernels take (head_dim 64), made once per process.
const std::string& GpuShapedModel() {
  static const std::string dir = [] {
    std::string d = Scratch() + "/gpu-shaped";
    const std::string tok = Llama3TokenizerDir();
    MakeModelOptions o;
    o.out_dir = d;
    o.arch = "qwen3";
    o.hidden = 128;
    o.heads = 2;
    o.kv_heads = 1;
    o.head_dim = 64;
    o.dtype = DType::kBF16;
    o.seed = 3;
    o.tokenizer_path = tok + "/tokenizer.json";
    o.tokenizer_config_path = tok + "/tokenizer_config.json";
    auto made = MakeModel(o);
    EXPECT_TRUE(made.ok()) << made.status();
    return d;
  }();
  return dir;
}

std::string TokenPrompts() {
  const std::string path = Scratch() + "/token_prompts.jsonl";
  std::ofstream(path) << "[128000, 791, 6864, 315, 9822, 374]\n[17, 4, 42]\n";
  return path;
}

constexpr char kGreedy[] = " --max-tokens 6 --temperature 0 --ignore-eos --logprobs 3";

// The output compare_transformers.py parses: per prompt, in order, the prompt ids, N greedy
// tokens and per step the chosen token's logprob and the top K, most likely first, the chosen
// token at their head.
void ExpectGreedyTokenOutput(const std::string& out) {
  std::vector<nlohmann::json> lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["prompt_token_ids"], nlohmann::json({128000, 791, 6864, 315, 9822, 374}));
  EXPECT_EQ(lines[1]["prompt_token_ids"], nlohmann::json({17, 4, 42}));
  for (const nlohmann::json& line : lines) {
    EXPECT_FALSE(line.contains("prompt"));  // token-id prompts have no text
    ASSERT_EQ(line["token_ids"].size(), 6u);
    ASSERT_EQ(line["logprobs"].size(), 6u);
    for (size_t s = 0; s < 6; ++s) {
      const nlohmann::json& step = line["logprobs"][s];
      EXPECT_EQ(step["token_id"], line["token_ids"][s]);
      const nlohmann::json& top = step["top_logprobs"];
      ASSERT_EQ(top.size(), 3u);
      EXPECT_EQ(top[0]["token_id"], step["token_id"]);
      EXPECT_FLOAT_EQ(top[0]["logprob"].get<float>(), step["logprob"].get<float>());
      for (size_t k = 0; k < 3; ++k) {
        const float lp = top[k]["logprob"].get<float>();
        EXPECT_TRUE(std::isfinite(lp) && lp <= 0.0f) << lp;
        if (k > 0) {
          EXPECT_LE(lp, top[k - 1]["logprob"].get<float>());
        }
      }
    }
  }
}

// Names that are no backend at all are refused by the flags (BadBackendFlagsExitTwo); a kind
// tandem-generate does not run is refused here.
TEST(GenerateBackendTest, CheckAcceptsCpuAndRejectsOtherKinds) {
  GenerateOptions o;
  EXPECT_TRUE(CheckGenerateBackend(o).ok());
  o.backend = BackendKind::kSim;
  absl::Status s = CheckGenerateBackend(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--backend must be cpu or cuda, not 'sim'"));
}

TEST(GenerateBackendTest, CudaIsUnimplementedWithoutCudaAndUnavailableWithoutAGpu) {
  GenerateOptions o;
  o.backend = BackendKind::kCuda;
  absl::Status s = CheckGenerateBackend(o);
  if (!GenerateHasCuda()) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(s.message(), HasSubstr("this build has no CUDA"));
  } else if (!s.ok()) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr("--backend cuda: no usable GPU ("));
  }
}

TEST(GenerateBackendTest, CpuBackendGetsThePoolAndBlockOptions) {
  auto weights = LoadModelWeights(TestModelDir("llama"));
  ASSERT_TRUE(weights.ok()) << weights.status();
  GenerateOptions o;
  o.block_size = 8;
  o.num_kv_blocks = 37;
  o.num_threads = 1;
  auto backend = CreateGenerateBackend(o, *weights);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->name(), "cpu");
  EXPECT_EQ((*backend)->kv_layout().block_size, 8);
  EXPECT_EQ((*backend)->kv_layout().num_blocks, 37);
  EXPECT_EQ((*backend)->config().vocab_size, weights->config.vocab_size);
  o.backend = BackendKind::kSim;
  EXPECT_EQ(CreateGenerateBackend(o, *weights).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GenerateBackendCliTest, CpuIsTheDefaultAndPrintsGreedyTokensWithTopLogprobs) {
  const std::string model = "--model " + TestModelDir("llama") + " --prompts-file " +
                            TokenPrompts() + kGreedy + " --threads 2";
  Result plain = RunCli(model);
  Result cpu = RunCli(model + " --backend cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ExpectGreedyTokenOutput(cpu.out);
  EXPECT_EQ(cpu.out, plain.out);
  EXPECT_THAT(cpu.err, HasSubstr("on the cpu backend"));
}

TEST(GenerateBackendCliTest, CudaWorksOrFailsCleanly) {
  GenerateOptions o;
  o.backend = BackendKind::kCuda;
  const absl::Status gpu = CheckGenerateBackend(o);
  Result r = RunCli("--model " + GpuShapedModel() + " --prompts-file " + TokenPrompts() + kGreedy +
                    " --backend cuda --max-model-len 256");
  if (gpu.ok()) {  // a GPU machine
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ExpectGreedyTokenOutput(r.out);
    EXPECT_THAT(r.err, HasSubstr("on the cuda backend"));
    return;
  }
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("tandem-generate: " + std::string(gpu.message())));
  // Nothing was loaded first: the check comes before the model.
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("KV pool")));
}

TEST(GenerateBackendCliTest, BadBackendFlagsExitTwo) {
  const std::string model = "--model " + TestModelDir("llama") + " --prompt hi";
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {" --backend gpu", "--backend must be cpu or cuda, not 'gpu'"},
           {" --backend sim", "--backend must be cpu or cuda, not 'sim'"},
           {" --backend", "--backend needs a value"},
           {" --backend cuda --cuda-device -1", "--cuda-device must be >= 0"},
           {" --backend cuda --max-model-len -5", "--max-model-len must be >= 0"},
           {" --backend cuda --cuda-device one", "--cuda-device expects"}}) {
    Result r = RunCli(model + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

TEST(GenerateBackendCliTest, HelpDescribesTheBackendAndTheLogprobsOutput) {
  Result r = RunCli("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--backend cpu|cuda"));
  EXPECT_THAT(r.out, HasSubstr("\"top_logprobs\""));
}

}  // namespace
}  // namespace tandem
