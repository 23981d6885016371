// What tandem-sim keeps per request: the client's times as tokens arrive (the report's TTFT, E2E
// and ITLs from them), and the prompt an attempt takes (moved when nothing was sent yet, else the
// prompt and stand-ins for the tokens sent, with room for the whole sequence).
#include "tools/sim/sim_request.h"

#include <vector>

#include "bench/serve/bench_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

TEST(SimRequestTest, TokensGiveTheClientsTtftEndToEndAndGaps) {
  RequestState s;
  s.sent = 1'000'000'000;  // 1 s
  s.prompt_len = 7;
  s.output_len = 4;
  for (int64_t at : {1'250'000'000, 1'260'000'000, 1'290'000'000, 1'300'000'000}) s.NoteToken(at);
  s.done = s.ok = true;
  const bench::RequestResult r = ResultOf(std::move(s));
  EXPECT_TRUE(r.success);
  EXPECT_DOUBLE_EQ(r.start_s, 1.0);
  EXPECT_EQ(r.prompt_tokens, 7);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_NEAR(r.ttft_s, 0.25, 1e-12);
  EXPECT_NEAR(r.e2e_s, 0.30, 1e-12);
  EXPECT_THAT(r.itl_s, ::testing::ElementsAre(::testing::DoubleNear(0.01, 1e-12),
                                              ::testing::DoubleNear(0.03, 1e-12),
                                              ::testing::DoubleNear(0.01, 1e-12)));
}

TEST(SimRequestTest, ARequestWithoutTokensFailsAndOneUnfinishedSaysSo) {
  RequestState failed;
  failed.done = true;
  failed.error = "no decode node is up";
  const bench::RequestResult r = ResultOf(std::move(failed));
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error, "no decode node is up");
  EXPECT_EQ(r.output_tokens, 0);
  EXPECT_TRUE(r.itl_s.empty());

  RequestState running;
  running.output_len = 3;
  running.NoteToken(5);
  EXPECT_EQ(ResultOf(std::move(running)).error, "never finished");
}

TEST(SimRequestTest, AnAttemptBeforeAnyTokenTakesThePrompt) {
  RequestState s;
  s.output_len = 3;
  s.prompt = {11, 12, 13};
  s.prompt.reserve(6);
  const std::vector<int32_t> prompt = TakeAttemptPrompt(s, 0);
  EXPECT_THAT(prompt, ::testing::ElementsAre(11, 12, 13));
  EXPECT_GE(prompt.capacity(), 6u);
  EXPECT_TRUE(s.prompt.empty());  // the router builds it again if it needs it
}

TEST(SimRequestTest, AMigratedAttemptRecomputesThePromptAndTheTokensSent) {
  RequestState s;
  s.output_len = 5;
  s.prompt = {11, 12, 13};
  s.NoteToken(10);
  s.NoteToken(20);
  const std::vector<int32_t> prompt = TakeAttemptPrompt(s, 2);
  ASSERT_EQ(prompt.size(), 5u);
  EXPECT_THAT(std::vector<int32_t>(prompt.begin(), prompt.begin() + 3),
              ::testing::ElementsAre(11, 12, 13));
  // Stand-ins of the tokens sent, the same for the same request and position.
  EXPECT_EQ(prompt[3], 1000 + static_cast<int32_t>((2 * 31 + 0 * 7919) % 30000));
  EXPECT_EQ(prompt[4], 1000 + static_cast<int32_t>((2 * 31 + 1 * 7919) % 30000));
  EXPECT_GE(prompt.capacity(), 8u);                           // prompt + output: room for the rest
  EXPECT_THAT(s.prompt, ::testing::ElementsAre(11, 12, 13));  // kept for a later attempt
  EXPECT_EQ(CopyPrompt(s).capacity(), 8u);
}

TEST(SimRequestTest, PromptIdsHaveRoomForTheWholeSequence) {
  bench::BenchRequest request;
  request.prompt_len = 4;
  const std::vector<int32_t> prompt = PromptIds(request, 9, 10);
  EXPECT_EQ(prompt.size(), 4u);
  EXPECT_GE(prompt.capacity(), 10u);
  EXPECT_EQ(prompt, PromptIds(request, 9));   // the same ids whatever the room
  EXPECT_NE(prompt, PromptIds(request, 10));  // its own per request
}

}  // namespace
}  // namespace tandem::sim
