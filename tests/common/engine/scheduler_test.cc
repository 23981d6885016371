#include "common/engine/scheduler.h"

#include <memory>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

std::vector<TokenId> Prompt(int n, TokenId start = 1) {
  std::vector<TokenId> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Init(int num_blocks, int block_size, int budget, int max_seqs) {
    blocks_ = std::make_unique<BlockManager>(num_blocks, block_size);
    SchedulerOptions options;
    options.max_num_batched_tokens = budget;
    options.max_num_seqs = max_seqs;
    scheduler_ = std::make_unique<Scheduler>(options, blocks_.get(), &clock_);
  }

  Sequence* Add(RequestId id, std::vector<TokenId> prompt) {
    SamplingParams params;
    auto seq = std::make_unique<Sequence>(id, std::move(prompt), params, /*seed=*/id);
    Sequence* raw = seq.get();
    scheduler_->Add(std::move(seq));
    return raw;
  }

  // Marks the step computed and appends a token (100 + output index) to each sequence that
  // sampled.
  void Complete(const SchedulerOutput& out) {
    scheduler_->CompleteStep(out);
    for (const ScheduledChunk& c : out.chunks) {
      if (c.want_logits) c.seq->tokens.push_back(100 + c.seq->num_output_tokens());
    }
  }

  ManualClock clock_{1000};
  std::unique_ptr<BlockManager> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, OptionsValidation) {
  SchedulerOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.max_num_seqs = 0;
  EXPECT_FALSE(o.Validate().ok());
  o.max_num_seqs = 8;
  o.max_num_batched_tokens = 4;
  EXPECT_EQ(o.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SchedulerTest, LongPromptIsChunkedUnderTheBudget) {
  Init(/*num_blocks=*/64, /*block_size=*/4, /*budget=*/32, /*max_seqs=*/4);
  Sequence* seq = Add(1, Prompt(100));
  EXPECT_EQ(seq->arrival_nanos, 1000);
  SchedulerOutput out;
  std::vector<int> chunk_sizes;
  for (int step = 0; step < 4; ++step) {
    scheduler_->Schedule(&out);
    ASSERT_EQ(out.chunks.size(), 1u);
    EXPECT_LE(out.num_batched_tokens, 32);
    EXPECT_EQ(out.chunks[0].start_pos, step * 32);
    EXPECT_EQ(out.chunks[0].want_logits, step == 3);
    chunk_sizes.push_back(out.chunks[0].num_tokens);
    Complete(out);
  }
  EXPECT_THAT(chunk_sizes, ::testing::ElementsAre(32, 32, 32, 4));
  EXPECT_EQ(seq->num_output_tokens(), 1);
  // The whole prompt's blocks were reserved at admission.
  EXPECT_EQ(seq->block_table.blocks.size(), 25u);
  // Next step decodes position 100, which needs a fresh block.
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.num_decodes, 1);
  EXPECT_EQ(out.chunks[0].start_pos, 100);
  EXPECT_EQ(seq->block_table.blocks.size(), 26u);
}

TEST_F(SchedulerTest, DecodesComeFirstThenPrefillChunks) {
  Init(64, 4, /*budget=*/10, 8);
  Sequence* a = Add(1, Prompt(3));
  Sequence* b = Add(2, Prompt(4, 50));
  SchedulerOutput out;
  scheduler_->Schedule(&out);  // both prefills fit: 3 + 4
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.num_decodes, 0);
  Complete(out);

  Sequence* c = Add(3, Prompt(20, 200));
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 3u);
  EXPECT_EQ(out.num_decodes, 2);
  EXPECT_EQ(out.chunks[0].seq, a);
  EXPECT_EQ(out.chunks[1].seq, b);
  EXPECT_EQ(out.chunks[2].seq, c);
  EXPECT_EQ(out.chunks[2].num_tokens, 8);  // 10 - 2 decodes
  EXPECT_FALSE(out.chunks[2].want_logits);
  EXPECT_EQ(out.num_batched_tokens, 10);
  Complete(out);

  // c keeps prefilling after the decodes, ahead of any new admission.
  Add(4, Prompt(5, 300));
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 3u);
  EXPECT_EQ(out.chunks[2].seq, c);
  EXPECT_EQ(out.chunks[2].start_pos, 8);
  EXPECT_EQ(out.chunks[2].num_tokens, 8);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
}

