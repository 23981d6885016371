// Live KV migration in the router (request_flow.h, the move steps), in process against
// FakeNodeClients: a stream its decode node pauses moves to another decode node with room —
// Reserve there with the tokens so far and the rng counter, ExportKv on the source with the
// destination's handoff, the destination's tokens continue the client's stream — or resumes on
// its node when no other has room or a step of the move fails.
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/router/request_runner_fixture.h"

namespace tandem {
namespace {

using testing::CollectingSink;
using ::testing::ElementsAre;
using testing::FakeNode;
using testing::RequestRunnerTest;
using testing::StreamScript;
using testing::TokenEvents;

// The source's script: " partial" streamed, then the pause (rng counter 7); what follows plays
// only after ResumePaused (fake_node_client.h holds a paused stream).
StreamScript PausingSource(const std::vector<int32_t>& partial, const std::vector<int32_t>& rest) {
  std::vector<v1::DecodeEvent> events = TokenEvents(partial, "");
  events.back().set_rng_counter(7);
  v1::DecodeEvent paused;
  paused.set_migration_paused(true);
  paused.set_rng_counter(7);
  events.push_back(paused);  // the fake holds the stream here until ResumePaused
  for (v1::DecodeEvent& e : TokenEvents(rest)) events.push_back(e);
  return {.events = events};
}

class RequestFlowKvTest : public RequestRunnerTest {
 protected:
  // A prefill node and two decode nodes: d:1 (more free blocks, so placement picks it first) and
  // d:2 (where moves go).
  void AddNodes(bool with_d2 = true) {
    Add(p);
    Add(d1);
    if (with_d2) Add(d2);
  }

