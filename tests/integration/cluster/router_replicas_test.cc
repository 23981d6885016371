// Router replicas (issue 19, in-flight accounting): several tandem-router processes in front of
// the same sim-backend nodes (2 prefill, 2 decode). Each node counts the requests every router
// tagged (NodeLoad receipts) in the same snapshot as the load it reports, so a router sees the
// others' work in the reports and its own until a report shows it: after a burst through router
// A, router B's view of the nodes holds A's work and B counts nothing in flight; and a burst of
// 64 simultaneous uncached long prompts spreads within one request of even over both pools through
// one router (least_loaded and the cost policy), within two per replica through 2 and 4 cost
// replicas.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/cluster/sim_node_args.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

ClusterSpec SimSpec(const std::string& policy, double time_scale = 1) {
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama3.2");
  spec.num_prefill = 2;
  spec.num_decode = 2;
  spec.node_args = SimNodeArgs(4096);
  spec.node_args.insert(spec.node_args.end(), {"--sim-time-scale", absl::StrCat(time_scale)});
  // Room on each decode node for the whole burst's KV, were it all to land there.
  spec.decode_args = {"--sim-kv-blocks", "16384"};
  spec.router_args = {"--policy", policy};
  return spec;
}

// A prompt of `n` tokens no other `i` shares a block of (uncached everywhere).
std::vector<int> LongPrompt(int i, int n) {
  std::vector<int> p = {1000 + i % 20000, 2000 + i / 20000};
  while (static_cast<int>(p.size()) < n) {
    p.push_back(1000 + (i * 7919 + static_cast<int>(p.size()) * 31) % 20000);
  }
  return p;
}

// The requests a node took, from every router (the sum of its receipts).
int64_t Received(const v1::NodeLoad& load) {
  int64_t n = 0;
  for (const v1::RouterReceipt& r : load.receipts()) n += r.received();
  return n;
}

// `requests` simultaneous prompts of `prompt_tokens`, request i through router i % routers;
// every one must succeed.
void Burst(LocalCluster& cluster, int requests, int prompt_tokens, int salt) {
  std::vector<GenerateOutcome> outcomes(requests);
  std::vector<std::thread> threads;
  absl::BlockingCounter ready(requests);
  absl::Notification go;
  for (int i = 0; i < requests; ++i) {
    threads.emplace_back([&, i] {
      const v1::GenerateRequest request =
          GreedyTokenRequest(LongPrompt(salt + i, prompt_tokens), 8);
      ready.DecrementCount();
      go.WaitForNotification();
      outcomes[i] = cluster.GenerateVia(i % cluster.num_routers(), request);
    });
  }
  ready.Wait();
  go.Notify();
  for (auto& t : threads) t.join();
  for (int i = 0; i < requests; ++i) {
    ASSERT_TRUE(outcomes[i].status.ok())
        << "request " << i << ": " << outcomes[i].status.error_message() << cluster.Logs();
    EXPECT_EQ(outcomes[i].tokens.size(), 8u) << "request " << i;
  }
}

// (policy, router replicas)
class BurstSpreadTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(BurstSpreadTest, SpreadsNearlyEvenlyOnBothPools) {
  const auto& [policy, routers] = GetParam();
  LocalCluster cluster;
  // The nodes are identical, but the cost policy places by each node's learnt price of a step,
  // which measures the process as well as the modelled GPU: on a loaded 2-core machine two sim
  // nodes' prices differed by up to 6% at time scale 1, enough for each of 4 replicas to put one
  // more prompt on the node it sees as faster (30/34). Slower modelled steps make the process's
  // share, and so the difference, smaller.
  ASSERT_NO_FATAL_FAILURE(cluster.Start(SimSpec(policy, /*time_scale=*/3)));
  for (int i = 1; i < routers; ++i) {
    auto replica = cluster.StartRouterReplica();
    ASSERT_TRUE(replica.ok()) << replica.status() << cluster.Logs();
  }
  constexpr int kRequests = 64;
  ASSERT_NO_FATAL_FAILURE(Burst(cluster, kRequests, 2000, /*salt=*/0));

