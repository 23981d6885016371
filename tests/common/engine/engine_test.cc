#include "common/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

TEST(EngineTest, GreedyOutputMatchesTheReferenceModel) {
  FakeBackend backend(kVocab, /*num_blocks=*/64, /*block_size=*/4);
  auto engine = MakeEngine(&backend);
  std::vector<TokenId> prompt = MakePrompt(10, 1);
  GenerationResult r = RunOne(*engine, GreedyRequest(prompt, 20));
  EXPECT_EQ(r.tokens, FakeBackend::ReferenceGreedy(prompt, kVocab, 20));
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.usage, (Usage{.prompt_tokens = 10, .completion_tokens = 20, .cached_tokens = 0}));
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 64);
  EXPECT_EQ(engine->Stats().num_finished_requests, 1);
  EXPECT_EQ(engine->Stats().num_generated_tokens, 20);
}

TEST(EngineTest, StopTokenEndsGenerationAndIsDelivered) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  std::vector<TokenId> prompt = MakePrompt(7, 2);
  std::vector<TokenId> ref = FakeBackend::ReferenceGreedy(prompt, kVocab, 30);
  const TokenId stop = ref[5];
  const size_t first = std::find(ref.begin(), ref.end(), stop) - ref.begin();

  GenerateRequest req = GreedyRequest(prompt, 30);
  req.params.stop_token_ids = {stop};
  GenerationResult r = RunOne(*engine, req);
  EXPECT_EQ(r.tokens, std::vector<TokenId>(ref.begin(), ref.begin() + first + 1));
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_EQ(r.usage.completion_tokens, static_cast<int>(first + 1));
}

TEST(EngineTest, ModelEosStopsUnlessIgnored) {
  std::vector<TokenId> prompt = MakePrompt(9, 3);
  std::vector<TokenId> ref = FakeBackend::ReferenceGreedy(prompt, kVocab, 30);
  const TokenId eos = ref[4];
  const size_t first = std::find(ref.begin(), ref.end(), eos) - ref.begin();
  FakeBackend backend(kVocab, 64, 4, /*max_position_embeddings=*/4096, /*eos_token_ids=*/{eos});
  auto engine = MakeEngine(&backend);

  GenerationResult stopped = RunOne(*engine, GreedyRequest(prompt, 30));
  EXPECT_EQ(stopped.tokens.size(), first + 1);
  EXPECT_EQ(stopped.tokens.back(), eos);
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);

  GenerateRequest req = GreedyRequest(prompt, 30);
  req.params.ignore_eos = true;
  GenerationResult full = RunOne(*engine, req);
  EXPECT_EQ(full.tokens, ref);
  EXPECT_EQ(full.finish_reason, FinishReason::kLength);
}

TEST(EngineTest, MaxTokensWinsOverStopOnTheSameToken) {
  std::vector<TokenId> prompt = MakePrompt(5, 4);
  std::vector<TokenId> ref = FakeBackend::ReferenceGreedy(prompt, kVocab, 1);
  FakeBackend backend(kVocab, 64, 4, 4096, {ref[0]});
  auto engine = MakeEngine(&backend);
  GenerationResult r = RunOne(*engine, GreedyRequest(prompt, 1));
  EXPECT_EQ(r.tokens, ref);
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);  // vLLM checks length first
}

TEST(EngineTest, ContextLimitEndsWithLength) {
  FakeBackend backend(kVocab, 64, 4, /*max_position_embeddings=*/16);
  auto engine = MakeEngine(&backend);
  EXPECT_EQ(engine->max_context_tokens(), 16);
  GenerationResult r = RunOne(*engine, GreedyRequest(MakePrompt(10, 5), 100));
  EXPECT_EQ(r.tokens.size(), 6u);
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
  // A prompt filling the whole context still gets its one token.
  GenerationResult full = RunOne(*engine, GreedyRequest(MakePrompt(16, 6), 100));
  EXPECT_EQ(full.tokens.size(), 1u);
  EXPECT_EQ(full.finish_reason, FinishReason::kLength);
}

TEST(EngineTest, KvPoolCapacityIsAContextLimit) {
  FakeBackend backend(kVocab, /*num_blocks=*/4, /*block_size=*/4, 4096);
  auto engine = MakeEngine(&backend);
  EXPECT_EQ(engine->max_context_tokens(), 16);
  GenerationResult r = RunOne(*engine, GreedyRequest(MakePrompt(12, 7), 100));
  EXPECT_EQ(r.tokens.size(), 4u);
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 4);
}

