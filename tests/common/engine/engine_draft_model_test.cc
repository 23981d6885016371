// Speculative decoding with a draft model in the engine (--speculative draft): the draft is a
// FakeBackend of its own, so its KV bookkeeping is checked as strictly as the target's. Greedy
// and seeded sampled output is token for token the output without speculation, under batching,
// chunked prefill, preemption and stops; a draft that agrees with the target saves steps, one
// that does not costs none of the output; every block of both pools returns.
#include <memory>
#include <string>
#include <vector>

#include "common/engine/draft_model.h"
#include "common/engine/engine.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

// A draft over a FakeBackend: repeat_period 0 is the hash model, > 0 the repeating one.
std::shared_ptr<DraftModel> MakeFakeDraft(int repeat_period, int num_blocks = 512,
                                          int32_t max_batch_tokens = 2048) {
  auto backend = std::make_unique<FakeBackend>(kVocab, num_blocks, 4);
  if (repeat_period > 0) backend->set_repeat_period(repeat_period);
  ModelConfig target = backend->config();
  auto draft = DraftModel::Create(std::move(backend), target, max_batch_tokens);
  EXPECT_TRUE(draft.ok()) << draft.status();
  return std::move(draft).value();
}

struct DraftRun {
  std::vector<GenerationResult> results;
  EngineStats stats;
};

// Runs `requests` on `target`, with `draft` proposing `drafts` tokens per step (none: plain).
DraftRun RunWithDraft(FakeBackend& target, std::shared_ptr<DraftModel> draft, int drafts,
                      std::vector<GenerateRequest> requests, int max_num_batched_tokens = 2048) {
  EngineOptions options;
  options.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  options.scheduler.max_num_seqs = std::min(32, max_num_batched_tokens);
  if (draft != nullptr) {
    options.speculative.method = SpeculativeMethod::kDraft;
    options.speculative.draft_model_dir = "fake";
    options.speculative.num_speculative_tokens = drafts;
    options.draft_model = std::move(draft);
  }
  auto engine = Engine::Create(&target, options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  DraftRun run;
  run.results = RunAll(**engine, std::move(requests));
  run.stats = (*engine)->Stats();
  return run;
}

std::vector<GenerateRequest> DraftTestRequests(int n, int max_tokens) {
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < n; ++i) {
    std::vector<TokenId> prompt = MakePrompt(12, i % 4);  // pairs share their first 12 tokens
    const std::vector<TokenId> tail = MakePrompt(2 + i % 7, 50 + i);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    requests.push_back(GreedyRequest(prompt, max_tokens + i % 5));
  }
  return requests;
}

void ExpectSameOutput(const DraftRun& plain, const DraftRun& speculative) {
  ASSERT_EQ(plain.results.size(), speculative.results.size());
  for (size_t i = 0; i < plain.results.size(); ++i) {
    EXPECT_TRUE(speculative.results[i].status.ok()) << speculative.results[i].status;
    EXPECT_EQ(speculative.results[i].tokens, plain.results[i].tokens) << "request " << i;
    EXPECT_EQ(speculative.results[i].finish_reason, plain.results[i].finish_reason) << i;
    EXPECT_EQ(speculative.results[i].logprobs, plain.results[i].logprobs) << "request " << i;
    EXPECT_EQ(speculative.results[i].rng_counters, plain.results[i].rng_counters) << i;
  }
}

// The draft is the target's own model: every draft stands, a step yields K + 1 tokens.
TEST(EngineDraftModelTest, ADraftThatAgreesSavesStepsAndChangesNothing) {
  FakeBackend plain_target(kVocab, 256, 4);
  FakeBackend spec_target(kVocab, 256, 4);
  plain_target.set_repeat_period(3);
  spec_target.set_repeat_period(3);
  std::shared_ptr<DraftModel> draft = MakeFakeDraft(3);
  const DraftRun plain = RunWithDraft(plain_target, nullptr, 0, DraftTestRequests(10, 40));
  const DraftRun spec = RunWithDraft(spec_target, draft, 4, DraftTestRequests(10, 40));
  ExpectSameOutput(plain, spec);
  EXPECT_EQ(spec.stats.num_spec_accepted_tokens, spec.stats.num_spec_draft_tokens);
  EXPECT_GT(spec.stats.num_spec_verifications, 50);
  EXPECT_LT(spec.stats.num_steps, plain.stats.num_steps / 3);
  EXPECT_EQ(spec.stats.num_free_kv_blocks, 256);
  EXPECT_EQ(draft->num_sequences(), 0);  // each request's draft KV went with it
  EXPECT_EQ(draft->num_free_blocks(), 512);
}