  std::vector<std::string> lines;
  for (bool decode : {false, true}) {
    int64_t total = 0;
    std::vector<int64_t> counts;
    for (int i = 0; i < 2; ++i) {
      auto load = decode ? cluster.DecodeLoad(cluster.decode_address(i))
                         : cluster.PrefillLoad(cluster.prefill_address(i));
      ASSERT_TRUE(load.ok()) << load.status();
      counts.push_back(Received(*load));
      total += counts.back();
      // Every router placed work on every node, and the node counted each router apart.
      EXPECT_EQ(load->receipts_size(), routers) << (decode ? "decode " : "prefill ") << i;
      // With its learnt price of a step (per step + per token, µs): a node priced higher gets less.
      lines.push_back(absl::StrCat(decode ? "decode " : "prefill ", i, ": ", counts.back(), " (",
                                   absl::SixDigits(load->step_cost().per_step_us()), " + ",
                                   absl::SixDigits(load->step_cost().per_token_us()), "/token)"));
    }
    // Each request went to one decode node, and (all uncached long prompts) to one prefill node.
    EXPECT_EQ(total, kRequests) << (decode ? "decode" : "prefill") << " pool";
    // One router: within one of even. Replicas see each other only through the nodes' reports,
    // which land in the middle of the burst, so each may put a prompt or two more where it sees
    // it as cheaper: within two per replica. Herding, the failure this guards against, puts at
    // least a replica's whole share (16 of 64 through 4) more on one node.
    const int64_t bound = routers == 1 ? 1 : 2 * routers;
    for (int64_t n : counts) {
      EXPECT_LE(std::abs(n - kRequests / 2), bound)
          << (decode ? "decode" : "prefill") << " pool: " << absl::StrJoin(lines, ", ");
    }
  }
  std::printf("%d router(s), --policy %s: %s\n", routers, policy.c_str(),
              absl::StrJoin(lines, ", ").c_str());
}

std::string BurstName(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  std::string policy = std::get<0>(info.param);
  policy.erase(std::remove(policy.begin(), policy.end(), '_'), policy.end());
  return absl::StrCat(policy, std::get<1>(info.param), "Routers");
}

// least_loaded through one router: its in-flight accounting alone spreads the burst (32/32 on
// both pools). Through 2 and 4 replicas least_loaded is deterministic, so replicas that read the
// same report move together (32/32 on most runs, 30/34 on some): spreading them is the cost
// policy's randomized choice, below.
INSTANTIATE_TEST_SUITE_P(Replicas, BurstSpreadTest,
                         ::testing::Combine(::testing::Values("least_loaded"),
                                            ::testing::Values(1)),
                         BurstName);
// The check: the cost policy through 1, 2 and 4 replicas. Through several replicas load
// reports land in the middle of the burst, and a report shows each router the others' requests
// that reached one node but not those still on their way to the other; each replica may then put
// a prompt or two more on the node it sees as cheaper, so replicas are held within two per
// replica of even (a herd puts a replica's whole share more on one node). Within one per replica
// held on 7 of 7 runs at 884f61f beside a study and two builds, but CI saw 30/34 through 2
// replicas at 7bfee7d, a full run here 29/35 through 4 at 26da536, and CI 27/37 through 4 at
// ecc0f6f: one per replica was the typical spread, not the bound.
INSTANTIATE_TEST_SUITE_P(CostReplicas, BurstSpreadTest,
                         ::testing::Combine(::testing::Values("cost"), ::testing::Values(1, 2, 4)),
                         BurstName);

// The sum over the nodes of a pool (the prefill pool unless `decode`) of
// `series_name{role=...,node=...}` in router `router`'s metrics; -1 when a series is missing or
// the scrape failed.
double SumOverNodes(LocalCluster& cluster, int router, const std::string& series_name,
                    bool decode = false) {
  auto body = ScrapeMetrics(cluster.router_metrics_address(router));
  if (!body.ok()) return -1;
  double sum = 0;
  for (int i = 0; i < 2; ++i) {
    const std::string& address = decode ? cluster.decode_address(i) : cluster.prefill_address(i);
    const double v =
        MetricValue(*body, absl::StrCat(series_name, "{role=\"", decode ? "decode" : "prefill",
                                        "\",node=\"", address, "\"}"));
    if (v < 0) return -1;
    sum += v;
  }
  return sum;
}

