// The real PrefillService refuses handoffs its decode node did not vouch for (issue 14 row 2):
// nothing is written into the decode node's pool, no notice reaches it, and the refusal is a
// PERMISSION_DENIED counted by reason.
#include <algorithm>
#include <string>
#include <vector>

#include "common/metrics/prometheus_text.h"
#include "gtest/gtest.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/prefill_node/prefill_test_nodes.h"

namespace tandem {
namespace {

using ::tandem::testing::FakeDecodeNode;
using ::tandem::testing::PrefillNode;
using ::tandem::testing::Scrape;

double Refused(const PrometheusText& scrape, const std::string& reason) {
  return scrape.Value("tandem_prefill_handoffs_refused_total", {{"reason", reason}}).value_or(-1);
}

constexpr char kUntouched = 0x5a;

// Whether every byte of the decode node's pool still holds kUntouched (the prefill node's pool is
// zeros, so any write shows).
bool Untouched(const std::vector<char>& pool) {
  return std::all_of(pool.begin(), pool.end(), [](char c) { return c == kUntouched; });
}

TEST(PrefillHandoffGateTest, TheRedTeamsForgedHandoffWritesNothing) {
  FakeDecodeNode decode;
  std::fill(decode.pool.begin(), decode.pool.end(), kUntouched);
  PrefillNode prefill;
  const std::vector<int> prompt = MakePrompt(4, 1);  // one block of 4 tokens
  // The red team's handoff: a real Reserve's answer with the pool made huge and a block far past
  // the real one, so the write would land wherever the caller chose. Unsigned, as an outsider has
  // no secret.
  v1::KvHandoff forged = decode.Handoff(1, {0});
  forged.mutable_layout()->set_num_blocks(2147483647);
  forged.set_block_ids(0, 2147483646);
  forged.clear_mac();
  v1::PrefillResponse response;
  grpc::Status status = prefill.Prefill(prompt, forged, &response, "forged-1");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();

  // The same alteration of a signed handoff (a man in the middle).
  v1::KvHandoff altered = decode.Handoff(2, {0});
  altered.set_block_ids(0, 2147483646);
  status = prefill.Prefill(prompt, altered, &response, "forged-2");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();

  // A handoff signed with another cluster's secret.
  v1::KvHandoff foreign = decode.Handoff(3, {0});
  testing::TestClusterAuth(std::string(32, 'x'))->Sign(&foreign);
  status = prefill.Prefill(prompt, foreign, &response, "forged-3");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();

  // Nothing moved: the pool is untouched and the decode node was told nothing.
  EXPECT_TRUE(Untouched(decode.pool));
  EXPECT_EQ(decode.NumCompletions(true) + decode.NumCompletions(false), 0u);
  PrometheusText scrape = Scrape(prefill.metrics);
  EXPECT_EQ(Refused(scrape, "bad_mac"), 3);
  EXPECT_EQ(
      scrape.Value("tandem_prefill_kv_transfer_failures_total", {{"reason", "forged_handoff"}}), 3);
  EXPECT_EQ(scrape.Value("tandem_prefill_finished_requests_total"), 0);

  // The genuine handoff still works, once.
  const v1::KvHandoff genuine = decode.Handoff(4, {0});
  ASSERT_TRUE(prefill.Prefill(prompt, genuine, &response, "genuine").ok());
  EXPECT_FALSE(Untouched(decode.pool));
  EXPECT_EQ(decode.NumCompletions(true), 1u);
  status = prefill.Prefill(prompt, genuine, &response, "replay");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_EQ(Refused(Scrape(prefill.metrics), "replayed"), 1);
  EXPECT_EQ(decode.NumCompletions(true), 1u);
}

TEST(PrefillHandoffGateTest, AnExpiredHandoffIsRefusedBeforeItsDecodeNodeIsContacted) {
  FakeDecodeNode decode;
  PrefillNode prefill;
  v1::KvHandoff stale = decode.Handoff(1, {0}, 0, /*lease_ms=*/1000);
  stale.set_issued_unix_ms(absl::ToUnixMillis(absl::Now()) - 60'000);
  decode.auth->Sign(&stale);
  v1::PrefillResponse response;
  const grpc::Status status = prefill.Prefill(MakePrompt(4, 2), stale, &response, "stale");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Refused(Scrape(prefill.metrics), "expired"), 1);
  EXPECT_EQ(decode.NumCompletions(false), 0u);
}

TEST(PrefillHandoffGateTest, ADuplicateRequestIdIsRefusedWhileTheFirstRuns) {
  FakeDecodeNode decode;
  // Slow writes keep the first request running.
  PrefillNode prefill({.write_delay = absl::Milliseconds(500)});
  v1::PrefillResponse first_response;
  grpc::Status first;
  std::thread t([&] {
    first = prefill.Prefill(MakePrompt(4, 3), decode.Handoff(1, {0}), &first_response, "dup");
  });
  absl::SleepFor(absl::Milliseconds(150));
  v1::PrefillResponse response;
  const grpc::Status second =
      prefill.Prefill(MakePrompt(4, 3), decode.Handoff(2, {1}), &response, "dup");
  t.join();
  EXPECT_EQ(second.error_code(), grpc::StatusCode::ALREADY_EXISTS) << second.error_message();
  EXPECT_TRUE(first.ok()) << first.error_message();
}

}  // namespace
}  // namespace tandem