TEST_F(SchedulerTest, MaxNumSeqsCapsRunningSet) {
  Init(64, 4, 64, /*max_seqs=*/2);
  for (RequestId id = 1; id <= 3; ++id) Add(id, Prompt(3, id * 10));
  SchedulerOutput out;
  scheduler_->Schedule(&out);
  EXPECT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(scheduler_->num_running(), 2);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  Complete(out);
  scheduler_->Finish(1, FinishReason::kStop);
  scheduler_->Schedule(&out);
  EXPECT_EQ(out.chunks.size(), 2u);  // seq 2's decode and seq 3's prefill
  EXPECT_EQ(out.num_decodes, 1);
  EXPECT_EQ(out.chunks[1].seq->id, 3u);
}

TEST_F(SchedulerTest, WaitingHeadBlocksWhenPoolIsFull) {
  Init(/*num_blocks=*/4, /*block_size=*/4, 64, 8);
  Add(1, Prompt(12));
  Add(2, Prompt(8, 100));  // needs 2 blocks, only 1 left after seq 1
  Add(3, Prompt(2, 200));  // would fit, but must not overtake seq 2
  SchedulerOutput out;
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(scheduler_->num_waiting(), 2);
  Complete(out);
  scheduler_->Finish(1, FinishReason::kStop);
  EXPECT_EQ(blocks_->num_free_blocks(), 4);
  scheduler_->Schedule(&out);
  EXPECT_EQ(out.chunks.size(), 2u);
}

TEST_F(SchedulerTest, PreemptsNewestWhenBlocksRunOutAndResumes) {
  // 6 blocks of 2 tokens. Two 4-token prompts take 2 blocks each; decoding needs more.
  Init(/*num_blocks=*/6, /*block_size=*/2, 64, 8);
  Sequence* a = Add(1, Prompt(4, 10));
  Sequence* b = Add(2, Prompt(4, 20));
  SchedulerOutput out;
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 2u);
  Complete(out);  // a and b have 1 output token each; 4 blocks used

  // Positions 4 and 5 take one more block each: 2 free, both fit.
  for (int step = 0; step < 2; ++step) {
    scheduler_->Schedule(&out);
    ASSERT_EQ(out.chunks.size(), 2u);
    EXPECT_TRUE(out.preempted.empty());
    Complete(out);
  }
  EXPECT_EQ(blocks_->num_free_blocks(), 0);
  EXPECT_EQ(b->num_output_tokens(), 3);

  // Position 6 needs a new block for each: a (oldest) preempts b (newest).
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, a);
  EXPECT_EQ(out.chunks[0].start_pos, 6);
  EXPECT_THAT(out.preempted, ::testing::ElementsAre(2u));
  EXPECT_EQ(b->status, SequenceStatus::kPreempted);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(b->num_output_tokens(), 3);  // generated tokens are kept
  EXPECT_EQ(scheduler_->num_preemptions(), 1);
  Complete(out);

  // a finishes; b is re-admitted and recomputes prompt + output (7 tokens) before decoding on.
  // Its first two blocks survived in the prefix cache; its third was taken by a.
  scheduler_->Finish(1, FinishReason::kLength);
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, b);
  EXPECT_EQ(b->status, SequenceStatus::kRunning);
  EXPECT_EQ(out.chunks[0].start_pos, 4);
  EXPECT_EQ(out.chunks[0].num_tokens, 3);
  EXPECT_TRUE(out.chunks[0].want_logits);
  EXPECT_EQ(b->num_cached_tokens, 0);  // usage keeps the first admission's count
  Complete(out);
  EXPECT_EQ(b->num_output_tokens(), 4);
  scheduler_->Finish(2, FinishReason::kLength);
  EXPECT_EQ(blocks_->num_free_blocks(), 6);
  EXPECT_FALSE(scheduler_->HasUnfinished());
}

TEST_F(SchedulerTest, QueuedPromptTokensFollowAdmissionPreemptionAndFinish) {
  Init(/*num_blocks=*/6, /*block_size=*/2, 64, 8);
  Add(1, Prompt(4, 10));
  Add(2, Prompt(4, 20));
  Add(3, Prompt(6, 30));  // 3 blocks: waits behind the other two
  EXPECT_EQ(scheduler_->NumQueuedPromptTokens(), 14);
  SchedulerOutput out;
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(scheduler_->NumQueuedPromptTokens(), 14);  // admitted, not computed yet
  Complete(out);
  EXPECT_EQ(scheduler_->NumQueuedPromptTokens(), 6);
  for (int step = 0; step < 3; ++step) {  // the third preempts 2 for a's block
    scheduler_->Schedule(&out);
    Complete(out);
  }
  ASSERT_EQ(scheduler_->num_preemptions(), 1);
  EXPECT_EQ(scheduler_->NumQueuedPromptTokens(), 10);  // 3's prompt, and 2's again
  scheduler_->Finish(3, FinishReason::kAborted);
  EXPECT_EQ(scheduler_->NumQueuedPromptTokens(), 4);
  scheduler_->Finish(2, FinishReason::kAborted);
  scheduler_->Finish(1, FinishReason::kAborted);
  EXPECT_EQ(scheduler_->NumQueuedPromptTokens(), 0);
}

