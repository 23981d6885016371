// The cluster's process plan: names, command lines, environment and option validation.
#include "tools/cluster/cluster_plan.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

ClusterDirs Dirs() { return ClusterDirs{"/opt/bin", "/var/log/c", "/run/ready"}; }

ClusterOptions Basic() {
  ClusterOptions o;
  o.model_dir = "/models/llama";
  return o;
}

TEST(ClusterPlanTest, DefaultNodesGetTheContractFlagsOnly) {
  ClusterOptions o = Basic();
  std::vector<ProcessPlan> nodes = PlanNodes(o, Dirs());
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].name, "prefill-0");
  EXPECT_EQ(nodes[1].name, "prefill-1");
  EXPECT_EQ(nodes[2].name, "decode-0");
  EXPECT_EQ(nodes[3].name, "decode-1");
  EXPECT_EQ(nodes[0].role, ClusterRole::kPrefill);
  EXPECT_EQ(nodes[3].role, ClusterRole::kDecode);
  EXPECT_EQ(nodes[0].spec.binary, "/opt/bin/tandem-prefill");
  EXPECT_EQ(nodes[2].spec.binary, "/opt/bin/tandem-decode");
  EXPECT_EQ(nodes[2].spec.stdout_path, "/var/log/c/decode-0.log");
  EXPECT_EQ(nodes[2].ready_file, "/run/ready/decode-0.ready.json");
  EXPECT_TRUE(nodes[2].spec.die_with_parent);
  EXPECT_THAT(nodes[2].spec.args,
              ElementsAre("--model", "/models/llama", "--listen", "127.0.0.1:0", "--ready-file",
                          "/run/ready/decode-0.ready.json", "--metrics-listen", "127.0.0.1:0",
                          "--node-id", "decode-0"));
  // UCX_TLS is inherited unless asked for.
  EXPECT_THAT(nodes[0].spec.env, IsEmpty());
}

TEST(ClusterPlanTest, TheSecretAndTlsReachEveryProcess) {
  ClusterOptions o = Basic();
  o.num_prefill = 1;
  o.num_decode = 1;
  ClusterDirs dirs = Dirs();
  dirs.secret_file = "/run/ready/cluster-secret";
  dirs.tls = {.ca_cert = "/t/ca.pem",
              .router_cert = "/t/router.pem",
              .router_key = "/t/router.key",
              .node_cert = "/t/node.pem",
              .node_key = "/t/node.key"};
  std::vector<ProcessPlan> nodes = PlanNodes(o, dirs);
  ASSERT_EQ(nodes.size(), 2u);
  const std::vector<std::string> serve = {"--cluster-secret-file",
                                          "/run/ready/cluster-secret",
                                          "--tls-cert",
                                          "/t/node.pem",
                                          "--tls-key",
                                          "/t/node.key",
                                          "--tls-client-ca",
                                          "/t/ca.pem"};
  const std::vector<std::string> dial = {"--node-tls-ca", "/t/ca.pem",      "--node-tls-cert",
                                         "/t/node.pem",   "--node-tls-key", "/t/node.key"};
  auto ends_with = [](const std::vector<std::string>& args, std::vector<std::string> tail) {
    return args.size() >= tail.size() &&
           std::equal(tail.begin(), tail.end(), args.end() - tail.size());
  };
  std::vector<std::string> prefill_tail = serve;
  prefill_tail.insert(prefill_tail.end(), dial.begin(), dial.end());
  EXPECT_TRUE(ends_with(nodes[0].spec.args, prefill_tail));  // prefill also dials ConnectKv
  EXPECT_TRUE(ends_with(nodes[1].spec.args, serve));
  ProcessPlan router = PlanRouter(o, dirs, {"127.0.0.1:1"}, {"127.0.0.1:2"});
  std::vector<std::string> router_tail = {"--tls-cert", "/t/router.pem", "--tls-key",
                                          "/t/router.key"};
  router_tail.insert(router_tail.end(), dial.begin(), dial.end());
  EXPECT_TRUE(ends_with(router.spec.args, router_tail));
}

