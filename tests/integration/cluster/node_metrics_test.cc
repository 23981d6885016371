// tandem-prefill's and tandem-decode's /metrics under real traffic: router -> 1 prefill -> 1
// decode over UCX. Each node's endpoint is scraped over HTTP; the numbers must match what the
// requests did (tokens, reservations, KV blocks and bytes moved, prefix-cache hits), histograms
// must agree with the step counters, counters must only grow, gauges must return to idle, and
// `promtool check metrics` must accept every scrape.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/metrics/prometheus_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/serving/promtool_check.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

constexpr int kBlockSize = 16;

PrometheusText MustScrape(const std::string& address) {
  absl::StatusOr<std::string> text = ScrapeMetrics(address);
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return PrometheusText();
  EXPECT_EQ(PromtoolProblems(*text), "") << "scrape of " << address;
  absl::StatusOr<PrometheusText> parsed = PrometheusText::Parse(*text);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : PrometheusText();
}

// Every histogram series: its +Inf bucket equals its _count, and buckets never decrease.
void ExpectHistogramsConsistent(const PrometheusText& scrape, const std::string& what) {
  int checked = 0;
  for (const MetricSample& count : scrape.samples()) {
    if (!absl::EndsWith(count.name, "_count")) continue;
    const std::string base = count.name.substr(0, count.name.size() - 6);
    MetricLabels inf = count.labels;
    inf["le"] = "+Inf";
    std::optional<double> total = scrape.Value(base + "_bucket", inf);
    if (!total.has_value()) continue;  // a summary (the exposer's own), not a histogram
    ++checked;
    EXPECT_EQ(*total, count.value) << what << ": " << count.name;
    double previous = 0;
    for (const MetricSample& bucket : scrape.samples()) {
      if (bucket.name != base + "_bucket") continue;
      MetricLabels rest = bucket.labels;
      rest.erase("le");
      MetricLabels wanted = count.labels;
      if (rest != wanted) continue;
      EXPECT_GE(bucket.value, previous) << what << ": " << base << " le=" << bucket.labels.at("le");
      previous = bucket.value;
    }
  }
  EXPECT_GT(checked, 0) << what << ": no histograms";
}

// Counters never go down between two scrapes of the same process.
void ExpectCountersGrew(const PrometheusText& before, const PrometheusText& after,
                        const std::string& what) {
  for (const MetricSample& s : before.samples()) {
    if (!absl::StartsWith(s.name, "tandem_")) continue;
    const bool counter = absl::EndsWith(s.name, "_total") || absl::EndsWith(s.name, "_count") ||
                         absl::EndsWith(s.name, "_sum") || absl::EndsWith(s.name, "_bucket");
    if (!counter) continue;
    std::optional<double> later = after.Value(s.name, s.labels);
    ASSERT_TRUE(later.has_value()) << what << ": " << s.name << " disappeared";
    EXPECT_GE(*later, s.value) << what << ": " << s.name;
  }
}

std::vector<int> MetricsPrompt(int length, int salt) {
  std::vector<int> prompt;
  for (int i = 0; i < length; ++i) prompt.push_back(1000 + salt * 1777 + i * 13);
  return prompt;
}

int Blocks(int tokens) { return (tokens + kBlockSize - 1) / kBlockSize; }

class NodeMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = TestModelDir("llama");
    ClusterSpec spec;
    spec.model_dir = model_;
    spec.node_args = {"--max-num-batched-tokens",
                      "16",
                      "--max-num-seqs",
                      "8",
                      "--kv-cache-mb",
                      "8",
                      "--block-size",
                      std::to_string(kBlockSize)};
    // Every request disaggregated, whatever the timing: the cost policy (the default) may prefill
    // the repeated prompt on the decode node, which holds 32 of its 33 tokens, once the nodes
    // have reported their step prices (CI saw it pick cheaper_local on a slow run).
    spec.router_args = {"--policy", "least_loaded", "--local-prefill-threshold", "0"};
    ASSERT_NO_FATAL_FAILURE(cluster_.Start(spec));
    ASSERT_NE(cluster_.decode_metrics_address(0), "");
    ASSERT_NE(cluster_.prefill_metrics_address(0), "");
    // The fixture asks the router for both as well; its ready file names them.
    EXPECT_NE(cluster_.router_metrics_address(), "");
    EXPECT_NE(cluster_.router_http_address(), "");
  }

  // KV bytes of one block of this model (f32 K and V, every layer).
  int64_t BlockBytes() {
    std::ifstream in(model_ + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    const int64_t heads = config["num_attention_heads"];
    const int64_t head_dim = config.contains("head_dim")
                                 ? config["head_dim"].get<int64_t>()
                                 : config["hidden_size"].get<int64_t>() / heads;
    return int64_t{2} * config["num_hidden_layers"].get<int64_t>() *
           config["num_key_value_heads"].get<int64_t>() * head_dim * kBlockSize * 4;
  }

  // Scrapes both nodes until each engine has ended `requests` requests and neither holds a
  // sequence or a block (or 10 s pass). A response can overtake the engine's stats of its last
  // step.
  void ScrapeWhenIdle(int requests, PrometheusText* decode, PrometheusText* prefill) {
    for (int i = 0; i < 200; ++i) {
      *decode = MustScrape(cluster_.decode_metrics_address(0));
      *prefill = MustScrape(cluster_.prefill_metrics_address(0));
      if (decode->Value("tandem_decode_finished_requests_total") == requests &&
          prefill->Value("tandem_prefill_finished_requests_total") == requests &&
          decode->Value("tandem_decode_running_sequences") == 0 &&
          decode->Value("tandem_decode_kv_blocks_used") == 0 &&
          prefill->Value("tandem_prefill_running_sequences") == 0 &&
          prefill->Value("tandem_prefill_kv_blocks_used") == 0) {
        return;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  std::string model_;
  LocalCluster cluster_;
};

TEST_F(NodeMetricsTest, NumbersMatchTheTraffic) {
  const PrometheusText decode_before = MustScrape(cluster_.decode_metrics_address(0));
  const PrometheusText prefill_before = MustScrape(cluster_.prefill_metrics_address(0));
  EXPECT_EQ(decode_before.Value("tandem_decode_generated_tokens_total"), 0);
  EXPECT_EQ(prefill_before.Value("tandem_prefill_requests_total"), 0);

  // Four prompts sharing no block, of 1 to 3 blocks; then the second one again.
  const std::vector<int> lengths = {20, 33, 45, 9};
  std::vector<std::vector<int>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i) prompts.push_back(MetricsPrompt(lengths[i], i + 1));
  prompts.push_back(prompts[1]);
  int completion_tokens = 0;
  int decode_steps_tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int max_tokens = 4 + static_cast<int>(i);
    GenerateOutcome out = cluster_.Generate(GreedyTokenRequest(prompts[i], max_tokens));
    ASSERT_TRUE(out.status.ok()) << out.status.error_message() << "\n" << cluster_.Logs();
    ASSERT_EQ(static_cast<int>(out.tokens.size()), max_tokens);
    completion_tokens += static_cast<int>(out.tokens.size());
    decode_steps_tokens += max_tokens - 1;  // the first token comes from the prefill node
  }
  const int num_requests = static_cast<int>(prompts.size());

  PrometheusText decode;
  PrometheusText prefill;
  ScrapeWhenIdle(num_requests, &decode, &prefill);

  // --- router: every request went to the prefill node (else the node numbers below cannot hold)
  const PrometheusText router = MustScrape(cluster_.router_metrics_address());
  EXPECT_EQ(router.Value("tandem_router_placements_total",
                         {{"mode", "disaggregated"}, {"reason", "prefill_node"}}),
            num_requests)
      << cluster_.Logs();

  // --- decode node ---
  EXPECT_EQ(decode.Value("tandem_decode_generated_tokens_total"), completion_tokens);
  EXPECT_EQ(decode.Value("tandem_decode_reservations_total"), num_requests);
  EXPECT_EQ(decode.Value("tandem_decode_reservations_ended_total", {{"outcome", "imported"}}),
            num_requests);
  EXPECT_EQ(decode.Sum("tandem_decode_reservations_ended_total"), num_requests);
  EXPECT_EQ(decode.Value("tandem_decode_imported_requests_total"), num_requests);
  EXPECT_EQ(decode.Value("tandem_decode_queue_seconds_count", {{"path", "reserve"}}), num_requests);
  EXPECT_EQ(decode.Value("tandem_decode_generate_requests_total"), 0);
  EXPECT_EQ(decode.Value("tandem_decode_lease_expiries_total"), 0);
  EXPECT_EQ(decode.Value("tandem_decode_preemptions_total"), 0);
  // Only decodes ran here: one token per step and sequence.
  EXPECT_EQ(decode.Value("tandem_decode_computed_tokens_total"), decode_steps_tokens);
  EXPECT_EQ(decode.Sum("tandem_decode_step_tokens_sum"), decode_steps_tokens);
  EXPECT_EQ(decode.Value("tandem_decode_step_tokens_count", {{"phase", "prefill"}}), 0);
  const double decode_steps = decode.Value("tandem_decode_steps_total").value_or(-1);
  EXPECT_GT(decode_steps, 0);
  EXPECT_EQ(decode.Sum("tandem_decode_step_duration_seconds_count"), decode_steps);
  EXPECT_EQ(decode.Sum("tandem_decode_step_batch_size_count"), decode_steps);
  EXPECT_EQ(decode.Sum("tandem_decode_step_tokens_count"), decode_steps);
  EXPECT_EQ(decode.Value("tandem_decode_running_sequences"), 0);
  EXPECT_EQ(decode.Value("tandem_decode_waiting_sequences"), 0);
  EXPECT_EQ(decode.Value("tandem_decode_kv_blocks_used"), 0);
  EXPECT_EQ(decode.Value("tandem_decode_kv_blocks_free"), decode.Value("tandem_decode_kv_blocks"));
  EXPECT_EQ(decode.Value("tandem_decode_reservations_awaiting_kv"), 0);
  EXPECT_EQ(decode.Value("tandem_decode_pending_reservations"), 0);
  EXPECT_EQ(decode.Value("tandem_decode_kv_blocks_quarantined"), 0);
  // The repeated prompt found its first two blocks in the decode node's prefix cache.
  EXPECT_EQ(decode.Value("tandem_decode_prefix_cache_hit_tokens_total"), 2 * kBlockSize);

  // --- prefill node ---
  int blocks = 0;
  int prompt_tokens = 0;
  for (size_t i = 0; i + 1 < prompts.size(); ++i) {
    blocks += Blocks(lengths[i]);
    prompt_tokens += lengths[i];
  }
  // The repeat: 33 tokens, 2 blocks held by the decode node, 1 sent.
  blocks += 1;
  prompt_tokens += 33;
  EXPECT_EQ(prefill.Value("tandem_prefill_requests_total"), num_requests);
  EXPECT_EQ(prefill.Value("tandem_prefill_request_duration_seconds_count"), num_requests);
  EXPECT_EQ(prefill.Sum("tandem_prefill_kv_transfer_failures_total"), 0);
  EXPECT_EQ(prefill.Value("tandem_prefill_kv_sent_blocks_total"), blocks);
  EXPECT_EQ(prefill.Value("tandem_prefill_kv_skipped_blocks_total"), 2);
  EXPECT_EQ(prefill.Value("tandem_prefill_kv_sent_bytes_total"), blocks * BlockBytes());
  EXPECT_EQ(prefill.Value("tandem_prefill_kv_transfer_seconds_count"), num_requests);
  EXPECT_EQ(prefill.Value("tandem_prefill_compute_seconds_count"), num_requests);
  EXPECT_EQ(prefill.Value("tandem_prefill_generated_tokens_total"), num_requests);
  // The repeat also hit this node's own prefix cache: 32 of its 33 tokens were not computed.
  EXPECT_EQ(prefill.Value("tandem_prefill_prefix_cache_hit_tokens_total"), 2 * kBlockSize);
  EXPECT_EQ(prefill.Value("tandem_prefill_computed_tokens_total"), prompt_tokens - 2 * kBlockSize);
  const double prefill_steps = prefill.Value("tandem_prefill_steps_total").value_or(-1);
  EXPECT_GT(prefill_steps, 0);
  EXPECT_EQ(prefill.Sum("tandem_prefill_step_duration_seconds_count"), prefill_steps);
  EXPECT_EQ(prefill.Value("tandem_prefill_step_tokens_count", {{"phase", "decode"}}), 0);
  EXPECT_EQ(prefill.Sum("tandem_prefill_step_tokens_sum"), prompt_tokens - 2 * kBlockSize);
  EXPECT_EQ(prefill.Value("tandem_prefill_running_sequences"), 0);
  EXPECT_EQ(prefill.Value("tandem_prefill_kv_blocks_used"), 0);
  EXPECT_EQ(prefill.Value("tandem_prefill_kv_blocks_export_held"), 0);

  ExpectHistogramsConsistent(decode, "decode");
  ExpectHistogramsConsistent(prefill, "prefill");
  ExpectCountersGrew(decode_before, decode, "decode");
  ExpectCountersGrew(prefill_before, prefill, "prefill");
  // Every family has HELP text.
  for (const PrometheusText* scrape : {&decode, &prefill}) {
    for (const MetricSample& s : scrape->samples()) {
      std::string family = s.name;
      for (const char* suffix : {"_bucket", "_count", "_sum"}) {
        if (scrape->Type(family).empty() && absl::EndsWith(family, suffix)) {
          family = family.substr(0, family.size() - std::string(suffix).size());
        }
      }
      EXPECT_NE(scrape->Help(family), "") << s.name;
    }
  }
}

TEST(NodeMetricsFlagsTest, EndpointCanBeTurnedOff) {
  // --metrics-listen "" (after the fixture's 127.0.0.1:0): no metrics address in the ready file.
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama");
  spec.node_args = {"--metrics-listen", ""};
  LocalCluster cluster;
  cluster.SetSpec(spec);
  auto prefill = cluster.StartPrefill(0);
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_EQ(cluster.prefill_metrics_address(0), "");
  EXPECT_THAT(cluster.prefill(0).ReadyFileText(), ::testing::Not(::testing::HasSubstr("metrics")));
}

}  // namespace
}  // namespace tandem::testing
