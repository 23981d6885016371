// RouterMetrics: what a request's life adds to the router's Prometheus families, and the
// decision counters read from RouterCounters at scrape time.
#include "router/router_metrics.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

std::string Scrape(const RouterMetrics& metrics) {
  std::vector<prometheus::MetricFamily> families = metrics.registry()->Collect();
  for (prometheus::MetricFamily& f : metrics.decisions()->Collect()) families.push_back(f);
  return prometheus::TextSerializer().Serialize(families);
}

const prometheus::MetricFamily* Find(const std::vector<prometheus::MetricFamily>& families,
                                     const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(RouterMetricsTest, ARequestAddsItsLatenciesAndTokens) {
  RouterCounters counters;
  RouterMetrics metrics(&counters, nullptr);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  RequestTimer timer(t0);
  metrics.RequestStarted();
  timer.Dispatched(t0 + absl::Milliseconds(2));
  timer.SetNodeQueue(absl::Milliseconds(3));
  metrics.TokensWritten(timer, 1, t0 + absl::Milliseconds(50));  // TTFT 50 ms
  metrics.TokensWritten(timer, 1, t0 + absl::Milliseconds(60));  // gap 10 ms
  metrics.TokensWritten(timer, 2, t0 + absl::Milliseconds(80));  // gap 20 ms
  EXPECT_EQ(timer.tokens(), 4);
  metrics.RequestFinished(RequestApi::kChatCompletions, grpc::StatusCode::OK, timer,
                          t0 + absl::Milliseconds(100), /*prompt_tokens=*/7,
                          /*completion_tokens=*/4, /*cached_tokens=*/3);

  const auto families = metrics.registry()->Collect();
  const auto* ttft = Find(families, "tandem_router_time_to_first_token_seconds");
  ASSERT_NE(ttft, nullptr);
  ASSERT_EQ(ttft->metric.size(), 1u);
  EXPECT_EQ(ttft->metric[0].histogram.sample_count, 1u);
  EXPECT_NEAR(ttft->metric[0].histogram.sample_sum, 0.050, 1e-9);
  const auto* itl = Find(families, "tandem_router_inter_token_latency_seconds");
  ASSERT_NE(itl, nullptr);
  EXPECT_EQ(itl->metric[0].histogram.sample_count, 2u);
  EXPECT_NEAR(itl->metric[0].histogram.sample_sum, 0.030, 1e-9);
  // TPOT: (80 - 50) ms over 3 tokens after the first.
  const auto* tpot = Find(families, "tandem_router_time_per_output_token_seconds");
  ASSERT_NE(tpot, nullptr);
  EXPECT_NEAR(tpot->metric[0].histogram.sample_sum, 0.010, 1e-9);
  const auto* e2e = Find(families, "tandem_router_e2e_request_latency_seconds");
  EXPECT_NEAR(e2e->metric[0].histogram.sample_sum, 0.100, 1e-9);
  // Queue: 2 ms at the router + 3 ms on the node.
  const auto* queue = Find(families, "tandem_router_request_queue_time_seconds");
  EXPECT_NEAR(queue->metric[0].histogram.sample_sum, 0.005, 1e-9);
  EXPECT_EQ(Find(families, "tandem_router_prompt_tokens_total")->metric[0].counter.value, 7);
  EXPECT_EQ(Find(families, "tandem_router_completion_tokens_total")->metric[0].counter.value, 4);
  EXPECT_EQ(Find(families, "tandem_router_cached_prompt_tokens_total")->metric[0].counter.value, 3);
  EXPECT_EQ(Find(families, "tandem_router_requests_in_flight")->metric[0].gauge.value, 0);
  EXPECT_THAT(Scrape(metrics), HasSubstr("tandem_router_requests_total{api=\"chat_completions\","
                                         "status=\"ok\"} 1"));
}

TEST(RouterMetricsTest, RefusedAndFailedRequestsAreCountedByStatusWithoutLatencies) {
  RouterCounters counters;
  RouterMetrics metrics(&counters, nullptr);
  metrics.RequestRefused(RequestApi::kCompletions, grpc::StatusCode::INVALID_ARGUMENT);
  metrics.RequestRefused(RequestApi::kCompletions, grpc::StatusCode::RESOURCE_EXHAUSTED);
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  RequestTimer timer(t0);
  metrics.RequestStarted();
  metrics.RequestFinished(RequestApi::kGrpc, grpc::StatusCode::UNAVAILABLE, timer,
                          t0 + absl::Seconds(1), 5, 0, 0);
  const std::string text = Scrape(metrics);
  EXPECT_THAT(text, HasSubstr("{api=\"completions\",status=\"invalid_argument\"} 1"));
  EXPECT_THAT(text, HasSubstr("{api=\"completions\",status=\"resource_exhausted\"} 1"));
  EXPECT_THAT(text, HasSubstr("{api=\"grpc\",status=\"unavailable\"} 1"));
  const auto families = metrics.registry()->Collect();
  EXPECT_EQ(
      Find(families, "tandem_router_time_to_first_token_seconds")->metric[0].histogram.sample_count,
      0u);
  EXPECT_EQ(
      Find(families, "tandem_router_e2e_request_latency_seconds")->metric[0].histogram.sample_count,
      1u);
}

TEST(RouterMetricsTest, DecisionsComeFromTheCountersAtScrapeTime) {
  RouterCounters counters;
  RouterMetrics metrics(&counters, nullptr);
  counters.disaggregated += 3;
  counters.local_prefill_short_prompt += 2;
  counters.local_prefill_cheaper_local += 5;
  counters.AddRetry(RetryReason::kPrefillFailed);
  counters.stop_string_hits += 4;
  const std::string text = Scrape(metrics);
  EXPECT_THAT(text, HasSubstr("tandem_router_placements_total{mode=\"disaggregated\","
                              "reason=\"prefill_node\"} 3"));
  EXPECT_THAT(text, HasSubstr("tandem_router_placements_total{mode=\"local_prefill\","
                              "reason=\"short_prompt\"} 2"));
  EXPECT_THAT(text, HasSubstr("tandem_router_placements_total{mode=\"local_prefill\","
                              "reason=\"cheaper_local\"} 5"));
  EXPECT_THAT(text, HasSubstr("tandem_router_retries_total{reason=\"prefill_failed\"} 1"));
  EXPECT_THAT(text, HasSubstr("tandem_router_stop_string_hits_total 4"));
  counters.disaggregated += 1;
  EXPECT_THAT(Scrape(metrics), HasSubstr("reason=\"prefill_node\"} 4"));
}

}  // namespace
}  // namespace tandem
