// tandem-prefill's metrics: the failure classification, the collector's values after known
// events, and the real PrefillService (over gRPC, its KV moving through LocalTransport into a
// fake decode node's pool) counting successes, bytes and each refusal with its reason.
#include "prefill_node/prefill_metrics.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/engine/engine.h"
#include "common/handoff/handoff_codec.h"
#include "common/metrics/prometheus_text.h"
#include "common/serving/grpc_server.h"
#include "common/transport/local_transport.h"
#include "gtest/gtest.h"
#include "prefill_node/prefill_service.h"
#include "tandem/v1/node.grpc.pb.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/common/serving/promtool_check.h"
#include "tests/prefill_node/prefill_test_nodes.h"

namespace tandem {
namespace {

using ::tandem::testing::FakeDecodeNode;
using ::tandem::testing::PrefillNode;
using ::tandem::testing::Scrape;

double Failures(const PrometheusText& scrape, const std::string& reason) {
  return scrape.Value("tandem_prefill_kv_transfer_failures_total", {{"reason", reason}})
      .value_or(-1);
}

TEST(KvTransferFailureTest, ClassifiesStatuses) {
  EXPECT_EQ(ClassifyTransferError(absl::DeadlineExceededError("ucx write ran past its deadline")),
            KvTransferFailure::kDeadline);
  EXPECT_EQ(ClassifyTransferError(absl::UnavailableError("connection to x failed")),
            KvTransferFailure::kPeerUnreachable);
  EXPECT_EQ(ClassifyTransferError(absl::CancelledError("prefill aborted")),
            KvTransferFailure::kCancelled);
  EXPECT_EQ(ClassifyTransferError(absl::OutOfRangeError("prompt block 4 has no remote block")),
            KvTransferFailure::kBadHandoff);
  EXPECT_EQ(ClassifyTransferError(absl::InternalError("boom")), KvTransferFailure::kOther);
  EXPECT_EQ(ClassifyHandoffError(absl::InvalidArgumentError("KV layout mismatch: num_layers")),
            KvTransferFailure::kLayoutMismatch);
  EXPECT_EQ(ClassifyHandoffError(absl::FailedPreconditionError("KV handoff is for transport x")),
            KvTransferFailure::kBadHandoff);
  EXPECT_STREQ(KvTransferFailureName(KvTransferFailure::kPeerUnreachable), "peer_unreachable");
  EXPECT_STREQ(KvTransferFailureName(KvTransferFailure::kOther), "other");
}

TEST(PrefillMetricsTest, CountsKnownEvents) {
  PrefillMetrics metrics;
  for (int i = 0; i < 3; ++i) metrics.RequestReceived();
  PrefillSuccess success;
  success.queue = absl::Milliseconds(2);
  success.compute = absl::Milliseconds(40);
  success.total = absl::Milliseconds(50);
  success.transfer = absl::Milliseconds(30);
  success.transfer_exposed = absl::Milliseconds(4);
  success.bytes = 4096;
  success.blocks_written = 4;
  success.blocks_skipped = 1;
  success.writes = 8;
  metrics.RequestSucceeded(success);
  success.transfer.reset();  // nothing written: no transfer time
  success.bytes = 0;
  success.blocks_written = 0;
  metrics.RequestSucceeded(success);
  metrics.RequestFailed(KvTransferFailure::kDeadline);

  PrometheusText scrape = Scrape(metrics);
  EXPECT_EQ(scrape.Value("tandem_prefill_requests_total"), 3);
  EXPECT_EQ(scrape.Value("tandem_prefill_request_duration_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(*scrape.Value("tandem_prefill_request_duration_seconds_sum"), 0.1);
  EXPECT_EQ(scrape.Value("tandem_prefill_compute_seconds_count"), 2);
  EXPECT_EQ(scrape.Value("tandem_prefill_queue_seconds_count"), 2);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_transfer_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(*scrape.Value("tandem_prefill_kv_transfer_seconds_sum"), 0.03);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_transfer_exposed_seconds_count"), 2);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_sent_bytes_total"), 4096);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_sent_blocks_total"), 4);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_skipped_blocks_total"), 2);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_writes_total"), 16);
  // Every reason is exported, the unused ones at 0.
  EXPECT_EQ(Failures(scrape, "deadline"), 1);
  for (const char* reason : {"peer_unreachable", "layout_mismatch", "bad_handoff",
                             "invalid_request", "cancelled", "other", "forged_handoff"}) {
    EXPECT_EQ(Failures(scrape, reason), 0) << reason;
  }
  // Without an engine: no engine gauges, only the step histograms.
  EXPECT_FALSE(scrape.Has("tandem_prefill_running_sequences"));
  EXPECT_TRUE(scrape.Has("tandem_prefill_step_duration_seconds_count"));
}

TEST(PrefillMetricsTest, OnADecodeNodeTheEngineFamiliesAreLeftToTheDecodeMetrics) {
  // tandem-decode --serve-prefill: one engine, whose families its tandem_decode_* metrics export.
  PrefillMetrics metrics(/*engine_metrics=*/false);
  metrics.engine_metrics().ObserveStep({});
  metrics.RequestReceived();
  metrics.RequestFailed(KvTransferFailure::kCancelled);
  PrometheusText scrape = Scrape(metrics);
  EXPECT_EQ(scrape.Value("tandem_prefill_requests_total"), 1);
  EXPECT_EQ(Failures(scrape, "cancelled"), 1);
  EXPECT_FALSE(scrape.Has("tandem_prefill_step_duration_seconds_count"));
  EXPECT_FALSE(scrape.Has("tandem_prefill_running_sequences"));
  // The default exports them.
  EXPECT_TRUE(Scrape(PrefillMetrics()).Has("tandem_prefill_step_duration_seconds_count"));
}

