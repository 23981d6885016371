// DraftModel (common/engine/draft_model.h) over the engine tests' FakeBackend, whose logits depend
// on exactly the tokens and positions written to its pool: every proposal must equal the draft
// model's greedy continuation of the context computed from scratch, however the previous steps'
// drafts were accepted or rejected, batched, budgeted or interrupted.
#include "common/engine/draft_model.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

void WriteTokenizerFile(const std::string& path, const std::string& contents) {
  std::ofstream(path) << contents;
}

struct DraftUnderTest {
  FakeBackend* backend = nullptr;  // owned by `model`
  std::unique_ptr<DraftModel> model;
};

DraftUnderTest MakeDraft(int num_blocks, int block_size = 4, int32_t max_batch_tokens = 512) {
  auto backend = std::make_unique<FakeBackend>(kVocab, num_blocks, block_size);
  DraftUnderTest draft;
  draft.backend = backend.get();
  ModelConfig target = backend->config();
  auto made = DraftModel::Create(std::move(backend), target, max_batch_tokens);
  EXPECT_TRUE(made.ok()) << made.status();
  draft.model = std::move(made).value();
  return draft;
}

std::vector<TokenId> ProposeOne(DraftModel& model, RequestId id, std::span<const TokenId> context,
                                int32_t max_drafts) {
  std::vector<TokenId> drafts = {99};  // replaced
  DraftAsk ask{.id = id, .context = context, .max_drafts = max_drafts, .drafts = &drafts};
  absl::Status status = model.Propose(std::span<DraftAsk>(&ask, 1));
  EXPECT_TRUE(status.ok()) << status;
  return drafts;
}

TEST(DraftModelTest, DraftsAreTheDraftModelsGreedyContinuation) {
  DraftUnderTest draft = MakeDraft(64);
  const std::vector<TokenId> context = MakePrompt(10, 1);
  EXPECT_EQ(ProposeOne(*draft.model, 1, context, 4),
            FakeBackend::ReferenceGreedy(context, kVocab, 4));
  // One catch-up pass over the context, then one pass per further draft.
  EXPECT_EQ(draft.backend->calls().size(), 4u);
  EXPECT_EQ(draft.model->stats().num_catch_up_tokens, 10);
  EXPECT_EQ(draft.model->stats().num_proposed_tokens, 4);
  EXPECT_EQ(ProposeOne(*draft.model, 2, context, 1),
            FakeBackend::ReferenceGreedy(context, kVocab, 1));
}

// A decode loop as the engine runs it: each step accepts some of the drafts (none, some, all) and
// appends the target's own token; the drafts of the next step must be those of a draft model that
// never saw the rejected ones.
TEST(DraftModelTest, RejectedDraftsRollBackAndAcceptedOnesAreNotRecomputed) {
  for (int block_size : {1, 4, 16}) {
    const int blocks = 256 / block_size;  // room for the context's ~140 positions
    DraftUnderTest draft = MakeDraft(blocks, block_size);
    std::vector<TokenId> context = MakePrompt(9, 3);
    int64_t expected_catch_up = 0;
    int64_t next_catch_up = static_cast<int64_t>(context.size());  // the first: the whole prompt
    constexpr int32_t kDrafts = 4;
    for (int step = 0; step < 24; ++step) {
      const std::vector<TokenId> drafts = ProposeOne(*draft.model, 7, context, kDrafts);
      expected_catch_up += next_catch_up;
      ASSERT_EQ(drafts, FakeBackend::ReferenceGreedy(context, kVocab, kDrafts))
          << "step " << step << ", block size " << block_size;
      const int accepted = (step * 7) % (kDrafts + 1);  // 0..4
      context.insert(context.end(), drafts.begin(), drafts.begin() + accepted);
      context.push_back(static_cast<TokenId>((drafts[std::min(accepted, kDrafts - 1)] + 1 + step) %
                                             kVocab));  // the target's token: not the draft
      // Next catch-up: the accepted drafts the draft never fed (only the last, when all are
      // accepted), and the target's token.
      next_catch_up = accepted == kDrafts ? 2 : 1;
    }
    EXPECT_EQ(draft.model->stats().num_catch_up_tokens, expected_catch_up)
        << "block size " << block_size;
    draft.model->Forget(7);
    EXPECT_EQ(draft.model->num_free_blocks(), blocks);
    EXPECT_EQ(draft.model->num_sequences(), 0);
  }
}

TEST(DraftModelTest, ASequenceBatchesWithOthersInOnePassPerPosition) {
  DraftUnderTest draft = MakeDraft(128);
  std::vector<std::vector<TokenId>> contexts;
  for (int i = 0; i < 5; ++i) contexts.push_back(MakePrompt(4 + 3 * i, 10 + i));
  std::vector<std::vector<TokenId>> drafts(contexts.size());
  std::vector<DraftAsk> asks;
  for (size_t i = 0; i < contexts.size(); ++i) {
    asks.push_back(DraftAsk{.id = i + 1,
                            .context = contexts[i],
                            .max_drafts = static_cast<int32_t>(1 + i % 4),
                            .drafts = &drafts[i]});
  }
  ASSERT_TRUE(draft.model->Propose(asks).ok());
  for (size_t i = 0; i < contexts.size(); ++i) {
    EXPECT_EQ(drafts[i], FakeBackend::ReferenceGreedy(contexts[i], kVocab, 1 + i % 4)) << i;
  }
  const std::vector<FakeBackend::Call> calls = draft.backend->calls();
  ASSERT_EQ(calls.size(), 4u);  // the longest ask drafts 4
  EXPECT_EQ(calls[0].num_items, 5);
  EXPECT_EQ(calls[0].num_logits, 5);
  EXPECT_EQ(calls[1].num_items, 3);  // asks drafting 2, 3 and 4 (i = 1, 2, 3)
  EXPECT_EQ(calls[3].num_items, 1);
}