// This router's requests in flight to every node, as its metrics say.
double InFlight(LocalCluster& cluster, int router) {
  const double prefill = SumOverNodes(cluster, router, "tandem_router_node_in_flight_requests");
  const double decode =
      SumOverNodes(cluster, router, "tandem_router_node_in_flight_requests", /*decode=*/true);
  return prefill < 0 || decode < 0 ? -1 : prefill + decode;
}

TEST(RouterReplicasTest, EachSeesTheOthersWorkThroughTheNodesReports) {
  LocalCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start(SimSpec("cost")));
  auto b = cluster.StartRouterReplica();
  ASSERT_TRUE(b.ok()) << b.status() << cluster.Logs();

  // A burst through router A alone (a request of router i % 1 is A's): 16 prompts of 4,000
  // tokens keep the prefill pool busy for about a second.
  std::atomic<bool> burst_done = false;
  std::thread burst([&] {
    std::vector<std::thread> threads;
    for (int i = 0; i < 16; ++i) {
      threads.emplace_back([&, i] {
        GenerateOutcome o =
            cluster.GenerateVia(0, GreedyTokenRequest(LongPrompt(100 + i, 4000), 8));
        EXPECT_TRUE(o.status.ok()) << o.status.error_message();
      });
    }
    for (auto& t : threads) t.join();
    burst_done = true;
  });
  // Router B placed nothing, yet its view of the prefill pool fills with A's queued prompts (the
  // nodes' reports), with nothing of its own in flight.
  double seen_by_b = 0;
  double b_in_flight = -1;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!burst_done && absl::Now() < give_up) {
    seen_by_b = std::max(seen_by_b, SumOverNodes(cluster, *b, "tandem_router_node_queued_tokens"));
    b_in_flight = InFlight(cluster, *b);
    if (seen_by_b >= 8000) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  burst.join();
  EXPECT_GE(seen_by_b, 8000) << "router B never saw router A's queued prompts" << cluster.Logs();
  EXPECT_EQ(b_in_flight, 0);

  // The nodes counted A's requests under A's id (all long prompts: through the prefill pool);
  // then a burst through B is counted under B's (on the decode nodes, whichever way it runs).
  int64_t a_total = 0;
  for (int i = 0; i < 2; ++i) {
    auto load = cluster.PrefillLoad(cluster.prefill_address(i));
    ASSERT_TRUE(load.ok());
    EXPECT_LE(load->receipts_size(), 1);
    a_total += Received(*load);
  }
  EXPECT_EQ(a_total, 16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      GenerateOutcome o = cluster.GenerateVia(*b, GreedyTokenRequest(LongPrompt(200 + i, 500), 8));
      EXPECT_TRUE(o.status.ok()) << o.status.error_message();
    });
  }
  for (auto& t : threads) t.join();
  int64_t total = 0;
  int routers_seen = 0;
  for (int i = 0; i < 2; ++i) {
    auto load = cluster.DecodeLoad(cluster.decode_address(i));
    ASSERT_TRUE(load.ok());
    routers_seen = std::max(routers_seen, load->receipts_size());
    total += Received(*load);
  }
  EXPECT_EQ(total, 20);
  EXPECT_EQ(routers_seen, 2);

  // Once the reports show everything, neither router counts anything in flight: its placements
  // were retired by the receipts (within a few health intervals).
  const absl::Time settle = absl::Now() + absl::Seconds(10);
  double a_in_flight = -1;
  while (absl::Now() < settle) {
    a_in_flight = InFlight(cluster, 0);
    b_in_flight = InFlight(cluster, *b);
    if (a_in_flight == 0 && b_in_flight == 0) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(a_in_flight, 0);
  EXPECT_EQ(b_in_flight, 0);
}

}  // namespace
}  // namespace tandem::testing
