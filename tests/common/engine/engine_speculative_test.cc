// Speculative decoding in the engine (common/engine/speculative.h): with n-gram drafts, greedy
// and seeded sampled output is token for token the output without them, under batching, chunked
// prefill, preemption, prefix caching, stop tokens and max_tokens; accepted drafts are counted, and
// every block returns.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

std::unique_ptr<Engine> MakeSpeculativeEngine(Backend* backend, int drafts,
                                              int max_num_batched_tokens = 2048,
                                              bool prefix_caching = true) {
  EngineOptions options;
  options.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  options.scheduler.max_num_seqs = std::min(32, max_num_batched_tokens);
  options.enable_prefix_caching = prefix_caching;
  if (drafts > 0) {
    options.speculative.method = SpeculativeMethod::kNgram;
    options.speculative.num_speculative_tokens = drafts;
  }
  auto engine = Engine::Create(backend, options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(engine).value();
}

// Prompts that repeat a short phrase (`salt` picks it), so prompt lookup has something to copy,
// two sharing a long prefix (prefix caching), of different lengths (chunked prefill).
std::vector<GenerateRequest> RepetitiveRequests(int n, int max_tokens) {
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < n; ++i) {
    std::vector<TokenId> prompt = MakePrompt(12, i % 4);  // pairs share their first 12 tokens
    const std::vector<TokenId> phrase = MakePrompt(3 + i % 3, 100 + i);
    for (int r = 0; r < 3 + i % 4; ++r) prompt.insert(prompt.end(), phrase.begin(), phrase.end());
    requests.push_back(GreedyRequest(prompt, max_tokens + i % 5));
  }
  return requests;
}

struct EngineRun {
  std::vector<GenerationResult> results;
  EngineStats stats;
};

EngineRun RunEngineOn(FakeBackend& backend, int drafts, std::vector<GenerateRequest> requests,
                      int max_num_batched_tokens = 2048) {
  auto engine = MakeSpeculativeEngine(&backend, drafts, max_num_batched_tokens);
  EngineRun run;
  run.results = RunAll(*engine, std::move(requests));
  run.stats = engine->Stats();
  return run;
}

void ExpectSameTokens(const EngineRun& plain, const EngineRun& speculative) {
  ASSERT_EQ(plain.results.size(), speculative.results.size());
  for (size_t i = 0; i < plain.results.size(); ++i) {
    EXPECT_EQ(speculative.results[i].tokens, plain.results[i].tokens) << "request " << i;
    EXPECT_EQ(speculative.results[i].finish_reason, plain.results[i].finish_reason)
        << "request " << i;
    EXPECT_EQ(speculative.results[i].usage.completion_tokens,
              plain.results[i].usage.completion_tokens)
        << "request " << i;
    EXPECT_TRUE(speculative.results[i].status.ok()) << speculative.results[i].status;
  }
}

// The hash model: drafts are almost always wrong, and every wrong one must leave no trace.
TEST(EngineSpeculativeTest, RejectedDraftsLeaveTheGreedyOutputUnchanged) {
  for (int block_size : {1, 4, 16}) {
    FakeBackend plain_backend(kVocab, 256, block_size);
    FakeBackend spec_backend(kVocab, 256, block_size);
    const EngineRun plain = RunEngineOn(plain_backend, 0, RepetitiveRequests(12, 30));
    const EngineRun spec = RunEngineOn(spec_backend, 4, RepetitiveRequests(12, 30));
    ExpectSameTokens(plain, spec);
    for (size_t i = 0; i < plain.results.size(); ++i) {
      std::vector<TokenId> prompt = RepetitiveRequests(12, 30)[i].prompt;
      EXPECT_EQ(spec.results[i].tokens,
                FakeBackend::ReferenceGreedy(prompt, kVocab, 30 + static_cast<int>(i) % 5))
          << "request " << i << ", block size " << block_size;
    }
    EXPECT_GT(spec.stats.num_spec_verifications, 0) << "block size " << block_size;
    EXPECT_GT(spec.stats.num_spec_draft_tokens, spec.stats.num_spec_accepted_tokens);
    EXPECT_EQ(spec.stats.num_free_kv_blocks, 256) << "block size " << block_size;
  }
}