// A long context (a prompt imported onto a decode node) is caught up over several steps within
// the token budget, proposing nothing until it is.
TEST(DraftModelTest, LongContextsCatchUpWithinTheTokenBudget) {
  DraftUnderTest draft = MakeDraft(64, 4, /*max_batch_tokens=*/8);
  const std::vector<TokenId> context = MakePrompt(20, 5);
  EXPECT_TRUE(ProposeOne(*draft.model, 1, context, 3).empty());
  EXPECT_TRUE(ProposeOne(*draft.model, 1, context, 3).empty());
  EXPECT_EQ(ProposeOne(*draft.model, 1, context, 3),
            FakeBackend::ReferenceGreedy(context, kVocab, 3));
  for (const FakeBackend::Call& call : draft.backend->calls()) EXPECT_LE(call.num_tokens, 8);
  EXPECT_EQ(draft.model->stats().num_catch_up_tokens, 20);
}

TEST(DraftModelTest, WithoutBlocksASequenceProposesNothingAndKeepsNone) {
  DraftUnderTest draft = MakeDraft(4, 4);  // 16 positions in all
  EXPECT_TRUE(ProposeOne(*draft.model, 1, MakePrompt(20, 1), 2).empty());
  EXPECT_EQ(draft.model->stats().num_out_of_blocks, 1);
  EXPECT_EQ(draft.model->num_free_blocks(), 4);
  const std::vector<TokenId> context = MakePrompt(10, 2);  // 10 + 3 positions: 4 blocks
  EXPECT_EQ(ProposeOne(*draft.model, 2, context, 4),
            FakeBackend::ReferenceGreedy(context, kVocab, 4));
  EXPECT_EQ(draft.model->num_free_blocks(), 0);
  // Another sequence finds no room and gets nothing; the first keeps its KV.
  EXPECT_TRUE(ProposeOne(*draft.model, 3, MakePrompt(5, 3), 2).empty());
  draft.model->Forget(2);
  EXPECT_EQ(draft.model->num_free_blocks(), 4);
  draft.model->Forget(2);  // twice is harmless
  EXPECT_EQ(draft.model->num_free_blocks(), 4);
}

TEST(DraftModelTest, ABackendFailureCostsTheStepItsDraftsOnly) {
  DraftUnderTest draft = MakeDraft(64);
  const std::vector<TokenId> context = MakePrompt(12, 4);
  draft.backend->FailNextForward(absl::InternalError("device lost"));
  std::vector<TokenId> drafts = {1, 2};
  DraftAsk ask{.id = 1, .context = context, .max_drafts = 3, .drafts = &drafts};
  absl::Status status = draft.model->Propose(std::span<DraftAsk>(&ask, 1));
  EXPECT_THAT(status.message(), HasSubstr("device lost"));
  EXPECT_TRUE(drafts.empty());
  EXPECT_EQ(draft.model->num_free_blocks(), 64);
  EXPECT_EQ(ProposeOne(*draft.model, 1, context, 3),
            FakeBackend::ReferenceGreedy(context, kVocab, 3));
}

TEST(DraftModelTest, ADraftMustShareTheTargetsTokenIds) {
  ModelConfig target;
  target.vocab_size = 64;
  target.bos_token_id = 1;
  target.eos_token_ids = {2};
  ModelConfig draft = target;
  EXPECT_TRUE(CheckDraftConfig(draft, target).ok());
  draft.vocab_size = 65;
  EXPECT_THAT(CheckDraftConfig(draft, target).message(),
              HasSubstr("vocabulary has 65 tokens and the target's 64"));
  draft = target;
  draft.eos_token_ids = {3};
  EXPECT_THAT(CheckDraftConfig(draft, target).message(), HasSubstr("eos_token_id is [3]"));
  auto backend = std::make_unique<FakeBackend>(kVocab + 1, 8, 4);
  EXPECT_FALSE(DraftModel::Create(std::move(backend), target, 16).ok());

  const std::string dir = ::testing::TempDir() + "/draft_tokenizer";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/draft");
  std::filesystem::create_directories(dir + "/target");
  EXPECT_TRUE(CheckDraftTokenizer(dir + "/draft", dir + "/target").ok());  // neither has one
  WriteTokenizerFile(dir + "/draft/tokenizer.json", R"({"model": "a"})");
  WriteTokenizerFile(dir + "/target/tokenizer.json", R"({"model": "a"})");
  EXPECT_TRUE(CheckDraftTokenizer(dir + "/draft", dir + "/target").ok());
  WriteTokenizerFile(dir + "/target/tokenizer.json", R"({"model": "b"})");
  absl::Status differs = CheckDraftTokenizer(dir + "/draft", dir + "/target");
  EXPECT_THAT(differs.message(), HasSubstr("draft/tokenizer.json differs from"));
  EXPECT_THAT(differs.message(), HasSubstr("the target's tokenizer"));
}

}  // namespace
}  // namespace tandem
