// Request migration, the engine's side (request.h, GenerateRequest::resumed_output_token_ids): a
// request resumed with the first k tokens of an uninterrupted run and the rng counter of its k-th
// event continues with exactly the run's remaining tokens and counters, greedy or seeded with
// penalties, through the prefix cache and through preemption; resumed tokens that already end the
// request end it at once with no token; bad resumed output is refused naming the field.
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "common/engine/kv_exporter.h"
#include "common/engine/request_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr int kPromptTokens = 10;
constexpr int kResumeMaxTokens = 16;

// Seeded sampling that draws for every token and whose penalties depend on the output so far.
GenerateRequest SampledRequest(std::vector<TokenId> prompt, int max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0.7f;
  r.params.top_p = 0.9f;
  r.params.repetition_penalty = 1.3f;
  r.params.frequency_penalty = 0.8f;
  r.params.presence_penalty = 0.3f;
  r.params.seed = 4242;
  r.params.max_tokens = max_tokens;
  return r;
}

// `request` resumed after the first `k` tokens of `full`, an uninterrupted run of it.
GenerateRequest Resumed(GenerateRequest request, const GenerationResult& full, int k) {
  request.resumed_output_token_ids.assign(full.tokens.begin(), full.tokens.begin() + k);
  request.resumed_rng_counter = full.rng_counters[k - 1];
  return request;
}

template <typename T>
std::vector<T> After(const std::vector<T>& v, int k) {
  return std::vector<T>(v.begin() + k, v.end());
}

// Runs `request` uninterrupted, then resumed after k = 1, a middle k and N - 1 tokens, each on a
// fresh engine (prefix caching as given) and on the engine that ran the full request (its prefix
// cache holds the whole run).
void ExpectResumesExactly(const GenerateRequest& request, bool prefix_caching) {
  FakeBackend backend(kVocab, /*num_blocks=*/64, /*block_size=*/4);
  auto engine = MakeEngine(&backend, 2048, 32, prefix_caching);
  const GenerationResult full = RunOne(*engine, request);
  ASSERT_TRUE(full.status.ok()) << full.status;
  ASSERT_EQ(full.tokens.size(), static_cast<size_t>(kResumeMaxTokens));
  ASSERT_EQ(full.rng_counters.size(), full.tokens.size());
  if (!request.params.greedy()) {
    // One draw per token: the counters say how far the sampler went.
    for (int i = 0; i < kResumeMaxTokens; ++i) EXPECT_EQ(full.rng_counters[i], uint64_t(i + 1));
  } else {
    for (uint64_t c : full.rng_counters) EXPECT_EQ(c, 0u);
  }
  for (int k : {1, kResumeMaxTokens / 2, kResumeMaxTokens - 1}) {
    SCOPED_TRACE(::testing::Message() << "resumed after " << k << " tokens");
    FakeBackend fresh_backend(kVocab, 64, 4);
    auto fresh = MakeEngine(&fresh_backend, 2048, 32, prefix_caching);
    for (Engine* e : {fresh.get(), engine.get()}) {
      const int64_t generated_before = e->Stats().num_generated_tokens;
      const GenerationResult rest = RunOne(*e, Resumed(request, full, k));
      ASSERT_TRUE(rest.status.ok()) << rest.status;
      EXPECT_EQ(rest.tokens, After(full.tokens, k));
      EXPECT_EQ(rest.rng_counters, After(full.rng_counters, k));
      EXPECT_EQ(rest.finish_reason, full.finish_reason);
      // Usage is the whole completion's; the engine counts only what it generated itself.
      EXPECT_EQ(rest.usage.prompt_tokens, kPromptTokens);
      EXPECT_EQ(rest.usage.completion_tokens, kResumeMaxTokens);
      EXPECT_LE(rest.usage.cached_tokens, kPromptTokens);
      EXPECT_EQ(e->Stats().num_generated_tokens - generated_before, kResumeMaxTokens - k);
      EXPECT_EQ(e->Stats().num_free_kv_blocks, 64);
    }
  }
}

