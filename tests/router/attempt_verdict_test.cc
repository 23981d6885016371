// JudgeAttempt: every way an attempt ends, from plain facts, without gRPC.
#include "router/attempt_verdict.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

AttemptFacts Disaggregated() {
  AttemptFacts f;
  f.kind = PlacementKind::kDisaggregated;
  f.decode_name = "decode node d:1";
  f.prefill_name = "prefill node p:1";
  f.first_token_timeout_ms = 500;
  return f;
}

AttemptFacts Local() {
  AttemptFacts f = Disaggregated();
  f.kind = PlacementKind::kLocalPrefill;
  f.prefill_name.clear();
  return f;
}

grpc::Status Unavailable() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone"); }

TEST(JudgeAttemptTest, AFinishedStreamIsDoneAndReleasesNothing) {
  AttemptFacts f = Disaggregated();
  f.stream.finished = true;
  f.sent_tokens = true;
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_TRUE(v.status.ok());
  EXPECT_FALSE(v.retry);
  EXPECT_FALSE(v.cancel_decode);
  EXPECT_FALSE(v.cancel_prefill);
  EXPECT_FALSE(v.stop_string_hit);
}

TEST(JudgeAttemptTest, AFinishedStreamWhoseLastWriteFailedIsNotOk) {
  AttemptFacts f = Local();
  f.stream.finished = true;
  f.sent_tokens = true;
  f.client_gone = true;
  f.timed_out = true;  // the deadline aborted the write
  AttemptVerdict v = JudgeAttempt(f);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  f.timed_out = false;  // the client left
  v = JudgeAttempt(f);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::CANCELLED);
}

TEST(JudgeAttemptTest, AStopStringCancelsTheDecodeNode) {
  AttemptFacts f = Local();
  f.stream.finished = true;
  f.stream.stopped = true;
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_TRUE(v.status.ok());
  EXPECT_TRUE(v.stop_string_hit);
  EXPECT_TRUE(v.cancel_decode);
}

TEST(JudgeAttemptTest, AFinishedStreamCancelsAPrefillTheRouterCutShort) {
  AttemptFacts f = Disaggregated();
  f.stream.finished = true;
  f.prefill = PrefillEnd::kCancelledByRouter;
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_TRUE(v.status.ok());
  EXPECT_TRUE(v.cancel_prefill);
  EXPECT_FALSE(v.cancel_decode);
}

TEST(JudgeAttemptTest, ReserveThatEndsAtOnceIsRetriedAndMarksAnUnreachableNode) {
  AttemptFacts f = Disaggregated();
  f.reserve = ReserveEnd::kNoEvent;
  f.reserve_status = Unavailable();
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(v.status.error_message(), HasSubstr("decode node d:1: Reserve: gone"));
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.reason, RetryReason::kReserveFailed);
  EXPECT_TRUE(v.blame_decode);
  EXPECT_FALSE(v.blame_prefill);
  EXPECT_TRUE(v.decode_unreachable);
  EXPECT_FALSE(v.cancel_decode);  // nothing was reserved
}

TEST(JudgeAttemptTest, ReserveCutByTheFirstTokenTimerIsATimeout) {
  AttemptFacts f = Disaggregated();
  f.reserve = ReserveEnd::kNoEvent;
  f.reserve_status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  f.attempt_timed_out = true;
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.reason, RetryReason::kFirstTokenTimeout);
  EXPECT_FALSE(v.decode_unreachable);
}

TEST(JudgeAttemptTest, AHandoffMissingIsABrokenNode) {
  AttemptFacts f = Disaggregated();
  f.reserve = ReserveEnd::kNoHandoff;
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.reason, RetryReason::kBadHandoff);
  EXPECT_TRUE(v.cancel_decode);
  EXPECT_TRUE(v.blame_decode);
}

TEST(JudgeAttemptTest, ThePrefillNodesFailureBeforeTokensBlamesItAndReleasesBoth) {
  AttemptFacts f = Disaggregated();
  f.prefill = PrefillEnd::kFailed;
  f.prefill_status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  f.stream.status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(v.status.error_message(), HasSubstr("prefill node p:1: Prefill: queue full"));
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.reason, RetryReason::kPrefillFailed);
  EXPECT_TRUE(v.blame_prefill);
  EXPECT_FALSE(v.blame_decode);
  EXPECT_TRUE(v.cancel_decode);
  EXPECT_TRUE(v.cancel_prefill);
  EXPECT_FALSE(v.prefill_unreachable);
}

TEST(JudgeAttemptTest, BadInputFoundByANodeIsNotRetried) {
  AttemptFacts f = Disaggregated();
  f.prefill = PrefillEnd::kFailed;
  f.prefill_status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "too long");
  EXPECT_FALSE(JudgeAttempt(f).retry);
  AttemptFacts l = Local();
  l.stream.status = grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "context");
  EXPECT_FALSE(JudgeAttempt(l).retry);
}