// A model that repeats itself: drafts are accepted, steps yield several tokens, the output is the
// same.
TEST(EngineSpeculativeTest, AcceptedDraftsGiveTheSameTokensInFewerSteps) {
  for (int period : {3, 5}) {
    FakeBackend plain_backend(kVocab, 256, 4);
    FakeBackend spec_backend(kVocab, 256, 4);
    plain_backend.set_repeat_period(period);
    spec_backend.set_repeat_period(period);
    const EngineRun plain = RunEngineOn(plain_backend, 0, RepetitiveRequests(8, 40));
    const EngineRun spec = RunEngineOn(spec_backend, 4, RepetitiveRequests(8, 40));
    ExpectSameTokens(plain, spec);
    EXPECT_GT(spec.stats.num_spec_accepted_tokens, spec.stats.num_spec_draft_tokens / 2)
        << "period " << period;
    EXPECT_GE(spec.stats.spec_accepted_by_position[0], spec.stats.spec_accepted_by_position[3]);
    EXPECT_GT(spec.stats.spec_accepted_by_position[3], 0);
    EXPECT_LT(spec.stats.num_steps, plain.stats.num_steps * 2 / 3) << "period " << period;
    EXPECT_EQ(spec.stats.num_generated_tokens, plain.stats.num_generated_tokens);
    EXPECT_EQ(spec.stats.num_free_kv_blocks, 256);
  }
}

// Chunked prefill (a small token budget that also cuts drafts), preemption (a pool too small
// for all at once), stop tokens and EOS inside accepted drafts, a context limit.
TEST(EngineSpeculativeTest, SameTokensUnderChunkingPreemptionAndStops) {
  int64_t spec_preemptions = 0;
  for (int period : {0, 4}) {
    auto make = [&](int blocks) {
      auto b = std::make_unique<FakeBackend>(kVocab, blocks, 4, /*max_position_embeddings=*/64);
      if (period > 0) b->set_repeat_period(period);
      return b;
    };
    auto requests = [] {
      std::vector<GenerateRequest> r = RepetitiveRequests(10, 40);
      r[1].params.stop_token_ids = {r[1].prompt[13], r[1].prompt[14]};
      r[2].params.max_tokens = 2;
      r[3].params.max_tokens = 1;
      return r;
    };
    for (int budget : {8, 40}) {
      auto plain_backend = make(32);
      auto spec_backend = make(32);
      const EngineRun plain = RunEngineOn(*plain_backend, 0, requests(), budget);
      const EngineRun spec = RunEngineOn(*spec_backend, 3, requests(), budget);
      ExpectSameTokens(plain, spec);
      EXPECT_GT(plain.stats.num_preemptions, 0) << "period " << period << " budget " << budget;
      spec_preemptions += spec.stats.num_preemptions;  // faster, it may need none
      EXPECT_EQ(spec.stats.num_free_kv_blocks, 32);
    }
  }
  EXPECT_GT(spec_preemptions, 0);
}

// Sampled requests speculate too, and a seeded one gives the tokens it gives without speculation:
// one draw per emitted token, in the same order (speculative.h). Low temperature: drafts mostly
// accepted; high: mostly rejected.
TEST(EngineSpeculativeTest, SeededSampledRequestsGiveTheSameTokens) {
  for (float temperature : {0.2f, 1.0f}) {
    FakeBackend plain_backend(kVocab, 256, 4);
    FakeBackend spec_backend(kVocab, 256, 4);
    plain_backend.set_repeat_period(3);
    spec_backend.set_repeat_period(3);
    auto requests = [&] {
      std::vector<GenerateRequest> r = RepetitiveRequests(8, 40);
      for (size_t i = 0; i < r.size(); ++i) {
        r[i].params.temperature = temperature;
        r[i].params.seed = 11 + i;
        r[i].params.logprobs = i % 2 == 0 ? 2 : -1;
      }
      return r;
    };
    const EngineRun plain = RunEngineOn(plain_backend, 0, requests());
    const EngineRun spec = RunEngineOn(spec_backend, 4, requests());
    ExpectSameTokens(plain, spec);
    for (size_t i = 0; i < plain.results.size(); ++i) {
      EXPECT_EQ(spec.results[i].logprobs, plain.results[i].logprobs) << "request " << i;
      EXPECT_EQ(spec.results[i].top_logprobs, plain.results[i].top_logprobs) << "request " << i;
      EXPECT_EQ(spec.results[i].rng_counters, plain.results[i].rng_counters) << "request " << i;
    }
    EXPECT_GT(spec.stats.num_spec_verifications, 20) << temperature;
    EXPECT_GT(spec.stats.num_spec_accepted_tokens, 0) << temperature;
    EXPECT_LT(spec.stats.num_spec_accepted_tokens, spec.stats.num_spec_draft_tokens) << temperature;
    if (temperature < 0.5f) {
      EXPECT_LT(spec.stats.num_steps, plain.stats.num_steps) << temperature;
    }
    EXPECT_EQ(spec.stats.num_free_kv_blocks, 256);
  }
}

