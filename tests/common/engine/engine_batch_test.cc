// Batch invariance: a request's output must not depend on what else runs with it, how its prompt
// is chunked, whether its prefix came from the cache, or whether it was preempted and recomputed.
#include <memory>
#include <thread>
#include <vector>

#include "common/engine/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

// 32 requests: prompt lengths 1..90, a shared 24-token prefix on every fourth, one exact
// duplicate, mostly greedy, some seeded sampling with filters, some penalties.
std::vector<GenerateRequest> MixedRequests() {
  std::vector<GenerateRequest> requests;
  const std::vector<TokenId> shared = MakePrompt(24, 99);
  for (int i = 0; i < 32; ++i) {
    std::vector<TokenId> prompt;
    if (i % 4 == 0) {
      prompt = shared;
      std::vector<TokenId> tail = MakePrompt(1 + (i * 5) % 30, i);
      prompt.insert(prompt.end(), tail.begin(), tail.end());
    } else {
      prompt = MakePrompt(1 + (i * 37) % 90, i);
    }
    if (i == 31) prompt = requests[3].prompt;  // an identical prompt
    GenerateRequest r = GreedyRequest(std::move(prompt), 1 + (i * 13) % 25);
    if (i % 5 == 1) {
      r.params.temperature = 0.9f;
      r.params.top_p = 0.9f;
      r.params.top_k = 20;
      r.params.seed = 1000 + i;
    }
    if (i % 7 == 3) {
      r.params.repetition_penalty = 1.3f;
      r.params.frequency_penalty = 0.5f;
      r.params.presence_penalty = 0.2f;
    }
    if (i % 6 == 2) r.params.logprobs = 2;
    requests.push_back(std::move(r));
  }
  return requests;
}

// Each request alone on a fresh engine with a roomy pool.
std::vector<GenerationResult> RunAlone(const std::vector<GenerateRequest>& requests) {
  std::vector<GenerationResult> results;
  for (const GenerateRequest& r : requests) {
    FakeBackend backend(kVocab, /*num_blocks=*/256, /*block_size=*/4);
    auto engine = MakeEngine(&backend);
    results.push_back(RunOne(*engine, r));
  }
  return results;
}

void ExpectSameResults(const std::vector<GenerationResult>& got,
                       const std::vector<GenerationResult>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << "request " << i;
    EXPECT_EQ(got[i].usage.completion_tokens, want[i].usage.completion_tokens) << "request " << i;
    EXPECT_EQ(got[i].logprobs, want[i].logprobs) << "request " << i;
    EXPECT_EQ(got[i].top_logprobs, want[i].top_logprobs) << "request " << i;
  }
}

TEST(EngineBatchTest, AloneResultsMatchTheReferenceModel) {
  std::vector<GenerateRequest> requests = MixedRequests();
  std::vector<GenerationResult> alone = RunAlone(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const SamplingParams& p = requests[i].params;
    if (!p.greedy() || p.repetition_penalty != 1.0f) continue;
    EXPECT_EQ(alone[i].tokens,
              FakeBackend::ReferenceGreedy(requests[i].prompt, kVocab, p.max_tokens))
        << "request " << i;
  }
}

TEST(EngineBatchTest, BatchedOutputEqualsAloneOutput) {
  std::vector<GenerateRequest> requests = MixedRequests();
  std::vector<GenerationResult> alone = RunAlone(requests);
  FakeBackend backend(kVocab, 256, 4);
  auto engine = MakeEngine(&backend);
  ExpectSameResults(RunAll(*engine, requests), alone);
  EngineStats stats = engine->Stats();
  EXPECT_GT(stats.prefix_cache_hits, 0);
  EXPECT_EQ(stats.num_free_kv_blocks, 256);
  EXPECT_EQ(stats.num_finished_requests, 32);
}

TEST(EngineBatchTest, ChunkedPrefillAndPreemptionDoNotChangeOutput) {
  std::vector<GenerateRequest> requests = MixedRequests();
  std::vector<GenerationResult> alone = RunAlone(requests);
  // 40 blocks of 4 tokens (the longest request needs 29 blocks), a 16-token budget.
  FakeBackend backend(kVocab, /*num_blocks=*/40, /*block_size=*/4);
  auto engine = MakeEngine(&backend, /*max_num_batched_tokens=*/16, /*max_num_seqs=*/16);
  ExpectSameResults(RunAll(*engine, requests), alone);
  EngineStats stats = engine->Stats();
  EXPECT_GT(stats.num_preemptions, 0);
  EXPECT_GT(stats.prefix_cache_hits, 0);
  EXPECT_EQ(stats.num_free_kv_blocks, 40);
  EXPECT_EQ(stats.num_waiting + stats.num_running, 0);
  for (const FakeBackend::Call& call : backend.calls()) {
    EXPECT_LE(call.num_tokens, 16);
    EXPECT_LE(call.num_items, 16);
  }
}

TEST(EngineBatchTest, SmallBlocksAndNoPrefixCacheDoNotChangeOutput) {
  std::vector<GenerateRequest> requests = MixedRequests();
  std::vector<GenerationResult> alone = RunAlone(requests);
  FakeBackend backend(kVocab, /*num_blocks=*/130, /*block_size=*/1);
  auto engine = MakeEngine(&backend, 7, 5, /*prefix_caching=*/false);
  ExpectSameResults(RunAll(*engine, requests), alone);
  EXPECT_EQ(engine->Stats().prefix_cache_hits, 0);
}

TEST(EngineBatchTest, ThreadedSubmittersGetTheSameOutput) {
  std::vector<GenerateRequest> requests = MixedRequests();
  std::vector<GenerationResult> alone = RunAlone(requests);
  FakeBackend backend(kVocab, /*num_blocks=*/48, /*block_size=*/4);
  auto engine = MakeEngine(&backend, 24, 8);
  engine->Start();
  // 4 threads submit 8 requests each, 3 rounds over the same set (96 requests in flight).
  constexpr int kRounds = 3;
  std::vector<std::unique_ptr<RequestStream>> streams(kRounds * requests.size());
  for (auto& s : streams) s = std::make_unique<RequestStream>();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = t; k < streams.size(); k += 4) {
        GenerateRequest r = requests[k % requests.size()];
        r.on_event = streams[k]->Callback();
        EXPECT_TRUE(engine->Submit(std::move(r)).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int round = 0; round < kRounds; ++round) {
    std::vector<GenerationResult> got;
    for (size_t i = 0; i < requests.size(); ++i) {
      auto r = streams[round * requests.size() + i]->WaitWithTimeout(absl::Seconds(30));
      ASSERT_TRUE(r.has_value()) << "request " << i << " never finished";
      got.push_back(*r);
    }
    ExpectSameResults(got, alone);
  }
  engine->Stop();
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 48);
}

}  // namespace
}  // namespace tandem
