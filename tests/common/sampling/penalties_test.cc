#include "common/sampling/penalties.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;

TEST(PenaltiesTest, NoPenaltiesLeaveLogitsAlone) {
  SamplingParams p;
  EXPECT_FALSE(HasPenalties(p));
  std::vector<float> logits = {1.0f, -2.0f, 3.0f};
  PenaltyScratch scratch;
  std::vector<TokenId> prompt = {0, 1};
  std::vector<TokenId> output = {2};
  ApplyPenalties(logits, p, prompt, output, &scratch);
  EXPECT_THAT(logits, ElementsAre(1.0f, -2.0f, 3.0f));
}

TEST(PenaltiesTest, RepetitionPenaltyDividesPositiveMultipliesNegativeOnce) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  EXPECT_TRUE(HasPenalties(p));
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.0f, 0.0f};
  // Token 0 appears three times (prompt and output) but is penalized once; token 3 never appears.
  std::vector<TokenId> prompt = {0, 1, 0};
  std::vector<TokenId> output = {2, 0, 4};
  PenaltyScratch scratch;
  ApplyPenalties(logits, p, prompt, output, &scratch);
  EXPECT_THAT(logits, ElementsAre(FloatEq(1.0f), FloatEq(-2.0f), FloatEq(0.25f), FloatEq(1.0f),
                                  FloatEq(0.0f)));
}

TEST(PenaltiesTest, FrequencyAndPresenceCountOutputOnly) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.0f};
  std::vector<TokenId> prompt = {0, 3, 3};  // no effect on frequency/presence
  std::vector<TokenId> output = {1, 1, 2};  // token 1 twice, token 2 once
  PenaltyScratch scratch;
  ApplyPenalties(logits, p, prompt, output, &scratch);
  EXPECT_THAT(logits, ElementsAre(FloatEq(2.0f), FloatEq(-1.0f - 1.0f - 0.25f),
                                  FloatEq(0.5f - 0.5f - 0.25f), FloatEq(1.0f)));
}

TEST(PenaltiesTest, AllThreeInVllmOrder) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.0f};
  std::vector<TokenId> prompt = {0};
  std::vector<TokenId> output = {1, 1, 2};
  PenaltyScratch scratch;
  ApplyPenalties(logits, p, prompt, output, &scratch);
  // Repetition first: {1, -2, 0.25, 1}; then frequency/presence on output tokens 1 (x2) and 2.
  EXPECT_THAT(logits, ElementsAre(FloatEq(1.0f), FloatEq(-3.25f), FloatEq(-0.5f), FloatEq(1.0f)));
  // The scratch is left all zero, so a second call gives the same result.
  for (int32_t c : scratch.counts) EXPECT_EQ(c, 0);
  std::vector<float> again = {2.0f, -1.0f, 0.5f, 1.0f};
  ApplyPenalties(again, p, prompt, output, &scratch);
  EXPECT_EQ(again, logits);
}

TEST(PenaltiesTest, NegativePresencePenaltyEncouragesRepeats) {
  SamplingParams p;
  p.presence_penalty = -1.0f;
  std::vector<float> logits = {0.0f, 0.0f};
  std::vector<TokenId> output = {1};
  PenaltyScratch scratch;
  ApplyPenalties(logits, p, {}, output, &scratch);
  EXPECT_THAT(logits, ElementsAre(0.0f, 1.0f));
}

TEST(PenaltiesTest, IgnoresOutOfRangeIds) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  std::vector<float> logits = {1.0f, 1.0f};
  std::vector<TokenId> output = {-1, 7, 1};
  PenaltyScratch scratch;
  ApplyPenalties(logits, p, {}, output, &scratch);
  EXPECT_THAT(logits, ElementsAre(1.0f, FloatEq(-0.5f)));
}

}  // namespace
}  // namespace tandem
