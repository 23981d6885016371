#include "common/engine/request_stream.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

GenerationEvent TokenEvent(TokenId token, int n, bool finished = false) {
  GenerationEvent e;
  e.request_id = 7;
  e.token = token;
  e.logprob = -0.5f * n;
  e.usage.prompt_tokens = 3;
  e.usage.completion_tokens = n;
  e.finished = finished;
  e.finish_reason = finished ? FinishReason::kStop : FinishReason::kNone;
  return e;
}

TEST(RequestStreamTest, NextDeliversInOrderThenEnds) {
  RequestStream stream;
  EventCallback cb = stream.Callback();
  std::thread producer([&] {
    for (int i = 1; i <= 5; ++i) cb(TokenEvent(10 + i, i, i == 5));
  });
  std::vector<TokenId> got;
  GenerationEvent e;
  while (stream.Next(&e)) got.push_back(e.token);
  producer.join();
  EXPECT_THAT(got, ::testing::ElementsAre(11, 12, 13, 14, 15));
  EXPECT_TRUE(stream.finished());
  EXPECT_FALSE(stream.Next(&e));
}

TEST(RequestStreamTest, WaitFoldsAllEventsRegardlessOfNext) {
  RequestStream stream;
  stream.Push(TokenEvent(1, 1));
  GenerationEvent e;
  ASSERT_TRUE(stream.Next(&e));
  stream.Push(TokenEvent(2, 2, /*finished=*/true));
  stream.Push(TokenEvent(3, 3));  // after the final event: dropped
  GenerationResult r = stream.Wait();
  EXPECT_EQ(r.request_id, 7u);
  EXPECT_THAT(r.tokens, ::testing::ElementsAre(1, 2));
  EXPECT_THAT(r.logprobs, ::testing::ElementsAre(-0.5f, -1.0f));
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_EQ(r.usage.completion_tokens, 2);
  EXPECT_TRUE(r.status.ok());
}

TEST(RequestStreamTest, FinalEventWithoutTokenCarriesStatus) {
  RequestStream stream;
  stream.Push(TokenEvent(4, 1));
  GenerationEvent end;
  end.request_id = 7;
  end.finished = true;
  end.finish_reason = FinishReason::kError;
  end.status = absl::InternalError("boom");
  stream.Push(end);
  GenerationResult r = stream.Wait();
  EXPECT_THAT(r.tokens, ::testing::ElementsAre(4));
  EXPECT_EQ(r.finish_reason, FinishReason::kError);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(FinishReasonName(r.finish_reason), "error");
}

TEST(RequestStreamTest, TimeoutsReturnNothingWhileUnfinished) {
  RequestStream stream;
  EXPECT_FALSE(stream.WaitWithTimeout(absl::Milliseconds(5)).has_value());
  EXPECT_FALSE(stream.NextWithTimeout(absl::Milliseconds(5)).has_value());
  stream.Push(TokenEvent(9, 1, true));
  auto e = stream.NextWithTimeout(absl::Milliseconds(5));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->token, 9);
  EXPECT_FALSE(stream.NextWithTimeout(absl::Milliseconds(5)).has_value());
  EXPECT_TRUE(stream.WaitWithTimeout(absl::Milliseconds(5)).has_value());
}

}  // namespace
}  // namespace tandem
