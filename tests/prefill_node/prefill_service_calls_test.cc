// PrefillService's Prefill costs memory, not a thread (issue 16 item 9): it runs on gRPC's
// callback API, so with the sync pool capped at 4 threads and every one but the poller held by a
// WatchKvEvents stream, 32 concurrent prefills still run and complete. And the waits it does
// without a thread keep their behaviour: a call whose caller left while the KV was written still
// ends once the writer reports, a handoff whose lease runs out mid-write is counted deadline, and
// each call's router id is free again once it answered.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/metrics/prometheus_text.h"
#include "common/serving/grpc_server.h"
#include "gtest/gtest.h"
#include "tests/common/serving/liveness_probe.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/prefill_node/prefill_test_nodes.h"

namespace tandem {
namespace {

using ::tandem::testing::FakeDecodeNode;
using ::tandem::testing::PrefillNode;
using ::tandem::testing::Scrape;
using ::tandem::testing::WatchCall;

constexpr int kCallsSyncThreads = 4;
constexpr int kCalls = 32;

double CallFailures(const PrometheusText& scrape, const std::string& reason) {
  return scrape.Value("tandem_prefill_kv_transfer_failures_total", {{"reason", reason}})
      .value_or(-1);
}

// Once `failed` failures are counted (up to 4 s).
PrometheusText ScrapeOnceFailed(PrefillMetrics& metrics, double failed) {
  return testing::ScrapeUntil(metrics, [failed](const PrometheusText& scrape) {
    return scrape.Sum("tandem_prefill_kv_transfer_failures_total") >= failed;
  });
}

// A one-block prompt, distinct for each `i` below kVocab * kVocab.
std::vector<int> OneBlockPrompt(int i) { return {i % kVocab, i / kVocab, 1, 2}; }

TEST(PrefillServiceCallsTest, PrefillsRunAndCompleteWhileEverySyncThreadIsHeld) {
  FakeDecodeNode decode;
  PrefillNode prefill({}, GrpcServerOptions{.max_sync_threads = kCallsSyncThreads});
  std::vector<std::unique_ptr<WatchCall>> held;
  for (int i = 0; i < kCallsSyncThreads - 1; ++i) {
    held.push_back(std::make_unique<WatchCall>(prefill));
    v1::KvEvents first;
    ASSERT_TRUE(held.back()->reader->Read(&first)) << "stream " << i;
  }
  EXPECT_EQ(testing::SyncCall(*prefill.stub, absl::Milliseconds(500)).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED)
      << "the sync pool still had a thread: the prefills prove nothing";

  std::vector<grpc::Status> statuses(kCalls);
  std::vector<v1::PrefillResponse> responses(kCalls);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCalls; ++i) {
    callers.emplace_back([&, i] {
      statuses[i] = prefill.Prefill(OneBlockPrompt(i), decode.Handoff(i + 1, {i}), &responses[i],
                                    absl::StrCat("call-", i));
    });
  }
  for (std::thread& t : callers) t.join();
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_TRUE(statuses[i].ok()) << "call " << i << ": " << statuses[i].error_message();
    EXPECT_GT(responses[i].bytes_transferred(), 0) << "call " << i;
    EXPECT_TRUE(responses[i].has_first_token()) << "call " << i;
  }
  EXPECT_EQ(decode.NumCompletions(/*ok=*/true), static_cast<size_t>(kCalls));
  // Each call's router id was released with its answer: the id can be used again.
  v1::PrefillResponse again;
  EXPECT_TRUE(
      prefill.Prefill(OneBlockPrompt(100), decode.Handoff(100, {0}), &again, "call-0").ok());
  for (std::unique_ptr<WatchCall>& call : held) {
    EXPECT_EQ(call->Cancel().error_code(), grpc::StatusCode::CANCELLED);
  }
}

TEST(PrefillServiceCallsTest, ACallerThatGoesAwayMidWriteStillEndsItsCall) {
  FakeDecodeNode decode;
  PrefillNode prefill({.write_delay = absl::Milliseconds(600)});
  v1::PrefillRequest request;
  const std::vector<int> prompt = OneBlockPrompt(1);
  request.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
  request.mutable_sampling()->set_max_tokens(1);
  *request.mutable_handoff() = decode.Handoff(1, {0});
  request.set_request_id("gone");
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(150)));
  v1::PrefillResponse response;
  const grpc::Status status = prefill.stub->Prefill(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  // The prompt was computed before the caller left, so the engine had let go of it already: the
  // writes still land and the decode node still gets its completion. Then the call ends and its
  // router id is free again.
  for (int i = 0; i < 200 && decode.NumCompletions(/*ok=*/true) < 1; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(decode.NumCompletions(/*ok=*/true), 1u);
  grpc::Status again;
  for (int i = 0; i < 100; ++i) {
    v1::PrefillResponse second;
    again = prefill.Prefill(OneBlockPrompt(2), decode.Handoff(2, {1}), &second, "gone");
    if (again.error_code() != grpc::StatusCode::ALREADY_EXISTS) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(Scrape(prefill.metrics).Value("tandem_prefill_requests_total"), 2);
}

TEST(PrefillServiceCallsTest, AHandoffWhoseLeaseRunsOutMidWriteIsCountedDeadline) {
  FakeDecodeNode decode;
  PrefillNode prefill({.write_delay = absl::Seconds(2)});
  v1::PrefillResponse response;
  const grpc::Status status = prefill.Prefill(
      OneBlockPrompt(2), decode.Handoff(1, {0}, 0, /*lease_ms=*/300), &response, "late");
  EXPECT_FALSE(status.ok());
  const PrometheusText scrape = ScrapeOnceFailed(prefill.metrics, 1);
  EXPECT_EQ(CallFailures(scrape, "deadline"), 1) << status.error_message();
}

}  // namespace
}  // namespace tandem
