#include "common/sampling/sampling_params.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr int kVocab = 100;

std::string Error(const SamplingParams& p) {
  absl::Status s = p.Validate(kVocab);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(SamplingParamsTest, DefaultsAreValid) {
  EXPECT_TRUE(SamplingParams{}.Validate(kVocab).ok());
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  EXPECT_TRUE(greedy.greedy());
  EXPECT_TRUE(greedy.Validate(kVocab).ok());
}

TEST(SamplingParamsTest, RejectsEachBadFieldWithItsName) {
  SamplingParams p;
  p.temperature = -0.5f;
  EXPECT_THAT(Error(p), HasSubstr("temperature must be >= 0"));
  p = {};
  p.temperature = NAN;
  EXPECT_THAT(Error(p), HasSubstr("temperature"));
  p = {};
  p.top_p = 0.0f;
  EXPECT_THAT(Error(p), HasSubstr("top_p must be in (0, 1]"));
  p.top_p = 1.5f;
  EXPECT_THAT(Error(p), HasSubstr("top_p must be in (0, 1]"));
  p = {};
  p.top_k = -2;
  EXPECT_THAT(Error(p), HasSubstr("top_k"));
  p = {};
  p.min_p = 1.01f;
  EXPECT_THAT(Error(p), HasSubstr("min_p must be in [0, 1]"));
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_THAT(Error(p), HasSubstr("repetition_penalty must be > 0"));
  p = {};
  p.presence_penalty = 2.5f;
  EXPECT_THAT(Error(p), HasSubstr("presence_penalty must be in [-2, 2]"));
  p = {};
  p.frequency_penalty = -3.0f;
  EXPECT_THAT(Error(p), HasSubstr("frequency_penalty must be in [-2, 2]"));
  p = {};
  p.max_tokens = 0;
  EXPECT_THAT(Error(p), HasSubstr("max_tokens must be >= 1"));
  p = {};
  p.stop_token_ids = {3, kVocab};
  EXPECT_THAT(Error(p), HasSubstr("stop_token_ids[1] = 100"));
  p = {};
  p.logprobs = kMaxLogprobs + 1;
  EXPECT_THAT(Error(p), HasSubstr("logprobs must be in [-1, 20]"));
}

TEST(SamplingParamsTest, AcceptsBoundaryValues) {
  SamplingParams p;
  p.top_p = 1.0f;
  p.top_k = -1;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logprobs = kMaxLogprobs;
  p.stop_token_ids = {0, kVocab - 1};
  EXPECT_TRUE(p.Validate(kVocab).ok());
}

}  // namespace
}  // namespace tandem