// Greedy, and greedy whose choice depends on the output so far (frequency/presence penalties).
GenerateRequest PenalizedGreedyRequest(std::vector<TokenId> prompt, int max_tokens) {
  GenerateRequest r = GreedyRequest(std::move(prompt), max_tokens);
  r.params.frequency_penalty = 2.0f;
  r.params.presence_penalty = 2.0f;
  return r;
}

TEST(EngineResumeTest, GreedyContinuesExactly) {
  for (bool prefix_caching : {true, false}) {
    SCOPED_TRACE(prefix_caching ? "prefix caching" : "no prefix caching");
    ExpectResumesExactly(GreedyRequest(MakePrompt(kPromptTokens, 1), kResumeMaxTokens),
                         prefix_caching);
    ExpectResumesExactly(PenalizedGreedyRequest(MakePrompt(kPromptTokens, 1), kResumeMaxTokens),
                         prefix_caching);
  }
}

TEST(EngineResumeTest, SeededSamplingWithPenaltiesContinuesExactly) {
  for (bool prefix_caching : {true, false}) {
    SCOPED_TRACE(prefix_caching ? "prefix caching" : "no prefix caching");
    ExpectResumesExactly(SampledRequest(MakePrompt(kPromptTokens, 2), kResumeMaxTokens),
                         prefix_caching);
  }
}

TEST(EngineResumeTest, TheCounterAndTheResumedTokensBothMatter) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  const int k = kResumeMaxTokens / 2;
  // Restarting the sampler's stream from 1 instead of k repeats earlier draws.
  const GenerateRequest sampled = SampledRequest(MakePrompt(kPromptTokens, 3), kResumeMaxTokens);
  const GenerationResult full = RunOne(*engine, sampled);
  GenerateRequest wrong_counter = Resumed(sampled, full, k);
  wrong_counter.resumed_rng_counter = 1;
  EXPECT_NE(RunOne(*engine, wrong_counter).tokens, After(full.tokens, k));
  // Resumed tokens taken as prompt (no frequency/presence penalty on them) choose differently.
  const GenerateRequest penalized =
      PenalizedGreedyRequest(MakePrompt(kPromptTokens, 3), kResumeMaxTokens);
  const GenerationResult greedy = RunOne(*engine, penalized);
  GenerateRequest as_prompt = penalized;
  as_prompt.prompt.insert(as_prompt.prompt.end(), greedy.tokens.begin(), greedy.tokens.begin() + k);
  as_prompt.params.max_tokens = kResumeMaxTokens - k;
  const GenerationResult plain = RunOne(*engine, as_prompt);
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  EXPECT_NE(plain.tokens, After(greedy.tokens, k));
  EXPECT_EQ(RunOne(*engine, Resumed(penalized, greedy, k)).tokens, After(greedy.tokens, k));
}

TEST(EngineResumeTest, PrefixCacheServesThePromptOfAResumedRequest) {
  FakeBackend backend(kVocab, 64, 4);
  const std::vector<TokenId> prompt = MakePrompt(kPromptTokens, 4);
  const std::vector<TokenId> ref = FakeBackend::ReferenceGreedy(prompt, kVocab, kResumeMaxTokens);
  auto engine = MakeEngine(&backend);
  // Another request with the same prompt fills the cache with its two full prompt blocks.
  RunOne(*engine, GreedyRequest(prompt, 1));
  const int64_t hits_before = engine->Stats().prefix_cache_hits;
  GenerateRequest resumed = GreedyRequest(prompt, kResumeMaxTokens);
  resumed.resumed_output_token_ids.assign(ref.begin(), ref.begin() + 5);
  const GenerationResult rest = RunOne(*engine, resumed);
  EXPECT_EQ(rest.tokens, After(ref, 5));
  EXPECT_EQ(rest.usage, (Usage{.prompt_tokens = kPromptTokens,
                               .completion_tokens = kResumeMaxTokens,
                               .cached_tokens = 8}));
  EXPECT_EQ(engine->Stats().prefix_cache_hits - hits_before, 8);
  // The first step computed prompt positions 8, 9 and the 5 resumed tokens, nothing before.
  EXPECT_EQ(backend.calls()[1].num_tokens, kPromptTokens - 8 + 5);
}