TEST_F(SchedulerTest, SequencePreemptsItselfWhenItIsTheNewest) {
  Init(/*num_blocks=*/3, /*block_size=*/2, 64, 8);
  Sequence* a = Add(1, Prompt(3, 10));  // 2 blocks; position 3 still fits
  Sequence* b = Add(2, Prompt(2, 20));  // 1 block; position 2 needs another
  SchedulerOutput out;
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 2u);
  Complete(out);
  EXPECT_EQ(blocks_->num_free_blocks(), 0);
  scheduler_->Schedule(&out);
  EXPECT_THAT(out.preempted, ::testing::ElementsAre(2u));
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].seq, a);
  EXPECT_EQ(b->status, SequenceStatus::kPreempted);
  EXPECT_EQ(scheduler_->num_running(), 1);
  EXPECT_EQ(scheduler_->num_waiting(), 1);
  // No admission in a step that preempted, even though b's blocks are free now.
  EXPECT_EQ(blocks_->num_free_blocks(), 1);
}

TEST_F(SchedulerTest, FinishFreesBlocksWhereverTheSequenceIs) {
  Init(8, 4, 8, 4);
  Add(1, Prompt(10));
  Add(2, Prompt(10, 50));
  SchedulerOutput out;
  scheduler_->Schedule(&out);  // seq 1: 8 tokens; seq 2 admitted? budget spent -> waits
  ASSERT_EQ(out.chunks.size(), 1u);
  Complete(out);
  EXPECT_EQ(blocks_->num_used_blocks(), 3);
  // Cancel the running (mid-prefill) one and the waiting one.
  auto running = scheduler_->Finish(1, FinishReason::kAborted);
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->status, SequenceStatus::kFinished);
  EXPECT_EQ(running->finish_reason, FinishReason::kAborted);
  auto waiting = scheduler_->Finish(2, FinishReason::kAborted);
  ASSERT_NE(waiting, nullptr);
  EXPECT_EQ(scheduler_->Finish(2, FinishReason::kAborted), nullptr);
  EXPECT_EQ(blocks_->num_free_blocks(), 8);
  EXPECT_FALSE(scheduler_->HasUnfinished());
  scheduler_->Schedule(&out);
  EXPECT_TRUE(out.empty());
}

TEST_F(SchedulerTest, PrefixCacheHitSkipsComputedBlocks) {
  Init(32, 4, 64, 8);
  Sequence* a = Add(1, Prompt(10));
  SchedulerOutput out;
  scheduler_->Schedule(&out);
  Complete(out);
  std::vector<TokenId> p = Prompt(10);
  p.push_back(99);
  Sequence* b = Add(2, p);
  scheduler_->Schedule(&out);
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[1].seq, b);
  EXPECT_EQ(b->num_cached_tokens, 8);
  EXPECT_EQ(out.chunks[1].start_pos, 8);
  EXPECT_EQ(out.chunks[1].num_tokens, 3);
  EXPECT_EQ(b->block_table.blocks[0], a->block_table.blocks[0]);
}

TEST_F(SchedulerTest, ManySequencesDrainAndReturnEveryBlock) {
  Init(/*num_blocks=*/12, /*block_size=*/4, /*budget=*/16, /*max_seqs=*/6);
  for (RequestId id = 1; id <= 20; ++id) Add(id, Prompt(3 + (id * 7) % 13, id * 100));
  SchedulerOutput out;
  int steps = 0;
  while (scheduler_->HasUnfinished() && steps < 1000) {
    ++steps;
    scheduler_->Schedule(&out);
    EXPECT_LE(out.num_batched_tokens, 16);
    EXPECT_LE(out.chunks.size(), 6u);
    Complete(out);
    for (const ScheduledChunk& c : out.chunks) {
      if (c.want_logits && c.seq->num_output_tokens() >= 6) {
        scheduler_->Finish(c.seq->id, FinishReason::kLength);
      }
    }
  }
  EXPECT_FALSE(scheduler_->HasUnfinished());
  EXPECT_GT(scheduler_->num_preemptions(), 0);
  EXPECT_EQ(blocks_->num_free_blocks(), 12);
}

}  // namespace
}  // namespace tandem