TEST(EngineTest, SubmitRejectsBadRequests) {
  FakeBackend backend(kVocab, /*num_blocks=*/8, /*block_size=*/4, /*max_position_embeddings=*/24);
  auto engine = MakeEngine(&backend);
  auto expect_invalid = [&](GenerateRequest r, const std::string& what) {
    auto id = engine->Submit(std::move(r));
    ASSERT_FALSE(id.ok()) << what;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(id.status().message()), HasSubstr(what));
  };
  expect_invalid(GreedyRequest({}, 4), "prompt is empty");
  expect_invalid(GreedyRequest({1, kVocab, 2}, 4), "prompt token 64 at index 1");
  expect_invalid(GreedyRequest({1, -1}, 4), "outside the vocabulary");
  expect_invalid(GreedyRequest(MakePrompt(25, 1), 4), "context length is 24");
  GenerateRequest zero = GreedyRequest({1, 2}, 0);
  expect_invalid(zero, "max_tokens must be >= 1");
  GenerateRequest hot = GreedyRequest({1, 2}, 4);
  hot.params.temperature = -1.0f;
  expect_invalid(hot, "temperature must be >= 0");
  GenerateRequest stop = GreedyRequest({1, 2}, 4);
  stop.params.stop_token_ids = {kVocab + 3};
  expect_invalid(stop, "stop_token_ids[0]");

  FakeBackend small(kVocab, /*num_blocks=*/2, /*block_size=*/4, 4096);
  auto small_engine = MakeEngine(&small);
  auto id = small_engine->Submit(GreedyRequest(MakePrompt(9, 1), 1));
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("needs 3 KV blocks"));
  EXPECT_EQ(small_engine->Stats().num_waiting, 0);
}

TEST(EngineTest, CreateRejectsBadOptions) {
  FakeBackend backend(kVocab, 8, 4);
  EngineOptions options;
  options.scheduler.max_num_seqs = 64;
  options.scheduler.max_num_batched_tokens = 32;
  EXPECT_EQ(Engine::Create(&backend, options).status().code(), absl::StatusCode::kInvalidArgument);
  FakeBackend empty(kVocab, 0, 4);
  EXPECT_FALSE(Engine::Create(&empty, EngineOptions{}).ok());
}

TEST(EngineTest, CancelMidStreamReleasesBlocks) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  RequestStream stream;
  RequestId id = 0;
  int tokens_seen = 0;
  GenerateRequest req = GreedyRequest(MakePrompt(20, 8), 50);
  req.on_event = [&](const GenerationEvent& e) {
    if (e.has_token() && ++tokens_seen == 3) engine->Cancel(id);
    stream.Push(e);
  };
  auto submitted = engine->Submit(std::move(req));
  ASSERT_TRUE(submitted.ok());
  id = *submitted;
  // A second request keeps running after the first is cancelled.
  GenerationResult other = RunOne(*engine, GreedyRequest(MakePrompt(5, 9), 10));
  EXPECT_EQ(other.tokens.size(), 10u);
  GenerationResult r = stream.Wait();
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(r.finish_reason, FinishReason::kAborted);
  EXPECT_EQ(r.usage.completion_tokens, 3);
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 64);
  engine->Cancel(id);  // already finished: ignored
  EXPECT_TRUE(engine->RunUntilIdle().ok());
}

TEST(EngineTest, CancelBeforeAnyStepRunsNothing) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  RequestStream stream;
  GenerateRequest req = GreedyRequest(MakePrompt(20, 8), 50);
  req.on_event = stream.Callback();
  auto id = engine->Submit(std::move(req));
  ASSERT_TRUE(id.ok());
  engine->Cancel(*id);
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  GenerationResult r = stream.Wait();
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.finish_reason, FinishReason::kAborted);
  EXPECT_TRUE(backend.calls().empty());
}

TEST(EngineTest, UsageCountsPrefixCacheHits) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  std::vector<TokenId> prompt = MakePrompt(41, 10);
  GenerationResult first = RunOne(*engine, GreedyRequest(prompt, 5));
  EXPECT_EQ(first.usage.cached_tokens, 0);
  GenerationResult second = RunOne(*engine, GreedyRequest(prompt, 5));
  EXPECT_EQ(second.usage.cached_tokens, 40);
  EXPECT_EQ(second.usage.prompt_tokens, 41);
  EXPECT_EQ(second.tokens, first.tokens);
  // A block-aligned prompt recomputes its last block.
  std::vector<TokenId> aligned(prompt.begin(), prompt.begin() + 40);
  GenerationResult third = RunOne(*engine, GreedyRequest(aligned, 3));
  EXPECT_EQ(third.usage.cached_tokens, 36);
  EXPECT_EQ(third.tokens, FakeBackend::ReferenceGreedy(aligned, kVocab, 3));
  EngineStats stats = engine->Stats();
  EXPECT_EQ(stats.prefix_cache_queries, 41 + 41 + 40);
  EXPECT_EQ(stats.prefix_cache_hits, 40 + 36);
}