  FakeNode p{NodeRole::kPrefill, "p:1"};
  FakeNode d1{NodeRole::kDecode, "d:1", 5000};
  FakeNode d2{NodeRole::kDecode, "d:2", 1000};
  std::vector<int32_t> partial_ = Encode(" partial");
  std::vector<int32_t> rest_ = Encode(" rest");
};

TEST_F(RequestFlowKvTest, APausedStreamMovesWithItsKvToAnotherDecodeNode) {
  AddNodes();
  d1.client->AddStream(PausingSource(partial_, Encode(" never")));
  d2.client->AddStream({.events = TokenEvents(rest_)});
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(sink.text(), " partial rest");  // nothing repeated, nothing missing
  // The destination reserved with the tokens so far and the sampler's counter.
  ASSERT_EQ(d2.client->reserves().size(), 1u);
  const v1::ReserveRequest moved = d2.client->reserves()[0];
  EXPECT_EQ(std::vector<int32_t>(moved.resumed_output_token_ids().begin(),
                                 moved.resumed_output_token_ids().end()),
            partial_);
  EXPECT_EQ(moved.resumed_rng_counter(), 7u);
  EXPECT_EQ(moved.prompt_token_ids_size(), d1.client->reserves()[0].prompt_token_ids_size());
  // The source exported its KV into the destination's handoff.
  ASSERT_EQ(d1.client->exports().size(), 1u);
  EXPECT_EQ(d1.client->exports()[0].request_id(), d1.client->reserves()[0].request_id());
  EXPECT_EQ(d1.client->exports()[0].handoff().request_id(), 1u);
  EXPECT_TRUE(d1.client->resumes().empty());
  EXPECT_TRUE(d2.client->generates().empty());  // nothing recomputed
  EXPECT_EQ(counters_.kv_moves_for(KvMoveTrigger::kNodePaused, KvMoveResult::kMoved), 1);
  EXPECT_EQ(counters_.kv_move_bytes.load(), 4096);
  for (int i = 0; i < kNumMigrationReasons; ++i) {
    EXPECT_EQ(counters_.migrations[i].load(), 0);
  }
  EXPECT_EQ(counters_.requests_ok.load(), 1);
  EXPECT_EQ(sink.responses.back().usage().completion_tokens(),
            static_cast<int32_t>(partial_.size() + rest_.size()));
}

TEST_F(RequestFlowKvTest, WithNoOtherDecodeNodeThePausedStreamResumesWhereItIs) {
  AddNodes(/*with_d2=*/false);
  d1.client->AddStream(PausingSource(partial_, rest_));
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(sink.text(), " partial rest");
  EXPECT_THAT(d1.client->resumes(), ElementsAre(d1.client->reserves()[0].request_id()));
  EXPECT_TRUE(d1.client->exports().empty());
  EXPECT_EQ(counters_.kv_moves_for(KvMoveTrigger::kNodePaused, KvMoveResult::kResumed), 1);
}

TEST_F(RequestFlowKvTest, AFailedExportResumesTheSource) {
  AddNodes();
  d1.client->AddStream(PausingSource(partial_, rest_));
  d1.client->SetExportAnswer(grpc::Status(grpc::StatusCode::UNAVAILABLE, "transport down"));
  d2.client->AddStream({.events = TokenEvents(Encode(" wrong"))});
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(sink.text(), " partial rest");  // the destination's tokens never reach the client
  EXPECT_EQ(d1.client->exports().size(), 1u);
  EXPECT_EQ(d1.client->resumes().size(), 1u);
  EXPECT_EQ(counters_.kv_moves_for(KvMoveTrigger::kNodePaused, KvMoveResult::kResumed), 1);
  EXPECT_EQ(counters_.kv_moves_for(KvMoveTrigger::kNodePaused, KvMoveResult::kMoved), 0);
}

TEST_F(RequestFlowKvTest, AFailedDestinationReservationResumesTheSource) {
  AddNodes();
  d1.client->AddStream(PausingSource(partial_, rest_));
  d2.client->AddStream({.end = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "no blocks"),
                        .fail_reserve = true});
  CollectingSink sink;
  const grpc::Status status = Run("Hi", sink);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(sink.text(), " partial rest");
  EXPECT_TRUE(d1.client->exports().empty());
  EXPECT_EQ(d1.client->resumes().size(), 1u);
  EXPECT_EQ(counters_.kv_moves_for(KvMoveTrigger::kNodePaused, KvMoveResult::kResumed), 1);
}

TEST_F(RequestFlowKvTest, WithLiveMigrationOffThePausedStreamResumes) {
  options_.live_kv_migration = false;
  AddNodes();
  d1.client->AddStream(PausingSource(partial_, rest_));
  CollectingSink sink;
  ASSERT_TRUE(Run("Hi", sink).ok());
  EXPECT_EQ(sink.text(), " partial rest");
  EXPECT_TRUE(d2.client->reserves().empty());
  EXPECT_EQ(d1.client->resumes().size(), 1u);
}

TEST_F(RequestFlowKvTest, TheRouterMovesAStreamOffADecodeNodeOutOfBlocks) {
  options_.kv_rebalance_interval_ms = 0;  // rounds run by the test
  AddNodes();
  // d:1 streams " partial" and holds until asked to pause; then the pause.
  std::vector<v1::DecodeEvent> events = TokenEvents(partial_, "");
  const size_t hold_at = events.size();
  v1::DecodeEvent paused;
  paused.set_migration_paused(true);
  events.push_back(paused);
  d1.client->AddStream({.events = events, .hold_at = hold_at});
  d2.client->AddStream({.events = TokenEvents(rest_)});
  RequestRunner runner(testing::TestServedModel(), &directory_, options_, &counters_, &metrics_);
  v1::GenerateRequest request;
  request.set_text("Hi");
  request.mutable_sampling()->set_max_tokens(16);
  CollectingSink sink;
  absl::Notification done;
  grpc::Status status;
  runner.Start(request, RunOptions(), &sink, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  // Once the stream is on d:1, d:1 reports itself full (5 of 1000 blocks free, 3 running); d:2
  // has room.
  for (int i = 0; i < 400 && d1.client->reserves().empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(d1.client->reserves().size(), 1u);
  v1::NodeLoad full = d1.node->snapshot().load;
  full.set_num_free_kv_blocks(5);
  full.set_num_running(3);
  d1.node->MarkUp(full);
  std::vector<RebalanceMove> moves;
  for (int i = 0; i < 400 && moves.empty(); ++i) {  // until the stream is under way (2 s at most)
    moves = runner.RebalanceKvOnce();
    if (moves.empty()) absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from, "d:1");
  EXPECT_EQ(moves[0].to, "d:2");
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(sink.text(), " partial rest");
  EXPECT_EQ(d1.client->pauses().size(), 1u);
  EXPECT_EQ(d1.client->exports().size(), 1u);
  EXPECT_EQ(counters_.kv_moves_for(KvMoveTrigger::kRebalance, KvMoveResult::kMoved), 1);
  EXPECT_EQ(counters_.kv_moves_for(KvMoveTrigger::kNodePaused, KvMoveResult::kMoved), 0);
}

}  // namespace
}  // namespace tandem