TEST(ClusterPlanTest, NodeSettingsAndPassThroughArguments) {
  ClusterOptions o = Basic();
  o.num_prefill = 1;
  o.num_decode = 1;
  o.threads_per_node = 2;
  o.kv_cache_mb = 64;
  o.block_size = 16;
  o.kv_cache_dtype = "fp8_e4m3";
  o.max_num_batched_tokens = 256;
  o.max_num_seqs = 8;
  o.lease_ms = 5000;
  o.ucx_tls = "tcp";
  o.prefill_args = {"--extra-prefill"};
  o.decode_args = {"--extra-decode", "1"};
  std::vector<ProcessPlan> nodes = PlanNodes(o, Dirs());
  ASSERT_EQ(nodes.size(), 2u);
  std::vector<std::string> common = {"--threads",
                                     "2",
                                     "--kv-cache-mb",
                                     "64",
                                     "--block-size",
                                     "16",
                                     "--kv-cache-dtype",
                                     "fp8_e4m3",
                                     "--max-num-batched-tokens",
                                     "256",
                                     "--max-num-seqs",
                                     "8"};
  std::vector<std::string> prefill(nodes[0].spec.args.begin() + 10, nodes[0].spec.args.end());
  std::vector<std::string> expected_prefill = common;
  expected_prefill.push_back("--extra-prefill");
  EXPECT_THAT(prefill, ElementsAreArray(expected_prefill));  // no --lease-ms on prefill
  std::vector<std::string> decode(nodes[1].spec.args.begin() + 10, nodes[1].spec.args.end());
  std::vector<std::string> expected_decode = common;
  for (const char* a : {"--lease-ms", "5000", "--extra-decode", "1"}) expected_decode.push_back(a);
  EXPECT_THAT(decode, ElementsAreArray(expected_decode));
  EXPECT_THAT(nodes[0].spec.env, ElementsAre(Pair("UCX_TLS", "tcp")));
  EXPECT_THAT(nodes[1].spec.env, ElementsAre(Pair("UCX_TLS", "tcp")));
}

TEST(ClusterPlanTest, RouterPointsAtTheNodes) {
  ClusterOptions o = Basic();
  o.policy = "least_loaded";
  o.local_prefill_threshold = 32;
  o.max_retries = 2;
  o.lease_ms = 3000;
  o.router_listen = "127.0.0.1:50051";
  o.router_args = {"--verbose"};
  ProcessPlan router =
      PlanRouter(o, Dirs(), {"127.0.0.1:1", "127.0.0.1:2"}, {"127.0.0.1:3", "127.0.0.1:4"});
  EXPECT_EQ(router.name, "router");
  EXPECT_EQ(router.role, ClusterRole::kRouter);
  EXPECT_EQ(router.spec.binary, "/opt/bin/tandem-router");
  EXPECT_EQ(router.spec.stdout_path, "/var/log/c/router.log");
  EXPECT_THAT(router.spec.args,
              ElementsAre("--model", "/models/llama", "--listen", "127.0.0.1:50051", "--ready-file",
                          "/run/ready/router.ready.json", "--http-listen", "127.0.0.1:0",
                          "--metrics-listen", "127.0.0.1:0", "--prefill", "127.0.0.1:1,127.0.0.1:2",
                          "--decode", "127.0.0.1:3,127.0.0.1:4", "--mode", "disaggregated",
                          "--policy", "least_loaded", "--local-prefill-threshold", "32",
                          "--max-retries", "2", "--lease-ms", "3000", "--verbose"));
}

TEST(ClusterPlanTest, ColocatedDefaultsToNoPrefillNodes) {
  ClusterOptions o = Basic();
  o.mode = "colocated";
  o.num_decode = 1;
  EXPECT_EQ(ValidateClusterOptions(o), "");
  EXPECT_EQ(NumPrefillNodes(o), 0);
  std::vector<ProcessPlan> nodes = PlanNodes(o, Dirs());
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].name, "decode-0");
  ProcessPlan router = PlanRouter(o, Dirs(), {}, {"127.0.0.1:3"});
  EXPECT_THAT(router.spec.args, ::testing::Not(::testing::Contains("--prefill")));
  EXPECT_THAT(router.spec.args, ::testing::Contains("colocated"));
  // Colocated with explicit prefill nodes is allowed too.
  o.num_prefill = 1;
  EXPECT_EQ(ValidateClusterOptions(o), "");
  EXPECT_EQ(PlanNodes(o, Dirs()).size(), 2u);
}