TEST(EngineResumeTest, ResumedRequestsSurvivePreemptionAndChunkedPrefill) {
  // 4 requests of 10 + 20 tokens (8 blocks each) in 16 blocks, prefill chunks of 8 tokens.
  FakeBackend backend(kVocab, /*num_blocks=*/16, /*block_size=*/4);
  auto engine = MakeEngine(&backend, /*max_num_batched_tokens=*/8, /*max_num_seqs=*/4);
  std::vector<GenerateRequest> requests;
  std::vector<std::vector<TokenId>> refs;
  for (int i = 0; i < 4; ++i) {
    const std::vector<TokenId> prompt = MakePrompt(kPromptTokens, 10 + i);
    refs.push_back(FakeBackend::ReferenceGreedy(prompt, kVocab, 20));
    GenerateRequest r = GreedyRequest(prompt, 20);
    r.resumed_output_token_ids.assign(refs.back().begin(), refs.back().begin() + 3 + i);
    requests.push_back(std::move(r));
  }
  const std::vector<GenerationResult> results = RunAll(*engine, std::move(requests));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(results[i].tokens, After(refs[i], 3 + i)) << "request " << i;
    EXPECT_EQ(results[i].usage.completion_tokens, 20) << "request " << i;
  }
  EXPECT_GT(engine->Stats().num_preemptions, 0);
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 16);
}

// Resumed tokens that already end the request: it finishes at once, computing nothing.
TEST(EngineResumeTest, ResumedTokensThatEndTheRequestFinishItAtOnce) {
  const std::vector<TokenId> prompt = MakePrompt(kPromptTokens, 5);
  const std::vector<TokenId> ref = FakeBackend::ReferenceGreedy(prompt, kVocab, 6);
  // ref[5] is the model's EOS; stop_token_ids is ref[2]. Neither comes earlier in ref.
  ASSERT_EQ(std::find(ref.begin(), ref.begin() + 5, ref[5]), ref.begin() + 5);
  ASSERT_EQ(std::find(ref.begin(), ref.begin() + 2, ref[2]), ref.begin() + 2);
  FakeBackend backend(kVocab, 64, 4, /*max_position_embeddings=*/kPromptTokens + 8, {ref[5]});
  auto engine = MakeEngine(&backend);
  auto expect_ends_at_once = [&](GenerateRequest r, FinishReason reason, int completion) {
    const size_t calls = backend.calls().size();
    RequestStream stream;
    r.on_event = stream.Callback();
    ASSERT_TRUE(engine->Submit(std::move(r)).ok());
    ASSERT_TRUE(engine->RunUntilIdle().ok());
    GenerationEvent event;
    ASSERT_TRUE(stream.Next(&event));
    EXPECT_TRUE(event.finished);
    EXPECT_FALSE(event.has_token());
    EXPECT_EQ(event.finish_reason, reason);
    EXPECT_TRUE(event.status.ok()) << event.status;
    EXPECT_EQ(event.usage, (Usage{.prompt_tokens = kPromptTokens,
                                  .completion_tokens = completion,
                                  .cached_tokens = 0}));
    EXPECT_EQ(event.rng_counter, 7u);
    EXPECT_FALSE(stream.Next(&event));
    EXPECT_EQ(backend.calls().size(), calls);
    EXPECT_EQ(engine->Stats().num_free_kv_blocks, 64);
  };
  auto resumed = [&](int k, int max_tokens) {
    GenerateRequest r = SampledRequest(prompt, max_tokens);
    r.params.temperature = 0.0f;
    r.resumed_output_token_ids.assign(ref.begin(), ref.begin() + k);
    r.resumed_rng_counter = 7;
    return r;
  };
  // max_tokens of them.
  expect_ends_at_once(resumed(3, 3), FinishReason::kLength, 3);
  // Ending in a stop token id, and in the model's EOS.
  GenerateRequest stop = resumed(3, 8);
  stop.params.stop_token_ids = {ref[2]};
  expect_ends_at_once(stop, FinishReason::kStop, 3);
  expect_ends_at_once(resumed(6, 8), FinishReason::kStop, 6);
  // Prompt and them filling the context (a resumed 8th token would be position 18).
  GenerateRequest ignore = resumed(6, 8);
  ignore.params.ignore_eos = true;
  const GenerationResult after_eos = RunOne(*engine, ignore);  // EOS ignored: goes on
  EXPECT_EQ(after_eos.tokens.size(), 2u);
  EXPECT_EQ(after_eos.finish_reason, FinishReason::kLength);
  GenerateRequest full_context = resumed(6, 20);
  full_context.params.ignore_eos = true;
  full_context.resumed_output_token_ids.push_back(after_eos.tokens[0]);
  full_context.resumed_output_token_ids.push_back(after_eos.tokens[1]);
  expect_ends_at_once(full_context, FinishReason::kLength, 8);
}