TEST(EngineTest, NoPrefixCachingMeansNoHits) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend, 2048, 32, /*prefix_caching=*/false);
  std::vector<TokenId> prompt = MakePrompt(41, 10);
  RunOne(*engine, GreedyRequest(prompt, 2));
  EXPECT_EQ(RunOne(*engine, GreedyRequest(prompt, 2)).usage.cached_tokens, 0);
}

TEST(EngineTest, LogprobsAreRawLogSoftmaxOfTheModel) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  std::vector<TokenId> prompt = MakePrompt(6, 11);
  GenerateRequest req = GreedyRequest(prompt, 4);
  req.params.logprobs = 3;
  GenerationResult r = RunOne(*engine, req);
  ASSERT_EQ(r.tokens.size(), 4u);
  std::vector<TokenId> history = prompt;
  std::vector<float> logits(kVocab);
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    FakeBackend::ReferenceLogits(history, kVocab, logits);
    double m = *std::max_element(logits.begin(), logits.end()), sum = 0.0;
    for (float x : logits) sum += std::exp(x - m);
    const double lse = m + std::log(sum);
    EXPECT_NEAR(r.logprobs[i], logits[r.tokens[i]] - lse, 1e-4);
    ASSERT_EQ(r.top_logprobs[i].size(), 3u);
    EXPECT_EQ(r.top_logprobs[i][0].token, r.tokens[i]);  // greedy: the top token
    EXPECT_GE(r.top_logprobs[i][0].logprob, r.top_logprobs[i][1].logprob);
    EXPECT_GE(r.top_logprobs[i][1].logprob, r.top_logprobs[i][2].logprob);
    history.push_back(r.tokens[i]);
  }
}

TEST(EngineTest, SeededSamplingIsReproducible) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  GenerateRequest req;
  req.prompt = MakePrompt(8, 12);
  req.params.temperature = 1.0f;
  req.params.max_tokens = 24;
  req.params.seed = 1234;
  GenerationResult a = RunOne(*engine, req);
  GenerationResult b = RunOne(*engine, req);
  EXPECT_EQ(a.tokens, b.tokens);
  req.params.seed.reset();
  GenerationResult c = RunOne(*engine, req);
  GenerationResult d = RunOne(*engine, req);
  EXPECT_NE(c.tokens, d.tokens);  // fresh random seeds (64^-24 chance of a false failure)
}

TEST(EngineTest, BackendErrorFailsTheBatchAndFreesBlocks) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  RequestStream s1, s2;
  GenerateRequest r1 = GreedyRequest(MakePrompt(10, 13), 5);
  GenerateRequest r2 = GreedyRequest(MakePrompt(12, 14), 5);
  r1.on_event = s1.Callback();
  r2.on_event = s2.Callback();
  ASSERT_TRUE(engine->Submit(std::move(r1)).ok());
  ASSERT_TRUE(engine->Submit(std::move(r2)).ok());
  backend.FailNextForward(absl::InternalError("device lost"));
  absl::Status status = engine->RunUntilIdle();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  for (RequestStream* s : {&s1, &s2}) {
    GenerationResult r = s->Wait();
    EXPECT_EQ(r.finish_reason, FinishReason::kError);
    EXPECT_THAT(std::string(r.status.message()), HasSubstr("device lost"));
  }
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 64);
  // The engine keeps serving.
  EXPECT_EQ(RunOne(*engine, GreedyRequest(MakePrompt(4, 15), 3)).tokens.size(), 3u);
}

TEST(EngineTest, StopAbortsUnfinishedRequestsAndRejectsNewOnes) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  RequestStream stream;
  GenerateRequest req = GreedyRequest(MakePrompt(10, 16), 5);
  req.on_event = stream.Callback();
  ASSERT_TRUE(engine->Submit(std::move(req)).ok());
  engine->Stop();
  GenerationResult r = stream.Wait();
  EXPECT_EQ(r.finish_reason, FinishReason::kAborted);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable);
  auto late = engine->Submit(GreedyRequest({1}, 1));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  engine->Stop();  // idempotent
}

TEST(EngineTest, RunUntilIdleRefusedWhileThreadRuns) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  engine->Start();
  EXPECT_EQ(engine->RunUntilIdle().code(), absl::StatusCode::kFailedPrecondition);
  engine->Stop();
}

TEST(EngineTest, EventsArriveInOrderWithRunningUsage) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  RequestStream stream;
  GenerateRequest req = GreedyRequest(MakePrompt(6, 17), 4);
  req.on_event = stream.Callback();
  auto id = engine->Submit(std::move(req));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  GenerationEvent e;
  int n = 0;
  while (stream.Next(&e)) {
    ++n;
    EXPECT_EQ(e.request_id, *id);
    EXPECT_TRUE(e.has_token());
    EXPECT_EQ(e.usage.completion_tokens, n);
    EXPECT_EQ(e.finished, n == 4);
  }
  EXPECT_EQ(n, 4);
}

}  // namespace
}  // namespace tandem