// The statistical check, over 3,000 seeded requests: the repeat model gives the token 3 places
// back probability p = e^4 / (e^4 + 63) at temperature 0.25 and every other token (1 - p) / 63,
// whatever came before. Every token after the first (most of them from verification steps, where
// drafts were accepted or rejected) is binned by its offset from the token 3 places back; the 64
// bins must fit that distribution (chi-square, 63 degrees of freedom).
TEST(EngineSpeculativeTest, SampledTokensFollowTheTargetDistribution) {
  FakeBackend backend(kVocab, 1024, 4);
  backend.set_repeat_period(3);
  auto engine = MakeSpeculativeEngine(&backend, 3);
  const std::vector<TokenId> prompt = {5, 9, 2, 5, 9, 2, 5, 9, 2};
  constexpr int kRequests = 3000;
  constexpr int kMaxTokens = 5;
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    GenerateRequest r = GreedyRequest(prompt, kMaxTokens);
    r.params.temperature = 0.25f;
    r.params.seed = 1000 + i;
    requests.push_back(std::move(r));
  }
  const std::vector<GenerationResult> results = RunAll(*engine, std::move(requests));
  std::vector<int64_t> bins(kVocab, 0);
  int64_t samples = 0;
  for (const GenerationResult& result : results) {
    ASSERT_TRUE(result.status.ok()) << result.status;
    ASSERT_EQ(result.tokens.size(), static_cast<size_t>(kMaxTokens));
    std::vector<TokenId> history = prompt;
    history.insert(history.end(), result.tokens.begin(), result.tokens.end());
    for (size_t pos = prompt.size() + 1; pos < history.size(); ++pos) {
      ++bins[(history[pos] - history[pos - 3] + kVocab) % kVocab];
      ++samples;
    }
  }
  const EngineStats stats = engine->Stats();
  EXPECT_GT(stats.num_spec_verifications, kRequests);
  EXPECT_GT(stats.num_spec_accepted_tokens, stats.num_spec_draft_tokens / 5);
  EXPECT_LT(stats.num_spec_accepted_tokens, stats.num_spec_draft_tokens * 4 / 5);
  const double p_repeat = std::exp(4.0) / (std::exp(4.0) + (kVocab - 1));
  double chi_square = 0.0;
  for (int b = 0; b < kVocab; ++b) {
    const double expected = samples * (b == 0 ? p_repeat : (1.0 - p_repeat) / (kVocab - 1));
    chi_square += (bins[b] - expected) * (bins[b] - expected) / expected;
  }
  // 63 degrees of freedom: mean 63, standard deviation 11.2; 115 is past the 99.99th percentile.
  EXPECT_LT(chi_square, 115.0) << "repeat bin " << bins[0] << " of " << samples;
  EXPECT_NEAR(static_cast<double>(bins[0]) / samples, p_repeat, 0.02);
}

TEST(EngineSpeculativeTest, BadOptionsAreRefused) {
  FakeBackend backend(kVocab, 16, 4);
  EngineOptions options;
  options.speculative.method = SpeculativeMethod::kNgram;
  options.speculative.num_speculative_tokens = 0;
  auto engine = Engine::Create(&backend, options);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(std::string(engine.status().message()).find("num-speculative-tokens"),
            std::string::npos);
  // sim drafts come from the sim backend, and only sim takes a proposer from outside.
  options.speculative.num_speculative_tokens = 2;
  options.speculative.method = SpeculativeMethod::kSim;
  engine = Engine::Create(&backend, options);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(std::string(engine.status().message()).find("--backend sim"), std::string::npos);
  options.speculative.method = SpeculativeMethod::kNgram;
  options.draft_proposer = [](std::span<const TokenId>, int32_t, std::vector<TokenId>*) {};
  EXPECT_FALSE(Engine::Create(&backend, options).ok());
  options.draft_proposer = nullptr;
  options.speculative.sim_acceptance_rate = 1.5;
  EXPECT_TRUE(Engine::Create(&backend, options).ok());  // only sim reads the rate
  options.speculative.method = SpeculativeMethod::kSim;
  options.draft_proposer = [](std::span<const TokenId>, int32_t, std::vector<TokenId>*) {};
  engine = Engine::Create(&backend, options);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(std::string(engine.status().message()).find("sim-acceptance-rate"), std::string::npos);
}

}  // namespace
}  // namespace tandem
