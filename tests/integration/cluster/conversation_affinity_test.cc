// Conversation affinity (issue 19 item 4) on the real cluster: 2 sim-backend decode nodes (and 2
// prefill nodes when disaggregated) behind a router with --policy cost, which watches the decode
// nodes' KV events. The first turns of 32 conversations (distinct prompts of 2,048 tokens) spread
// over the decode nodes; once the decode nodes' caches reached the router (its
// tandem_router_node_cached_kv_blocks equals what the nodes' own streams show), each second turn
// (the first turn's prompt, its answer and a new question) goes to the decode node that holds the
// first (the nodes' receipts): that node counts a prefix-cache hit of the whole first turn for
// each (tandem_decode_prefix_cache_hit_*), and the prefill nodes send none of that KV (what a
// second turn sends, if it goes through a prefill node at all, is the new part's).
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/kv/block_hash.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/cluster/sim_node_args.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

constexpr int kConversations = 32;
constexpr int kPromptTokens = 2048;
constexpr int kAnswerTokens = 16;
constexpr int kQuestionTokens = 32;

// `n` tokens no other `salt` shares a block of.
std::vector<int> DistinctTokens(int salt, int n) {
  std::vector<int> p = {1000 + salt % 20000, 2000 + salt / 20000};
  while (static_cast<int>(p.size()) < n) {
    p.push_back(1000 + (salt * 7919 + static_cast<int>(p.size()) * 31) % 20000);
  }
  return p;
}

