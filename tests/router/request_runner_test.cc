// RequestRunner in process, without gRPC servers: nodes are FakeNodeClients behind a fixed
// NodeDirectory (fake_node_client.h). The same paths against real gRPC fakes, with cancellation
// travelling through contexts, are in generate_service_test.cc and
// generate_service_failures_test.cc.
#include "router/request_runner.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/router/request_runner_fixture.h"

namespace tandem {
namespace {

using testing::CollectingSink;
using ::testing::ElementsAre;
using testing::FakeNode;
using testing::FakeNodeDirectory;
using ::testing::HasSubstr;
using testing::RequestRunnerTest;
using testing::StreamScript;
using testing::TestServedModel;
using testing::TokenEvents;

TEST_F(RequestRunnerTest, ADisaggregatedRequestPrefillsOnPAndStreamsDsTokens) {
  FakeNode p(NodeRole::kPrefill, "p:1"), d(NodeRole::kDecode, "d:1");
  Add(p);
  Add(d);
  d.client->AddStream({.events = TokenEvents(Encode(" hello world"))});
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(sink.text(), " hello world");
  EXPECT_EQ(sink.responses.back().finish_reason(), "length");
  ASSERT_EQ(d.client->reserves().size(), 1u);
  ASSERT_EQ(p.client->prefills().size(), 1u);
  // The prefill carries D's handoff and the same prompt.
  EXPECT_EQ(p.client->prefills()[0].handoff().request_id(), 1u);
  EXPECT_EQ(p.client->prefills()[0].prompt_token_ids_size(),
            d.client->reserves()[0].prompt_token_ids_size());
  EXPECT_TRUE(d.client->cancels().empty());
  EXPECT_TRUE(p.client->cancels().empty());
  EXPECT_EQ(counters_.disaggregated.load(), 1);
  EXPECT_EQ(counters_.requests_ok.load(), 1);
}

TEST_F(RequestRunnerTest, AReserveThatFailsIsRetriedOnTheOtherDecodeNode) {
  FakeNode p(NodeRole::kPrefill, "p:1");
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2");
  Add(p);
  Add(d1);
  Add(d2);
  d1.client->AddStream(
      {.end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "refused"), .fail_reserve = true});
  d2.client->AddStream({.events = TokenEvents(Encode(" ok"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  EXPECT_EQ(sink.text(), " ok");
  EXPECT_EQ(d1.client->reserves().size(), 1u);
  EXPECT_EQ(d2.client->reserves().size(), 1u);
  EXPECT_THAT(directory_.failures(), ElementsAre("d:1"));
  EXPECT_FALSE(d1.node->up());
  EXPECT_EQ(counters_.retries_for(RetryReason::kReserveFailed), 1);
  // The second attempt's node request id says which attempt it is.
  EXPECT_THAT(d2.client->reserves()[0].request_id(), HasSubstr("#1"));
}

TEST_F(RequestRunnerTest, APrefillFailureReleasesTheDecodeNodeAndRetriesOnAnotherPrefillNode) {
  FakeNode p1(NodeRole::kPrefill, "p:1"), p2(NodeRole::kPrefill, "p:2");
  FakeNode d(NodeRole::kDecode, "d:1");
  Add(p1);
  Add(p2);
  Add(d);
  p1.client->AddPrefillAnswer(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full"));
  // The failed prefill cut D's first stream; the second runs to its end.
  d.client->AddStream({.end = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")});
  d.client->AddStream({.events = TokenEvents(Encode(" second"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  EXPECT_EQ(sink.text(), " second");
  EXPECT_EQ(p1.client->prefills().size(), 1u);
  EXPECT_EQ(p2.client->prefills().size(), 1u);
  // D's first reservation was released; P1's failed call holds nothing to cancel.
  ASSERT_EQ(d.client->cancels().size(), 1u);
  EXPECT_EQ(d.client->cancels()[0], d.client->reserves()[0].request_id());
  EXPECT_EQ(counters_.retries_for(RetryReason::kPrefillFailed), 1);
  EXPECT_TRUE(directory_.failures().empty());  // busy is not unreachable
}

TEST_F(RequestRunnerTest, AFailureAfterTokensMigratesWithTheTokensSoFar) {
  FakeNode p(NodeRole::kPrefill, "p:1");
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2");
  Add(p);
  Add(d1);
  Add(d2);
  std::vector<v1::DecodeEvent> first = TokenEvents(Encode(" partial"), "");
  first.back().set_rng_counter(7);
  d1.client->AddStream(
      {.events = first, .end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "node died")});
  d2.client->AddStream({.events = TokenEvents(Encode(" rest"))});
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(sink.text(), " partial rest");  // nothing repeated, nothing missing
  // The migrated attempt is a local Generate on the other decode node, resuming the output.
  ASSERT_EQ(d2.client->generates().size(), 1u);
  const v1::NodeGenerateRequest resumed = d2.client->generates()[0];
  EXPECT_EQ(resumed.prompt_token_ids_size(), d1.client->reserves()[0].prompt_token_ids_size());
  const std::vector<int32_t> partial = Encode(" partial");
  EXPECT_EQ(std::vector<int32_t>(resumed.resumed_output_token_ids().begin(),
                                 resumed.resumed_output_token_ids().end()),
            partial);
  EXPECT_EQ(resumed.resumed_rng_counter(), 7u);
  EXPECT_TRUE(d2.client->reserves().empty());
  EXPECT_EQ(counters_.migrations_for(MigrationReason::kNodeUnreachable), 1);
  EXPECT_EQ(counters_.local_prefill_migration.load(), 1);
  EXPECT_EQ(counters_.failed_after_first_token.load(), 0);
  EXPECT_EQ(counters_.requests_ok.load(), 1);
  EXPECT_THAT(directory_.failures(), ElementsAre("d:1"));
  EXPECT_THAT(d1.client->cancels(), ElementsAre(HasSubstr("")));  // frees what d:1 may hold
  // The client saw one usage: every token counted once.
  EXPECT_EQ(sink.responses.back().usage().completion_tokens(),
            static_cast<int32_t>(partial.size() + Encode(" rest").size()));
}

TEST_F(RequestRunnerTest, AFailureAfterTokensEndsTheStreamOnceTheMigrationLimitIsReached) {
  options_.migration_limit = 1;
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2");
  options_.placement.mode = ServingMode::kColocated;
  Add(d1);
  Add(d2);
  const grpc::Status died(grpc::StatusCode::UNAVAILABLE, "node died");
  d1.client->AddStream({.events = TokenEvents(Encode(" one"), ""), .end = died});
  d2.client->AddStream({.events = TokenEvents(Encode(" two"), ""), .end = died});
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(sink.text(), " one two");
  EXPECT_EQ(counters_.migrations_for(MigrationReason::kNodeUnreachable), 1);
  EXPECT_EQ(counters_.failed_after_first_token.load(), 1);
}

TEST_F(RequestRunnerTest, WithoutMigrationAFailureAfterTokensEndsTheRequest) {
  options_.migration_limit = 0;
  FakeNode p(NodeRole::kPrefill, "p:1");
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2");
  Add(p);
  Add(d1);
  Add(d2);
  d1.client->AddStream({.events = TokenEvents(Encode(" partial"), ""),
                        .end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "node died")});
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(sink.text(), " partial");
  EXPECT_TRUE(d2.client->reserves().empty());
  EXPECT_TRUE(d2.client->generates().empty());
  EXPECT_EQ(counters_.failed_after_first_token.load(), 1);
  EXPECT_THAT(directory_.failures(), ElementsAre("d:1"));
}

TEST_F(RequestRunnerTest, AStopStringEndsTheOutputAndCancelsTheDecodeNode) {
  FakeNode p(NodeRole::kPrefill, "p:1"), d(NodeRole::kDecode, "d:1");
  Add(p);
  Add(d);
  d.client->AddStream({.events = TokenEvents(Encode(" one two three four"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink, {" three"}).ok());
  EXPECT_EQ(sink.text(), " one two");
  EXPECT_EQ(sink.responses.back().finish_reason(), "stop");
  EXPECT_EQ(d.client->cancels().size(), 1u);
  EXPECT_EQ(counters_.stop_string_hits.load(), 1);
}

TEST_F(RequestRunnerTest, BadInputFoundByTheNodeIsNotRetried) {
  FakeNode p(NodeRole::kPrefill, "p:1");
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2");
  Add(p);
  Add(d1);
  Add(d2);
  d1.client->AddStream(
      {.end = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no"), .fail_reserve = true});
  CollectingSink sink;
  EXPECT_EQ(Run("Hi", sink).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(d2.client->reserves().empty());
  EXPECT_TRUE(directory_.failures().empty());
}

TEST_F(RequestRunnerTest, ABrokenHandoffIsRetriedElsewhere) {
  FakeNode p(NodeRole::kPrefill, "p:1");
  FakeNode d1(NodeRole::kDecode, "d:1", 5000), d2(NodeRole::kDecode, "d:2");
  Add(p);
  Add(d1);
  Add(d2);
  d1.client->AddStream({.no_handoff = true});
  d2.client->AddStream({.events = TokenEvents(Encode(" fine"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  EXPECT_EQ(sink.text(), " fine");
  EXPECT_EQ(d1.client->cancels().size(), 1u);
  EXPECT_EQ(p.client->prefills().size(), 1u);  // only the good pair got as far as prefill
  EXPECT_EQ(counters_.retries_for(RetryReason::kBadHandoff), 1);
}

TEST_F(RequestRunnerTest, WithoutAPrefillNodeTheDecodeNodeGeneratesAlone) {
  FakeNode d(NodeRole::kDecode, "d:1");
  Add(d);
  d.client->AddStream({.events = TokenEvents(Encode(" local"))});
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  EXPECT_EQ(sink.text(), " local");
  EXPECT_EQ(d.client->generates().size(), 1u);
  EXPECT_TRUE(d.client->reserves().empty());
  EXPECT_EQ(counters_.local_prefill_no_prefill_node.load(), 1);
}

TEST_F(RequestRunnerTest, RetriesStopAtMaxRetries) {
  options_.max_retries = 1;
  FakeNode p(NodeRole::kPrefill, "p:1"), d(NodeRole::kDecode, "d:1");
  Add(p);
  Add(d);
  p.client->AddPrefillAnswer(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full"));
  d.client->AddStream({.end = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled")});
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("2 attempts"));
  EXPECT_EQ(p.client->prefills().size(), 2u);
  EXPECT_EQ(d.client->cancels().size(), 2u);
  EXPECT_TRUE(sink.responses.empty());
}

}  // namespace
}  // namespace tandem
