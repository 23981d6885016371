// tandem-decode's metrics: the collector's values after known events, and the real DecodeService
// (over gRPC, completions arriving through LocalTransport from a fake prefill node) counting each
// reservation's outcome, queue times, tokens and lease expiries.
#include "decode_node/decode_metrics.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/engine/engine.h"
#include "common/handoff/handoff_codec.h"
#include "common/metrics/prometheus_text.h"
#include "common/serving/grpc_server.h"
#include "common/transport/local_transport.h"
#include "decode_node/decode_service.h"
#include "gtest/gtest.h"
#include "tandem/v1/node.grpc.pb.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/common/serving/promtool_check.h"
#include "tests/decode_node/decode_test_node.h"

namespace tandem {
namespace {

using ::tandem::testing::DecodeNode;
using ::tandem::testing::ReserveCall;
using ::tandem::testing::Scrape;
using ::tandem::testing::SendCompletion;
using ::tandem::testing::WriteKv;

double Ended(const PrometheusText& scrape, const std::string& outcome) {
  return scrape.Value("tandem_decode_reservations_ended_total", {{"outcome", outcome}})
      .value_or(-1);
}

TEST(DecodeMetricsTest, CountsKnownEvents) {
  DecodeMetrics metrics;
  metrics.ReservationStarted();
  metrics.ReservationStarted();
  metrics.ReservationEnded(ReservationOutcome::kImported);
  metrics.ReservationEnded(ReservationOutcome::kLeaseExpired);
  metrics.GenerateStarted();
  metrics.ObserveQueueTime(DecodePath::kReserve, absl::Milliseconds(30));
  metrics.ObserveQueueTime(DecodePath::kGenerate, absl::Milliseconds(1));
  metrics.ObserveQueueTime(DecodePath::kGenerate, absl::Milliseconds(3));
  PrometheusText scrape = Scrape(metrics);
  EXPECT_EQ(scrape.Value("tandem_decode_reservations_total"), 2);
  EXPECT_EQ(Ended(scrape, "imported"), 1);
  EXPECT_EQ(Ended(scrape, "lease_expired"), 1);
  for (const char* outcome : {"refused", "cancelled", "aborted", "failed"}) {
    EXPECT_EQ(Ended(scrape, outcome), 0) << outcome;
  }
  EXPECT_EQ(scrape.Value("tandem_decode_generate_requests_total"), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_queue_seconds_count", {{"path", "reserve"}}), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_queue_seconds_count", {{"path", "generate"}}), 2);
  EXPECT_DOUBLE_EQ(*scrape.Value("tandem_decode_queue_seconds_sum", {{"path", "generate"}}), 0.004);
  EXPECT_STREQ(ReservationOutcomeName(ReservationOutcome::kLeaseExpired), "lease_expired");
}

TEST(DecodeMetricsTest, CountsLiveMigration) {
  DecodeMetrics metrics;
  metrics.MigrationIn();
  metrics.KvExportSucceeded(4096);
  metrics.KvExportSucceeded(1024);
  metrics.KvExportFailed();
  PrometheusText scrape = Scrape(metrics);
  EXPECT_EQ(scrape.Value("tandem_decode_migrations_in_total"), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_kv_exports_total", {{"result", "ok"}}), 2);
  EXPECT_EQ(scrape.Value("tandem_decode_kv_exports_total", {{"result", "failed"}}), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_kv_export_bytes_total"), 5120);
  // The paused-requests gauge is the engine's, read at scrape time: none without one.
  EXPECT_FALSE(scrape.Value("tandem_decode_paused_requests").has_value());
  EXPECT_EQ(testing::PromtoolProblems(MetricsText({&metrics})), "");
}

TEST(DecodeServiceMetricsTest, CountsEachReservationOutcome) {
  DecodeNode node;
  int completion_tokens = 0;

  // Imported: the handoff, then the first token and 4 more.
  {
    ReserveCall call(node, MakePrompt(10, 1), 5);
    v1::DecodeEvent first;
    ASSERT_TRUE(call.reader->Read(&first));
    ASSERT_TRUE(first.has_handoff());
    WriteKv(node.backend, first.handoff(), MakePrompt(10, 1));
    SendCompletion(first.handoff(), /*ok=*/true, 7);
    ASSERT_TRUE(call.Finish().ok());
    ASSERT_FALSE(call.events.empty());
    ASSERT_EQ(call.events.front().tokens_size(), 1);
    EXPECT_EQ(call.events.front().tokens(0).id(), 7);
    EXPECT_GE(call.events.front().queue_us(), 0);
    completion_tokens += call.events.back().usage().completion_tokens();
    EXPECT_EQ(call.events.back().usage().completion_tokens(), 5);
  }
  // Aborted: the prefill node reports that it stopped writing.
  {
    ReserveCall call(node, MakePrompt(9, 2), 5);
    v1::DecodeEvent first;
    ASSERT_TRUE(call.reader->Read(&first));
    SendCompletion(first.handoff(), /*ok=*/false, 0);
    EXPECT_FALSE(call.Finish().ok());
  }
  // Lease expired: nothing arrives within 300 ms.
  {
    ReserveCall call(node, MakePrompt(9, 3), 5, /*lease_ms=*/300);
    grpc::Status status = call.Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  }
  // Refused: a lease over the maximum, and a token outside the vocabulary.
  {
    ReserveCall call(node, MakePrompt(9, 4), 5, /*lease_ms=*/120000);
    EXPECT_EQ(call.Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    std::vector<int> bad = MakePrompt(9, 4);
    bad[0] = kVocab;
    ReserveCall bad_call(node, bad, 5);
    EXPECT_EQ(bad_call.Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  // Cancelled: the caller goes away after the handoff.
  {
    ReserveCall call(node, MakePrompt(9, 5), 5);
    v1::DecodeEvent first;
    ASSERT_TRUE(call.reader->Read(&first));
    call.context.TryCancel();
    EXPECT_EQ(call.Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // A local Generate.
  {
    v1::NodeGenerateRequest request;
    const std::vector<int> prompt = MakePrompt(6, 6);
    request.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
    request.mutable_sampling()->set_temperature(0);
    request.mutable_sampling()->set_max_tokens(3);
    request.mutable_sampling()->set_ignore_eos(true);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    auto reader = node.stub->Generate(&context, request);
    v1::DecodeEvent event;
    std::vector<v1::DecodeEvent> events;
    while (reader->Read(&event)) events.push_back(event);
    ASSERT_TRUE(reader->Finish().ok());
    completion_tokens += events.back().usage().completion_tokens();
  }

  // A call's status can reach the client before the server counted its outcome, and a final
  // event before the engine published the end of its step: wait until the 6 calls are counted
  // and the engine has ended the 5 requests it took (the refused ones never reached it).
  PrometheusText scrape;
  for (int i = 0; i < 200; ++i) {
    scrape = Scrape(node.metrics);
    if (scrape.Sum("tandem_decode_reservations_ended_total") == 6 &&
        scrape.Value("tandem_decode_finished_requests_total") == 5 &&
        scrape.Value("tandem_decode_kv_blocks_used") == 6) {  // 2 quarantined reservations
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(scrape.Value("tandem_decode_reservations_total"), 6);
  EXPECT_EQ(Ended(scrape, "imported"), 1);
  EXPECT_EQ(Ended(scrape, "aborted"), 1);
  EXPECT_EQ(Ended(scrape, "lease_expired"), 1);
  EXPECT_EQ(Ended(scrape, "refused"), 2);
  EXPECT_EQ(Ended(scrape, "cancelled"), 1);
  EXPECT_EQ(Ended(scrape, "failed"), 0);
  EXPECT_EQ(scrape.Value("tandem_decode_lease_expiries_total"), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_imported_requests_total"), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_generate_requests_total"), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_queue_seconds_count", {{"path", "reserve"}}), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_queue_seconds_count", {{"path", "generate"}}), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_generated_tokens_total"), completion_tokens);
  // The expired and the cancelled reservations' blocks wait out the write grace; the aborted
  // one's writer said it stopped, so its blocks are free.
  EXPECT_EQ(scrape.Value("tandem_decode_kv_blocks_quarantined"), 6);
  EXPECT_EQ(scrape.Value("tandem_decode_kv_blocks_used"), 6);
  EXPECT_EQ(scrape.Value("tandem_decode_pending_reservations"), 0);
  EXPECT_EQ(scrape.Value("tandem_decode_reservations_awaiting_kv"), 0);
  EXPECT_EQ(scrape.Value("tandem_decode_running_sequences"), 0);
  EXPECT_EQ(scrape.Value("tandem_decode_paused_requests"), 0);
  EXPECT_EQ(scrape.Value("tandem_decode_migrations_in_total"), 0);
  EXPECT_EQ(scrape.Sum("tandem_decode_step_duration_seconds_count"),
            *scrape.Value("tandem_decode_steps_total"));
  EXPECT_EQ(testing::PromtoolProblems(MetricsText({&node.metrics})), "");
}

}  // namespace
}  // namespace tandem