TEST(EngineResumeTest, BadResumedOutputIsRefusedNamingTheField) {
  FakeBackend backend(kVocab, /*num_blocks=*/8, /*block_size=*/4, /*max_position_embeddings=*/24,
                      /*eos_token_ids=*/{5});
  auto engine = MakeEngine(&backend);
  auto expect_invalid = [&](GenerateRequest r, const std::string& what) {
    auto id = engine->Submit(std::move(r));
    ASSERT_FALSE(id.ok()) << what;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(id.status().message()), HasSubstr(what));
  };
  auto resumed = [](std::vector<TokenId> tokens, int max_tokens) {
    GenerateRequest r = GreedyRequest({1, 2, 3}, max_tokens);
    r.resumed_output_token_ids = std::move(tokens);
    return r;
  };
  expect_invalid(resumed({1, kVocab, 2}, 8), "resumed_output_token_ids[1] = 64 is outside");
  expect_invalid(resumed({-1}, 8), "resumed_output_token_ids[0] = -1 is outside");
  expect_invalid(resumed({1, 2, 3}, 2), "more than max_tokens (2)");
  expect_invalid(resumed(std::vector<TokenId>(22, 1), 30), "context length is 24");
  expect_invalid(resumed({5, 1}, 8), "resumed_output_token_ids[0] = 5 is a stop token");
  GenerateRequest stop_id = resumed({1, 9, 2}, 8);
  stop_id.params.stop_token_ids = {9};
  expect_invalid(stop_id, "resumed_output_token_ids[1] = 9 is a stop token");
  GenerateRequest counter = GreedyRequest({1, 2}, 8);
  counter.resumed_rng_counter = 3;
  expect_invalid(counter, "resumed_rng_counter is 3 but resumed_output_token_ids is empty");
  // EOS inside is fine when ignored.
  GenerateRequest ignored = resumed({5, 1}, 8);
  ignored.params.ignore_eos = true;
  EXPECT_TRUE(engine->Submit(std::move(ignored)).ok());
  // Reserve (a request moving in with its KV) validates them the same way; prefill-only requests
  // take none.
  auto reserved = engine->Reserve(resumed({5, 1}, 8), absl::Seconds(1), nullptr);
  ASSERT_FALSE(reserved.ok());
  EXPECT_THAT(std::string(reserved.status().message()),
              HasSubstr("resumed_output_token_ids[0] = 5 is a stop token"));
  class NullExporter : public KvExporter {
    void OnBlocksReady(RequestId, int32_t, std::span<const int32_t>) override {}
    void OnPrefillDone(const GenerationEvent&, uint64_t) override {}
    void OnAborted(RequestId, const absl::Status&) override {}
  };
  GenerateRequest exporting = resumed({1}, 8);
  exporting.kv_exporter = std::make_shared<NullExporter>();
  expect_invalid(std::move(exporting), "prefill-only request cannot resume output");
  ASSERT_TRUE(engine->RunUntilIdle().ok());
}

TEST(EngineResumeTest, ResumedOutputBeyondThePoolIsRefused) {
  // 4 blocks of 4 tokens: the pool is the context limit (16 tokens).
  FakeBackend backend(kVocab, /*num_blocks=*/4, /*block_size=*/4, 4096);
  auto engine = MakeEngine(&backend);
  GenerateRequest r = GreedyRequest(MakePrompt(12, 6), 20);
  r.resumed_output_token_ids = std::vector<TokenId>(5, 1);
  auto id = engine->Submit(std::move(r));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(id.status().message()),
              HasSubstr("resumed_output_token_ids (5) need 5 KV blocks of 4 tokens, but the "
                        "whole pool has 4"));
}

}  // namespace
}  // namespace tandem