TEST(ClusterPlanTest, AutoModeRunsDecodeNodesThatPrefillForEachOther) {
  ClusterOptions o = Basic();
  o.mode = "auto";
  o.num_decode = 3;
  EXPECT_EQ(ValidateClusterOptions(o), "");
  EXPECT_EQ(NumPrefillNodes(o), 0);
  ClusterDirs dirs = Dirs();
  dirs.tls = {.ca_cert = "/t/ca.pem", .node_cert = "/t/node.pem", .node_key = "/t/node.key"};
  std::vector<ProcessPlan> nodes = PlanNodes(o, dirs);
  ASSERT_EQ(nodes.size(), 3u);
  for (const ProcessPlan& node : nodes) {
    EXPECT_EQ(node.role, ClusterRole::kDecode);
    EXPECT_EQ(node.spec.binary, "/opt/bin/tandem-decode");
    EXPECT_THAT(node.spec.args, ::testing::Contains("--serve-prefill"));
    // Each dials the others' ConnectKv as a prefill node does.
    EXPECT_THAT(node.spec.args, ::testing::Contains("--node-tls-ca"));
  }
  ProcessPlan router = PlanRouter(o, dirs, {}, {"127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"});
  EXPECT_THAT(router.spec.args, ::testing::Not(::testing::Contains("--prefill")));
  const auto mode = std::find(router.spec.args.begin(), router.spec.args.end(), "--mode");
  ASSERT_NE(mode, router.spec.args.end());
  EXPECT_EQ(*(mode + 1), "auto");
  // Other modes' decode nodes do not prefill for others.
  o.mode = "colocated";
  EXPECT_THAT(PlanNodes(o, Dirs())[0].spec.args,
              ::testing::Not(::testing::Contains("--serve-prefill")));
  // Auto mode runs no prefill nodes.
  o.mode = "auto";
  o.num_prefill = 1;
  EXPECT_THAT(ValidateClusterOptions(o), HasSubstr("--mode auto runs no prefill nodes"));
}

TEST(ClusterPlanTest, RoleNames) {
  EXPECT_STREQ(RoleName(ClusterRole::kPrefill), "prefill");
  EXPECT_STREQ(RoleName(ClusterRole::kDecode), "decode");
  EXPECT_STREQ(RoleName(ClusterRole::kRouter), "router");
  EXPECT_STREQ(RoleBinary(ClusterRole::kRouter), "tandem-router");
}

TEST(ValidateClusterOptionsTest, AcceptsDefaults) {
  EXPECT_EQ(ValidateClusterOptions(Basic()), "");
}

TEST(ValidateClusterOptionsTest, NamesTheBadFlag) {
  struct Case {
    std::function<void(ClusterOptions&)> change;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](ClusterOptions& o) { o.model_dir.clear(); }, "--model DIR is required"},
      {[](ClusterOptions& o) { o.mode = "split"; }, "--mode expects"},
      {[](ClusterOptions& o) { o.policy = "random"; }, "--policy expects"},
      {[](ClusterOptions& o) { o.num_decode = 0; }, "--decode must be between 1"},
      {[](ClusterOptions& o) { o.num_prefill = -1; }, "--prefill must be between 0"},
      {[](ClusterOptions& o) { o.num_prefill = 0; }, "needs at least one prefill node"},
      {[](ClusterOptions& o) { o.num_decode = 1000; }, "--decode must be between"},
      {[](ClusterOptions& o) { o.router_listen = "localhost"; }, "--listen expects HOST:PORT"},
      {[](ClusterOptions& o) { o.ucx_tls = ""; }, "--ucx-tls needs"},
      {[](ClusterOptions& o) { o.threads_per_node = 0; }, "--threads-per-node must be >= 1"},
      {[](ClusterOptions& o) { o.kv_cache_mb = -5; }, "--kv-cache-mb must be >= 1"},
      {[](ClusterOptions& o) { o.lease_ms = 0; }, "--lease-ms must be >= 1"},
      {[](ClusterOptions& o) { o.local_prefill_threshold = -1; }, "--local-prefill-threshold"},
      {[](ClusterOptions& o) { o.max_retries = -1; }, "--max-retries must be >= 0"},
      {[](ClusterOptions& o) { o.max_tokens = 0; }, "--max-tokens must be >= 1"},
      {[](ClusterOptions& o) { o.temperature = -1; }, "--temperature must be >= 0"},
      {[](ClusterOptions& o) { o.startup_timeout_s = 0; }, "--startup-timeout-s"},
      {[](ClusterOptions& o) { o.stop_grace_ms = -1; }, "--stop-grace-ms"},
  };
  for (const Case& c : cases) {
    ClusterOptions o = Basic();
    c.change(o);
    EXPECT_THAT(ValidateClusterOptions(o), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace tandem