// One decode node's prefix cache, followed through its WatchKvEvents stream on a thread (opened
// again if it ends).
class CacheView {
 public:
  explicit CacheView(const std::string& address)
      : stub_(v1::DecodeNode::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        thread_([this] { Run(); }) {}
  ~CacheView() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      if (active_ != nullptr) active_->TryCancel();
    }
    thread_.join();
  }

  bool Holds(uint64_t hash) const {
    absl::MutexLock lock(&mu_);
    return view_.contains(hash);
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return view_.size();
  }
  int32_t block_size() const {
    absl::MutexLock lock(&mu_);
    return block_size_;
  }

 private:
  void Run() {
    while (true) {
      grpc::ClientContext context;
      context.set_wait_for_ready(true);
      {
        absl::MutexLock lock(&mu_);
        if (stop_) return;
        active_ = &context;
      }
      std::unique_ptr<grpc::ClientReader<v1::KvEvents>> reader =
          stub_->WatchKvEvents(&context, v1::WatchKvEventsRequest());
      v1::KvEvents events;
      while (reader->Read(&events)) {
        absl::MutexLock lock(&mu_);
        if (events.reset()) view_.clear();
        for (uint64_t h : events.removed()) view_.erase(h);
        for (uint64_t h : events.stored()) view_.insert(h);
        block_size_ = events.block_size();
      }
      reader->Finish();
      {
        absl::MutexLock lock(&mu_);
        active_ = nullptr;
        if (stop_) return;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  std::unique_ptr<v1::DecodeNode::Stub> stub_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_set<uint64_t> view_ ABSL_GUARDED_BY(mu_);
  int32_t block_size_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// The requests a node took, from every router (the sum of its receipts).
int64_t Received(LocalCluster& cluster, int decode) {
  absl::StatusOr<v1::NodeLoad> load = cluster.DecodeLoad(cluster.decode_address(decode));
  EXPECT_TRUE(load.ok()) << load.status();
  int64_t n = 0;
  if (load.ok()) {
    for (const v1::RouterReceipt& r : load->receipts()) n += r.received();
  }
  return n;
}

// Whether the router's placements on the decode nodes are all in their load reports (none in
// flight), within 10 s.
bool DecodeNodesSettled(LocalCluster& cluster) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    auto body = ScrapeMetrics(cluster.router_metrics_address());
    if (!body.ok()) return false;
    double in_flight = 0;
    for (int d = 0; d < 2; ++d) {
      in_flight += std::abs(MetricValue(
          *body, absl::StrCat("tandem_router_node_in_flight_requests{role=\"decode\",node=\"",
                              cluster.decode_address(d), "\"}")));
    }
    if (in_flight == 0) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

// The sum of `series` over the nodes' (decode, else prefill) metrics, and over the `path` label
// when `by_path`.
double SumOverNodes(LocalCluster& cluster, bool decode, const std::string& series,
                    bool by_path = false) {
  double sum = 0;
  for (int i = 0; i < 2; ++i) {
    auto body = ScrapeMetrics(decode ? cluster.decode_metrics_address(i)
                                     : cluster.prefill_metrics_address(i));
    EXPECT_TRUE(body.ok()) << body.status();
    if (!body.ok()) return -1;
    std::vector<std::string> names = {series};
    if (by_path) {
      names = {absl::StrCat(series, "{path=\"reserve\"}"),
               absl::StrCat(series, "{path=\"generate\"}")};
    }
    for (const std::string& name : names) {
      const double v = MetricValue(*body, name);
      EXPECT_GE(v, 0) << name << " missing";
      sum += v;
    }
  }
  return sum;
}

// The router's --mode.
class ConversationAffinityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ConversationAffinityTest, SecondTurnsLandOnTheDecodeNodeHoldingTheFirst) {
  const bool disaggregated = GetParam() == "disaggregated";
  LocalCluster cluster;
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama3.2");
  spec.num_prefill = disaggregated ? 2 : 0;
  spec.num_decode = 2;
  spec.node_args = SimNodeArgs(16384);
  // A chat's TTFT target, and long first turns: the ~40 ms a held first turn of 2,048 tokens saves
  // is 16% of it. With 1,024 tokens and the default 2 s target (1%) the saving was about as large
  // as the noise between the two nodes' learnt step prices in the score's TPOT part (which grows
  // when the machine is busy): one second turn of 32 went astray in one run of four, 9 of 32 at
  // 250 ms under ctest -j2.
  // Disaggregated, the prefill node that computed a first turn holds it too, so a second turn
  // sent elsewhere computes no more: what it costs is the history's KV on the link (~5.6 ms for
  // 2,128 tokens: 400 Gb/s at the sim's 1/128 KV bytes), which the router prices only given the
  // link's rate. Without it the two decode nodes differed only by their learnt prices, and under
  // ctest -j2 second turns went astray in 2 of 3 loaded suite runs. With it but the TPOT target at
  // 100 ms, the TPOT ratio (~0.05) would still bind and the transfer count only in the score's sum
  // (0.25 · 0.022), outweighed by a price difference of ~8%; at 200 ms the TTFT ratio binds.
  spec.router_args = {
      "--policy",      "cost", "--mode",         GetParam(), "--slo-ttft-ms",        "250",
      "--slo-tpot-ms", "200",  "--kv-link-gbps", "3.125",    "--health-interval-ms", "100"};
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));
  std::vector<std::unique_ptr<CacheView>> views;
  for (int d = 0; d < 2; ++d) {
    views.push_back(std::make_unique<CacheView>(cluster.decode_address(d)));
  }

  // Turn 1 of every conversation, all at once.
  std::vector<std::vector<int>> history(kConversations);
  {
    std::vector<GenerateOutcome> outcomes(kConversations);
    std::vector<std::thread> threads;
    for (int c = 0; c < kConversations; ++c) {
      history[c] = DistinctTokens(c, kPromptTokens);
      threads.emplace_back([&, c] {
        outcomes[c] = cluster.Generate(GreedyTokenRequest(history[c], kAnswerTokens));
      });
    }
    for (std::thread& t : threads) t.join();
    for (int c = 0; c < kConversations; ++c) {
      ASSERT_TRUE(outcomes[c].status.ok())
          << "conversation " << c << ": " << outcomes[c].status.error_message() << cluster.Logs();
      ASSERT_EQ(outcomes[c].tokens.size(), static_cast<size_t>(kAnswerTokens));
      history[c].insert(history[c].end(), outcomes[c].tokens.begin(), outcomes[c].tokens.end());
    }
  }

  // Where each first turn's KV is (every block of its prompt and answer but the last token's),
  // from the decode nodes' own streams.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (views[0]->block_size() == 0 || views[1]->block_size() == 0) {
    ASSERT_LT(absl::Now(), give_up) << "no KV events from the decode nodes" << cluster.Logs();
    absl::SleepFor(absl::Milliseconds(20));
  }
  const int32_t block_size = views[0]->block_size();
  std::vector<int> holder(kConversations, -1);
  std::vector<std::vector<uint64_t>> held(kConversations);
  for (int c = 0; c < kConversations; ++c) {
    const std::vector<TokenId> computed(history[c].begin(), history[c].end() - 1);
    held[c] = HashFullBlocks(computed, block_size);
    while (holder[c] < 0) {
      for (int d = 0; d < 2; ++d) {
        if (views[d]->Holds(held[c].front()) && views[d]->Holds(held[c].back())) holder[c] = d;
      }
      ASSERT_TRUE(holder[c] >= 0 || absl::Now() < give_up)
          << "conversation " << c << ": no decode node holds its first turn" << cluster.Logs();
      if (holder[c] < 0) absl::SleepFor(absl::Milliseconds(20));
    }
  }
  int on_first = 0;
  for (int h : holder) on_first += h == 0 ? 1 : 0;
  EXPECT_GT(on_first, 0) << "the first turns did not spread";
  EXPECT_LT(on_first, kConversations) << "the first turns did not spread";
  // ... and the router's view of each decode node is as large as the node's own (caches are
  // still now: nothing runs).
  for (int d = 0; d < 2; ++d) {
    const std::string series = absl::StrCat("tandem_router_node_cached_kv_blocks{role=\"decode\",",
                                            "node=\"", cluster.decode_address(d), "\"}");
    double seen = -1;
    while (absl::Now() < give_up) {
      auto body = ScrapeMetrics(cluster.router_metrics_address());
      ASSERT_TRUE(body.ok()) << body.status();
      seen = MetricValue(*body, series);
      if (seen == static_cast<double>(views[d]->size())) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_EQ(seen, static_cast<double>(views[d]->size()))
        << "the router never saw decode node " << d << "'s cache" << cluster.Logs();
  }

  // Turn 2 of each conversation, one at a time: it lands where its first turn's KV is.
  const double hits_before =
      SumOverNodes(cluster, true, "tandem_decode_prefix_cache_hit_requests_total", true);
  const double hit_tokens_before =
      SumOverNodes(cluster, true, "tandem_decode_prefix_cache_hit_prompt_tokens_total", true);
  auto prefill_sum = [&](const std::string& series) {
    return disaggregated ? SumOverNodes(cluster, false, series) : 0;
  };
  const double sent_before = prefill_sum("tandem_prefill_kv_sent_blocks_total");
  const double skipped_before = prefill_sum("tandem_prefill_kv_skipped_blocks_total");
  int64_t new_blocks = 0;  // the blocks of the second turns the holders lack
  int misplaced = 0;
  for (int c = 0; c < kConversations; ++c) {
    std::vector<int> prompt = history[c];
    const std::vector<int> question = DistinctTokens(1000 + c, kQuestionTokens);
    prompt.insert(prompt.end(), question.begin(), question.end());
    new_blocks += (static_cast<int64_t>(prompt.size()) + block_size - 1) / block_size -
                  static_cast<int64_t>(held[c].size());
    // Each sees the nodes idle: the turn before is in their load reports, not in flight.
    ASSERT_TRUE(DecodeNodesSettled(cluster)) << cluster.Logs();
    const int64_t before[2] = {Received(cluster, 0), Received(cluster, 1)};
    GenerateOutcome o = cluster.Generate(GreedyTokenRequest(prompt, kAnswerTokens));
    ASSERT_TRUE(o.status.ok()) << "conversation " << c << ": " << o.status.error_message()
                               << cluster.Logs();
    const int64_t took[2] = {Received(cluster, 0) - before[0], Received(cluster, 1) - before[1]};
    EXPECT_EQ(took[holder[c]], 1) << "conversation " << c << " (first turn on decode node "
                                  << holder[c] << ")";
    EXPECT_EQ(took[1 - holder[c]], 0)
        << "conversation " << c << " (first turn on decode node " << holder[c] << ")";
    if (took[holder[c]] != 1) ++misplaced;
  }
  EXPECT_EQ(misplaced, 0);

  // Each second turn found its first turn's KV: a hit of all of it, on either path.
  const double hits =
      SumOverNodes(cluster, true, "tandem_decode_prefix_cache_hit_requests_total", true) -
      hits_before;
  const double hit_tokens =
      SumOverNodes(cluster, true, "tandem_decode_prefix_cache_hit_prompt_tokens_total", true) -
      hit_tokens_before;
  int64_t first_turn_tokens = 0;
  for (int c = 0; c < kConversations; ++c) {
    first_turn_tokens += static_cast<int64_t>(held[c].size()) * block_size;
  }
  EXPECT_EQ(hits, kConversations);
  EXPECT_EQ(hit_tokens, static_cast<double>(first_turn_tokens));
  // No KV of the first turns crossed the link: a second turn prefilled by a prefill node was sent
  // only its new blocks, the rest skipped.
  const double sent = prefill_sum("tandem_prefill_kv_sent_blocks_total") - sent_before;
  const double skipped = prefill_sum("tandem_prefill_kv_skipped_blocks_total") - skipped_before;
  EXPECT_LE(sent, static_cast<double>(new_blocks));

  auto router = ScrapeMetrics(cluster.router_metrics_address());
  ASSERT_TRUE(router.ok());
  std::string placements;
  std::istringstream lines(*router);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("tandem_router_placements_total{", 0) == 0) placements += "\n  " + line;
  }
  std::printf(
      "--mode %s: first turns on decode 0 / 1: %d / %d; second turns: %.0f hits of %.0f tokens "
      "(of %lld held), prefill nodes sent %.0f blocks (new: %lld), skipped %.0f; router "
      "placements:%s\n",
      GetParam().c_str(), on_first, kConversations - on_first, hits, hit_tokens,
      static_cast<long long>(first_turn_tokens), sent, static_cast<long long>(new_blocks), skipped,
      placements.c_str());
  if (HasFailure()) ADD_FAILURE() << cluster.Logs();
}

// Colocated: each second turn goes to the decode node holding its first turn and computes only
// the new part there (the cost model's local option, priced by the node's learnt step cost).
INSTANTIATE_TEST_SUITE_P(Colocated, ConversationAffinityTest, ::testing::Values("colocated"));

// Disaggregated: each second turn goes to the decode node holding its first turn, and prefills
// there only the new part (the decode nodes have only decoded until then: the cost model prices
// their prompt tokens at the prefill pool's rate, router/placement_cost.h LocalPromptTokenUs), or
// through a prefill node that sends only the blocks the holder lacks.
INSTANTIATE_TEST_SUITE_P(Disaggregated, ConversationAffinityTest,
                         ::testing::Values("disaggregated"));

}  // namespace
}  // namespace tandem::testing
