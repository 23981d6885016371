// Batch invariance on the real CPU backend: a request's greedy output is identical alone or
// batched with 31 others of mixed lengths, with prefix-cache hits and with preemption.
#include <memory>
#include <random>
#include <vector>

#include "common/backend/cpu_backend.h"
#include "common/engine/engine.h"
#include "common/engine/request_stream.h"
#include "common/model/model_weights.h"
#include "gtest/gtest.h"
#include "tests/integration/test_model_dir.h"

namespace tandem {
namespace {

constexpr int kNumPrompts = 32;
constexpr int kMaxTokens = 12;

struct RunResult {
  std::vector<std::vector<TokenId>> outputs;
  EngineStats stats;
};

// 32 prompts of 1..90 tokens; every fourth shares a 40-token prefix with prompt 0 so prefix
// caching has full blocks to reuse.
std::vector<std::vector<TokenId>> MakePrompts(int vocab) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<TokenId> token(0, vocab - 1);
  std::vector<TokenId> shared(40);
  for (TokenId& t : shared) t = token(rng);
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < kNumPrompts; ++i) {
    int len = 1 + (i * 37) % 90;
    std::vector<TokenId> p;
    if (i % 4 == 0) p = shared;
    while (static_cast<int>(p.size()) < len + (i % 4 == 0 ? 40 : 0)) p.push_back(token(rng));
    prompts.push_back(std::move(p));
  }
  return prompts;
}

class BatchInvarianceTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto weights = LoadModelWeights(TestModelDir(GetParam()));
    ASSERT_TRUE(weights.ok()) << weights.status();
    weights_ = *std::move(weights);
  }

  // Runs `prompts` together in one fresh engine and pool.
  RunResult Run(const std::vector<std::vector<TokenId>>& prompts, int num_kv_blocks,
                bool prefix_caching, int max_batch_tokens) {
    CpuBackendOptions backend_options;
    backend_options.num_threads = 2;
    backend_options.num_kv_blocks = num_kv_blocks;
    backend_options.block_size = 16;
    auto backend = CpuBackend::Create(weights_, backend_options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    EngineOptions options;
    options.enable_prefix_caching = prefix_caching;
    options.scheduler.max_num_batched_tokens = max_batch_tokens;
    options.scheduler.max_num_seqs = kNumPrompts;
    auto engine = Engine::Create(backend->get(), options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    std::vector<std::unique_ptr<RequestStream>> streams;
    for (const auto& prompt : prompts) {
      auto stream = std::make_unique<RequestStream>();
      GenerateRequest request;
      request.prompt = prompt;
      request.params.temperature = 0.0f;
      request.params.max_tokens = kMaxTokens;
      request.params.ignore_eos = true;
      request.on_event = stream->Callback();
      EXPECT_TRUE((*engine)->Submit(std::move(request)).ok());
      streams.push_back(std::move(stream));
    }
    EXPECT_TRUE((*engine)->RunUntilIdle().ok());
    RunResult result;
    for (auto& stream : streams) {
      GenerationResult r = stream->Wait();
      EXPECT_EQ(r.finish_reason, FinishReason::kLength);
      result.outputs.push_back(r.tokens);
    }
    result.stats = (*engine)->Stats();
    // Every block is back (blocks the prefix cache still remembers count as free).
    EXPECT_EQ(result.stats.num_free_kv_blocks, result.stats.num_kv_blocks);
    return result;
  }

  ModelWeights weights_;
};

TEST_P(BatchInvarianceTest, GreedyOutputIsTheSameAloneAndBatched) {
  std::vector<std::vector<TokenId>> prompts = MakePrompts(weights_.config.vocab_size);

  std::vector<std::vector<TokenId>> alone;
  for (const auto& prompt : prompts) {
    RunResult r = Run({prompt}, /*num_kv_blocks=*/64, /*prefix_caching=*/false, 256);
    alone.push_back(r.outputs[0]);
  }

  // All 32 at once, prefix caching on: the shared 40-token prefix is served from the cache.
  RunResult batched = Run(prompts, /*num_kv_blocks=*/512, /*prefix_caching=*/true, 256);
  EXPECT_GT(batched.stats.prefix_cache_hits, 0);
  EXPECT_EQ(batched.stats.num_preemptions, 0);

  // A pool too small for everyone: sequences are preempted and recomputed.
  RunResult preempted = Run(prompts, /*num_kv_blocks=*/24, /*prefix_caching=*/true, 64);
  EXPECT_GT(preempted.stats.num_preemptions, 0);

  for (int i = 0; i < kNumPrompts; ++i) {
    ASSERT_EQ(alone[i].size(), static_cast<size_t>(kMaxTokens));
    EXPECT_EQ(batched.outputs[i], alone[i]) << "prompt " << i << " batched with 31 others";
    EXPECT_EQ(preempted.outputs[i], alone[i]) << "prompt " << i << " under preemption";
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, BatchInvarianceTest, ::testing::Values("llama", "qwen3"));

}  // namespace
}  // namespace tandem