TEST(JudgeAttemptTest, TheFirstTokenTimeoutBlamesBothNodesWhateverTheyAnswered) {
  AttemptFacts f = Disaggregated();
  f.attempt_timed_out = true;
  f.prefill = PrefillEnd::kCancelledByRouter;
  f.stream.status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(v.status.error_message(), HasSubstr("within 500 ms"));
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.reason, RetryReason::kFirstTokenTimeout);
  EXPECT_TRUE(v.blame_decode);
  EXPECT_TRUE(v.blame_prefill);
}

TEST(JudgeAttemptTest, AFailureAfterTokensMigratesInsteadOfRetrying) {
  for (AttemptFacts f : {Disaggregated(), Local()}) {
    f.sent_tokens = true;
    f.stream.status = Unavailable();
    const AttemptVerdict v = JudgeAttempt(f);
    EXPECT_EQ(v.status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_FALSE(v.retry);  // never from the prompt: the client has tokens
    EXPECT_TRUE(v.migrate);
    EXPECT_EQ(v.migration_reason, MigrationReason::kNodeUnreachable);
    EXPECT_TRUE(v.decode_unreachable);
    EXPECT_TRUE(v.blame_decode);
    EXPECT_TRUE(v.cancel_decode);  // frees what the failed stream still holds
  }
}

TEST(JudgeAttemptTest, TheMigrationReasonFollowsHowTheStreamFailed) {
  struct Case {
    grpc::Status status;
    bool attempt_timed_out;
    MigrationReason reason;
  };
  const Case cases[] = {
      {grpc::Status(grpc::StatusCode::CANCELLED, "draining"), false,
       MigrationReason::kStreamAborted},
      {grpc::Status(grpc::StatusCode::ABORTED, "engine stopped"), false,
       MigrationReason::kStreamAborted},
      {grpc::Status(grpc::StatusCode::INTERNAL, "backend failed"), false,
       MigrationReason::kStreamFailed},
      {grpc::Status::OK, false, MigrationReason::kStreamBroken},
      {grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"), true,
       MigrationReason::kFirstTokenTimeout},
  };
  for (const Case& c : cases) {
    AttemptFacts f = Local();
    f.sent_tokens = true;
    f.stream.status = c.status;
    f.attempt_timed_out = c.attempt_timed_out;
    const AttemptVerdict v = JudgeAttempt(f);
    EXPECT_TRUE(v.migrate) << c.status.error_message();
    EXPECT_EQ(v.migration_reason, c.reason) << MigrationReasonName(c.reason);
  }
}

TEST(JudgeAttemptTest, ARequestTheNodeFoundBadDoesNotMigrate) {
  AttemptFacts f = Local();
  f.sent_tokens = true;
  f.stream.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "context full");
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_FALSE(v.migrate);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(JudgeAttemptTest, AClientThatLeftAfterTokensDoesNotMigrate) {
  AttemptFacts f = Local();
  f.sent_tokens = true;
  f.client_gone = true;
  f.stream.status = Unavailable();
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_FALSE(v.migrate);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::CANCELLED);
}

TEST(JudgeAttemptTest, AStreamThatEndsOkWithoutAFinishReasonIsInternal) {
  AttemptFacts f = Disaggregated();
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(v.status.error_message(), HasSubstr("without tokens or a finish reason"));
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.reason, RetryReason::kDecodeFailed);
  EXPECT_TRUE(v.cancel_decode);
  EXPECT_FALSE(v.cancel_prefill);  // its prefill completed: nothing held there
}

TEST(JudgeAttemptTest, TheClientLeavingOrTheDeadlineEndsTheAttemptAndReleasesTheDecodeNode) {
  AttemptFacts gone = Local();
  gone.client_cancelled = true;
  gone.timed_out = true;  // the client's own cancel wins
  AttemptVerdict v = JudgeAttempt(gone);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(v.cancel_decode);
  EXPECT_FALSE(v.retry);

  AttemptFacts late = Disaggregated();
  late.timed_out = true;
  late.prefill = PrefillEnd::kCancelledByRouter;
  v = JudgeAttempt(late);
  EXPECT_EQ(v.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(v.cancel_decode);
  EXPECT_TRUE(v.cancel_prefill);
}

TEST(JudgeAttemptTest, LocalAttemptsNameGenerateAndRetryOnAnotherDecodeNode) {
  AttemptFacts f = Local();
  f.stream.status = Unavailable();
  const AttemptVerdict v = JudgeAttempt(f);
  EXPECT_THAT(v.status.error_message(), HasSubstr("decode node d:1: Generate: gone"));
  EXPECT_TRUE(v.retry);
  EXPECT_EQ(v.reason, RetryReason::kDecodeFailed);
  EXPECT_TRUE(v.cancel_decode);
  EXPECT_TRUE(v.blame_decode);
  EXPECT_TRUE(v.decode_unreachable);
}

}  // namespace
}  // namespace tandem