// The draft repeats, the target hashes: nearly every draft is wrong and leaves no trace.
TEST(EngineDraftModelTest, ADraftThatDisagreesChangesNothing) {
  FakeBackend plain_target(kVocab, 256, 4);
  FakeBackend spec_target(kVocab, 256, 4);
  std::shared_ptr<DraftModel> draft = MakeFakeDraft(2);
  const DraftRun plain = RunWithDraft(plain_target, nullptr, 0, DraftTestRequests(10, 30));
  const DraftRun spec = RunWithDraft(spec_target, draft, 3, DraftTestRequests(10, 30));
  ExpectSameOutput(plain, spec);
  for (size_t i = 0; i < plain.results.size(); ++i) {
    EXPECT_EQ(spec.results[i].tokens,
              FakeBackend::ReferenceGreedy(DraftTestRequests(10, 30)[i].prompt, kVocab,
                                           30 + static_cast<int>(i) % 5))
        << "request " << i;
  }
  EXPECT_GT(spec.stats.num_spec_draft_tokens, 100);
  EXPECT_LT(spec.stats.num_spec_accepted_tokens, spec.stats.num_spec_draft_tokens / 4);
  EXPECT_EQ(spec.stats.num_free_kv_blocks, 256);
  EXPECT_EQ(draft->num_free_blocks(), 512);
}

// Chunked prefill (a budget of 8 tokens that also bounds the draft's catch-up), preemption (a
// target pool too small for all at once), a draft pool too small for everyone, stop tokens.
TEST(EngineDraftModelTest, SameTokensUnderChunkingPreemptionAndAShortDraftPool) {
  int64_t preemptions = 0;
  for (int budget : {8, 40}) {
    for (int draft_blocks : {6, 512}) {
      auto requests = [] {
        std::vector<GenerateRequest> r = DraftTestRequests(10, 40);
        r[1].params.stop_token_ids = {r[1].prompt[13]};
        r[2].params.max_tokens = 2;
        r[3].params.max_tokens = 1;
        return r;
      };
      FakeBackend plain_target(kVocab, 32, 4, /*max_position_embeddings=*/64);
      FakeBackend spec_target(kVocab, 32, 4, /*max_position_embeddings=*/64);
      plain_target.set_repeat_period(4);
      spec_target.set_repeat_period(4);
      std::shared_ptr<DraftModel> draft = MakeFakeDraft(4, draft_blocks, budget);
      const DraftRun plain = RunWithDraft(plain_target, nullptr, 0, requests(), budget);
      const DraftRun spec = RunWithDraft(spec_target, draft, 3, requests(), budget);
      ExpectSameOutput(plain, spec);
      EXPECT_GT(plain.stats.num_preemptions, 0) << budget;
      preemptions += spec.stats.num_preemptions;
      EXPECT_GT(spec.stats.num_spec_accepted_tokens, 0) << budget << " " << draft_blocks;
      if (draft_blocks == 6) EXPECT_GT(draft->stats().num_out_of_blocks, 0) << budget;
      EXPECT_EQ(spec.stats.num_free_kv_blocks, 32);
      EXPECT_EQ(draft->num_free_blocks(), draft_blocks);
    }
  }
  EXPECT_GT(preemptions, 0);
}

// A seeded sampled request gives the tokens, logprobs and generator counters it gives without
// speculation: the draft's greedy token is a point mass (draft_model.h).
TEST(EngineDraftModelTest, SeededSampledRequestsGiveTheSameTokens) {
  for (float temperature : {0.2f, 1.0f}) {
    auto requests = [&] {
      std::vector<GenerateRequest> r = DraftTestRequests(8, 30);
      for (size_t i = 0; i < r.size(); ++i) {
        r[i].params.temperature = temperature;
        r[i].params.seed = 21 + i;
        r[i].params.logprobs = i % 2 == 0 ? 2 : -1;
      }
      return r;
    };
    FakeBackend plain_target(kVocab, 256, 4);
    FakeBackend spec_target(kVocab, 256, 4);
    plain_target.set_repeat_period(3);
    spec_target.set_repeat_period(3);
    const DraftRun plain = RunWithDraft(plain_target, nullptr, 0, requests());
    const DraftRun spec = RunWithDraft(spec_target, MakeFakeDraft(3), 4, requests());
    ExpectSameOutput(plain, spec);
    EXPECT_GT(spec.stats.num_spec_accepted_tokens, 0) << temperature;
    EXPECT_LT(spec.stats.num_spec_accepted_tokens, spec.stats.num_spec_draft_tokens) << temperature;
  }
}

TEST(EngineDraftModelTest, ADraftModelGoesWithSpeculativeDraftOnly) {
  FakeBackend backend(kVocab, 16, 4);
  EngineOptions options;
  options.speculative.method = SpeculativeMethod::kDraft;
  options.speculative.draft_model_dir = "somewhere";
  auto engine = Engine::Create(&backend, options);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(std::string(engine.status().message()).find("--draft-model DIR"), std::string::npos);
  options.speculative.method = SpeculativeMethod::kNgram;
  options.speculative.draft_model_dir.clear();
  options.draft_model = MakeFakeDraft(0, 16);
  engine = Engine::Create(&backend, options);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(std::string(engine.status().message()).find("without --speculative draft"),
            std::string::npos);
  // The options alone: a directory without the method, and the method without a directory.
  SpeculativeOptions spec;
  spec.draft_model_dir = "d";
  EXPECT_NE(std::string(spec.Validate().message()).find("--draft-model is for --speculative draft"),
            std::string::npos);
  spec.method = SpeculativeMethod::kDraft;
  spec.draft_model_dir.clear();
  EXPECT_NE(std::string(spec.Validate().message()).find("needs --draft-model DIR"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