TEST(PrefillServiceMetricsTest, CountsHandoffsBytesAndRefusals) {
  FakeDecodeNode decode;
  PrefillNode prefill;
  const std::vector<int> prompt = MakePrompt(10, 1);  // 3 blocks of 4 tokens
  const int64_t block_bytes = static_cast<int64_t>(decode.layout.bytes_per_token()) * 4;

  v1::PrefillResponse response;
  ASSERT_TRUE(prefill.Prefill(prompt, decode.Handoff(1, {5, 6, 7}), &response).ok());
  EXPECT_EQ(response.bytes_transferred(), 3 * block_bytes);
  // The decode node holds the first 2 blocks already: only the third is sent.
  ASSERT_TRUE(prefill.Prefill(prompt, decode.Handoff(2, {8, 9, 10}, 8), &response).ok());
  EXPECT_EQ(decode.NumCompletions(/*ok=*/true), 2u);

  // Refusals, each with its reason; the decode node hears about every one.
  EXPECT_FALSE(prefill.Prefill(prompt, decode.Handoff(3, {11, 12}), &response).ok());
  v1::KvHandoff mismatched = decode.Handoff(4, {11, 12, 13});
  mismatched.mutable_layout()->set_num_layers(2);
  mismatched = decode.Signed(mismatched);
  EXPECT_FALSE(prefill.Prefill(prompt, mismatched, &response).ok());
  std::vector<int> bad_prompt = prompt;
  bad_prompt[3] = kVocab + 5;
  EXPECT_FALSE(prefill.Prefill(bad_prompt, decode.Handoff(5, {11, 12, 13}), &response).ok());
  v1::KvHandoff gone = decode.Handoff(6, {11, 12, 13});
  {
    LocalTransport departed;
    std::vector<char> pool(decode.layout.total_bytes());
    ASSERT_TRUE(departed.RegisterPool(pool.data(), pool.size()).ok());
    KvReservation r{.request_id = 6, .block_ids = {11, 12, 13}};
    gone = decode.Signed(
        MakeKvHandoff(r, departed, decode.layout, departed.incarnation(), 30000, KvSeal{}));
  }
  EXPECT_FALSE(prefill.Prefill(prompt, gone, &response).ok());

  // A call whose writes failed may answer before the engine published the end of its step and
  // let go of its blocks: wait until the engine has ended the 3 requests it took and is idle.
  PrometheusText scrape;
  for (int i = 0; i < 250; ++i) {
    scrape = Scrape(prefill.metrics);
    if (scrape.Value("tandem_prefill_finished_requests_total") == 3 &&
        scrape.Value("tandem_prefill_kv_blocks_used") == 0) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(scrape.Value("tandem_prefill_requests_total"), 6);
  EXPECT_EQ(scrape.Value("tandem_prefill_request_duration_seconds_count"), 2);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_sent_bytes_total"), 4 * block_bytes);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_sent_blocks_total"), 4);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_skipped_blocks_total"), 2);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_transfer_seconds_count"), 2);
  EXPECT_EQ(Failures(scrape, "bad_handoff"), 1);
  EXPECT_EQ(Failures(scrape, "layout_mismatch"), 1);
  EXPECT_EQ(Failures(scrape, "invalid_request"), 1);
  EXPECT_EQ(Failures(scrape, "peer_unreachable"), 1);
  EXPECT_EQ(Failures(scrape, "deadline"), 0);
  EXPECT_EQ(Failures(scrape, "other"), 0);
  // Every call ended either way.
  EXPECT_EQ(scrape.Sum("tandem_prefill_kv_transfer_failures_total") +
                *scrape.Value("tandem_prefill_request_duration_seconds_count"),
            *scrape.Value("tandem_prefill_requests_total"));
  // The engine's side: the two successful prompts and the one whose writes failed were computed
  // (the later two from their 8 cached tokens on); the refused ones never reached the engine.
  EXPECT_EQ(scrape.Value("tandem_prefill_generated_tokens_total"), 3);
  EXPECT_EQ(scrape.Value("tandem_prefill_prefix_cache_hit_tokens_total"), 16);
  EXPECT_EQ(scrape.Sum("tandem_prefill_step_tokens_sum"), 10 + 2 + 2);
  EXPECT_EQ(scrape.Sum("tandem_prefill_step_duration_seconds_count"),
            *scrape.Value("tandem_prefill_steps_total"));
  EXPECT_EQ(scrape.Value("tandem_prefill_running_sequences"), 0);
  // Exported blocks are released once their writes ended.
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_blocks_export_held"), 0);
  EXPECT_EQ(scrape.Value("tandem_prefill_kv_blocks_used"), 0);
  EXPECT_EQ(testing::PromtoolProblems(MetricsText({&prefill.metrics})), "");
}

TEST(PrefillServiceMetricsTest, DeadlineIsItsOwnReason) {
  FakeDecodeNode decode;
  // Writes take longer than the lease has left.
  PrefillNode prefill({.write_delay = absl::Seconds(5)});
  v1::PrefillResponse response;
  grpc::Status status = prefill.Prefill(
      MakePrompt(10, 2), decode.Handoff(1, {1, 2, 3}, 0, /*lease_ms=*/200), &response);
  EXPECT_FALSE(status.ok());
  PrometheusText scrape = Scrape(prefill.metrics);
  EXPECT_EQ(Failures(scrape, "deadline"), 1) << status.error_message();
  EXPECT_EQ(scrape.Value("tandem_prefill_request_duration_seconds_count"), 0);
}

}  // namespace
}  // namespace tandem
