// On a GPU: a disaggregated request whose KV moves GPU to GPU (prefill and decode nodes both on the
// cuda backend) gives the same greedy tokens as the same request prefilled on the decode node
// itself (colocated), with a bf16 KV pool and with an fp8 one (the prefill node's E4M3 codes and
// scales are what the decode node reads). Skips in builds without CUDA and on machines without an
// NVIDIA GPU.
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"
#include "tools/make_model/make_model.h"

namespace tandem::testing {
namespace {

constexpr int kRequests = 16;
constexpr int kGpuMaxTokens = 12;

// A bf16 Llama model with head_dim 64 (the GPU attention kernels take 64 or 128).
std::string GpuModelDir() {
  const std::string dir = MakeTestTempDir("gpu_model_") + "/llama-hd64";
  const std::string tok = Llama3TokenizerDir();
  MakeModelOptions options;
  options.out_dir = dir;
  options.arch = "llama";
  options.preset = "small";
  options.head_dim = 64;
  options.heads = 4;
  options.kv_heads = 2;
  options.dtype = DType::kBF16;
  options.seed = 5;
  options.tokenizer_path = tok + "/tokenizer.json";
  options.tokenizer_config_path = tok + "/tokenizer_config.json";
  auto made = MakeModel(options);
  EXPECT_TRUE(made.ok()) << made.status();
  return dir;
}

std::vector<GenerateOutcome> RunAll(LocalCluster& cluster,
                                    const std::vector<std::vector<int>>& prompts) {
  std::vector<GenerateOutcome> outcomes(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back(
        [&, i] { outcomes[i] = cluster.Generate(GreedyTokenRequest(prompts[i], kGpuMaxTokens)); });
  }
  for (std::thread& t : clients) t.join();
  return outcomes;
}

class GpuDisaggregationTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuDisaggregationTest, KvMovedGpuToGpuGivesTheColocatedTokens) {
#if !TANDEM_HAVE_CUDA
  GTEST_SKIP() << "GPU test skipped: this build has no CUDA (TANDEM_CUDA=OFF or no nvcc)";
#endif
  if (!std::filesystem::exists("/dev/nvidiactl")) {
    GTEST_SKIP() << "GPU test skipped, no usable CUDA device: /dev/nvidiactl is missing";
  }
  const std::string model = GpuModelDir();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(100, 20000);
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < kRequests; ++i) {
    std::vector<int> prompt(3 + i * 29 % 200);  // up to several blocks and chunks
    for (int& t : prompt) t = token(rng);
    prompts.push_back(std::move(prompt));
  }
  ClusterSpec spec;
  spec.model_dir = model;
  spec.node_args = {
      "--backend",     "cuda", "--max-num-batched-tokens", "64",      "--max-num-seqs", "16",
      "--kv-cache-mb", "64",   "--kv-cache-dtype",         GetParam()};

  // least_loaded: the threshold decides where each prompt is prefilled (the cost policy, the
  // default, decides by its model once the nodes report their step prices).
  LocalCluster colocated;
  spec.router_args = {"--policy", "least_loaded", "--local-prefill-threshold", "100000"};
  ASSERT_NO_FATAL_FAILURE(colocated.Start(spec));
  const std::vector<GenerateOutcome> want = RunAll(colocated, prompts);

  LocalCluster disaggregated;
  spec.router_args = {"--policy", "least_loaded", "--local-prefill-threshold", "0"};
  ASSERT_NO_FATAL_FAILURE(disaggregated.Start(spec));
  const std::vector<GenerateOutcome> got = RunAll(disaggregated, prompts);

  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(want[i].status.ok()) << i << ": " << want[i].status.error_message();
    ASSERT_TRUE(got[i].status.ok()) << i << ": " << got[i].status.error_message();
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].tokens.size(), static_cast<size_t>(kGpuMaxTokens)) << "request " << i;
  }
  auto load = disaggregated.DecodeLoad(disaggregated.decode(0).grpc_address());
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->num_imported_requests(), kRequests);
  if (HasFailure()) ADD_FAILURE() << colocated.Logs() << disaggregated.Logs();
}

INSTANTIATE_TEST_SUITE_P(KvCacheDTypes, GpuDisaggregationTest,
                         ::testing::Values("bf16", "fp8_e4m3"));

}  // namespace
}  // namespace tandem::testing
