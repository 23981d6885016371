// Issue 14's red-team attacks, replayed against a real cluster (router, prefill node, decode node
// on loopback) built from this tree: each used to crash a process, leak across clients or hang,
// and each must now be refused cleanly while the cluster keeps serving.
#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kKvPortLow = 50100;
constexpr int kKvPortHigh = 50199;

// The TCP ports process `pid` listens on (ss -ltnp).
std::vector<int> ListeningPorts(pid_t pid) {
  CommandResult ss = RunCommand("/usr/bin/ss", {"-ltnpH"}, {}, absl::Seconds(10));
  std::vector<int> ports;
  std::istringstream in(ss.stdout_text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(absl::StrCat("pid=", pid, ",")) == std::string::npos) continue;
    std::istringstream fields(line);
    std::string state, recv_q, send_q, local;
    fields >> state >> recv_q >> send_q >> local;
    int port = 0;
    if (absl::SimpleAtoi(local.substr(local.rfind(':') + 1), &port)) ports.push_back(port);
  }
  return ports;
}

int PortOf(const std::string& address) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) << address;
  return port;
}

class RedTeamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(MissingBinaries({"tandem-router", "tandem-prefill", "tandem-decode"}), "");
    ClusterSpec spec;
    spec.model_dir = TestModelDir("llama");
    spec.node_args = {"--max-num-batched-tokens",
                      "16",
                      "--max-num-seqs",
                      "8",
                      "--kv-cache-mb",
                      "8",
                      "--kv-port-range",
                      absl::StrCat(kKvPortLow, "-", kKvPortHigh)};
    // A full KV pool answers within this, instead of hanging.
    spec.router_args = {"--kv-wait-timeout-ms", "1500"};
    ASSERT_NO_FATAL_FAILURE(cluster_.Start(spec));
    decode_ = v1::DecodeNode::NewStub(
        grpc::CreateChannel(cluster_.decode_address(0), grpc::InsecureChannelCredentials()));
    prefill_ = v1::PrefillNode::NewStub(
        grpc::CreateChannel(cluster_.prefill_address(0), grpc::InsecureChannelCredentials()));
  }

  // The cluster still answers a plain request, disaggregated.
  void ExpectServing() {
    GenerateOutcome out = cluster_.Generate(GreedyTokenRequest({1, 2, 3, 4, 5}, 4));
    EXPECT_TRUE(out.status.ok()) << out.status.error_message() << "\n" << cluster_.Logs();
    EXPECT_EQ(out.tokens.size(), 4u);
  }

  CommandResult Post(const std::string& path, const std::string& body) {
    return RunCommand("/usr/bin/curl",
                      {"-sS", "--max-time", "30", "-o", "-", "-w", "\n%{http_code}", "-H",
                       "Content-Type: application/json", "--data-binary", body,
                       "http://" + cluster_.router_http_address() + path},
                      {}, absl::Seconds(40));
  }

  LocalCluster cluster_;
  std::unique_ptr<v1::DecodeNode::Stub> decode_;
  std::unique_ptr<v1::PrefillNode::Stub> prefill_;
};

// Row 1: a number beyond a double aborted the router.
TEST_F(RedTeamTest, AHugeNumberIsA400AndTheRouterLives) {
  CommandResult r = Post("/v1/completions", R"({"prompt":"hi","max_tokens":1e400})");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_THAT(r.stdout_text, HasSubstr("\n400"));
  EXPECT_THAT(r.stdout_text, HasSubstr("max_tokens"));
  EXPECT_THAT(r.stdout_text, Not(HasSubstr("json.exception")));
  EXPECT_TRUE(cluster_.router().Running());
  ExpectServing();
}

// Row 2: a forged handoff made the prefill node write where its sender chose.
TEST_F(RedTeamTest, AForgedHandoffIsRefusedAndTheDecodeNodeLives) {
  v1::ReserveRequest reserve;
  for (int i = 0; i < 20; ++i) reserve.add_prompt_token_ids(100 + i);
  reserve.mutable_sampling()->set_max_tokens(2);
  reserve.set_request_id("red-team-reserve");
  grpc::ClientContext reserve_context;
  reserve_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  auto reader = decode_->Reserve(&reserve_context, reserve);
  v1::DecodeEvent first;
  ASSERT_TRUE(reader->Read(&first));
  ASSERT_TRUE(first.has_handoff());
  EXPECT_FALSE(first.handoff().mac().empty());  // the decode node signs what it hands out

  v1::KvHandoff forged = first.handoff();
  forged.mutable_layout()->set_num_blocks(2147483647);
  forged.set_block_ids(0, 2147483646);
  v1::PrefillRequest prefill;
  *prefill.mutable_prompt_token_ids() = reserve.prompt_token_ids();
  *prefill.mutable_sampling() = reserve.sampling();
  *prefill.mutable_handoff() = forged;
  prefill.set_request_id("red-team-prefill");
  grpc::ClientContext prefill_context;
  prefill_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::PrefillResponse response;
  grpc::Status status = prefill_->Prefill(&prefill_context, prefill, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();

  // The same without a MAC at all.
  forged.clear_mac();
  *prefill.mutable_handoff() = forged;
  prefill.set_request_id("red-team-prefill-2");
  grpc::ClientContext unsigned_context;
  status = prefill_->Prefill(&unsigned_context, prefill, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();

  reserve_context.TryCancel();
  reader->Finish();
  EXPECT_TRUE(cluster_.decode(0).Running()) << cluster_.Logs();
  EXPECT_TRUE(cluster_.prefill(0).Running()) << cluster_.Logs();
  absl::StatusOr<std::string> metrics = ScrapeMetrics(cluster_.prefill_metrics_address(0));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("tandem_prefill_handoffs_refused_total{reason=\"bad_mac\"} 2"));
  ExpectServing();
}

// Row 3: each node had a second, unadvertised gRPC port (gRPC's SO_REUSEPORT with port 0).
// Every port a node listens on is its gRPC port, its metrics port or a UCX port in its range.
TEST_F(RedTeamTest, NodesListenOnlyOnTheirAdvertisedPorts) {
  struct Listener {
    LaunchedProcess* process;
    std::string grpc;
    std::string metrics;
  };
  for (const Listener& l : {Listener{&cluster_.decode(0), cluster_.decode_address(0),
                                     cluster_.decode_metrics_address(0)},
                            Listener{&cluster_.prefill(0), cluster_.prefill_address(0),
                                     cluster_.prefill_metrics_address(0)}}) {
    const std::vector<int> ports = ListeningPorts(l.process->pid());
    EXPECT_FALSE(ports.empty());
    int grpc_sockets = 0;
    for (int port : ports) {
      if (port == PortOf(l.grpc)) {
        ++grpc_sockets;
        continue;
      }
      const bool metrics = port == PortOf(l.metrics);
      const bool ucx = port >= kKvPortLow && port <= kKvPortHigh;
      EXPECT_TRUE(metrics || ucx) << "pid " << l.process->pid() << " listens on " << port
                                  << ", which it does not advertise";
    }
    EXPECT_EQ(grpc_sockets, 1);
  }
}

// Row 4: one client held the whole KV pool for five minutes.
TEST_F(RedTeamTest, LongLeasesAreRefused) {
  v1::ReserveRequest reserve;
  reserve.add_prompt_token_ids(1);
  reserve.set_lease_ms(300000);
  reserve.set_request_id("red-team-lease");
  grpc::ClientContext context;
  auto reader = decode_->Reserve(&context, reserve);
  v1::DecodeEvent event;
  EXPECT_FALSE(reader->Read(&event));
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
}

// Row 4, through the router: with the decode pool held by reservations, requests hung past 45 s
// while /ready said ready. Now /ready says why not, and a request gets UNAVAILABLE once it has
// waited --kv-wait-timeout-ms for room.
TEST_F(RedTeamTest, AFullKvPoolIsAnAnswerNotAHang) {
  absl::StatusOr<v1::NodeLoad> load = cluster_.DecodeLoad(cluster_.decode_address(0));
  ASSERT_TRUE(load.ok()) << load.status();
  const int block_size = load->block_size();
  const int max_prompt = 512;  // within the test model's context
  // Hold every block but one with reservations under the longest lease allowed.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::DecodeEvent>>> holds;
  int left = load->num_free_kv_blocks() - 1;
  for (int i = 0; left > 0; ++i) {
    const int blocks = std::min(left, max_prompt / block_size);
    v1::ReserveRequest reserve;
    for (int t = 0; t < blocks * block_size; ++t) reserve.add_prompt_token_ids(100 + (t + i) % 500);
    reserve.set_request_id(absl::StrCat("hog-", i));
    reserve.set_lease_ms(60000);
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    holds.push_back(decode_->Reserve(contexts.back().get(), reserve));
    v1::DecodeEvent event;
    ASSERT_TRUE(holds.back()->Read(&event)) << "reservation " << i;
    left -= blocks;
  }
  ASSERT_TRUE(cluster_.WaitForLoad(
      cluster_.decode_address(0), /*decode=*/true,
      [](const v1::NodeLoad& l) { return l.num_free_kv_blocks() <= 1; }, absl::Seconds(10)));
  // /ready names the exhausted pool (once the router's next load report is in).
  bool unready = false;
  for (int i = 0; i < 50 && !unready; ++i) {
    CommandResult r =
        RunCommand("/usr/bin/curl", {"-sS", "http://" + cluster_.router_http_address() + "/ready"});
    unready = r.stdout_text.find("exhausted") != std::string::npos;
    if (!unready) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(unready);

  const absl::Time start = absl::Now();
  GenerateOutcome out = cluster_.Generate(GreedyTokenRequest(std::vector<int>(100, 7), 4));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::UNAVAILABLE) << out.status.error_message();
  EXPECT_THAT(out.status.error_message(), HasSubstr("free KV cache"));
  EXPECT_LT(took, absl::Seconds(15)) << "the request waited " << took;

  for (auto& c : contexts) c->TryCancel();
  for (auto& h : holds) h->Finish();
}

// Row 6: two clients with one request id; cancelling one stopped the other.
TEST_F(RedTeamTest, TwoClientsWithOneRequestIdDoNotTouchEachOther) {
  v1::GenerateRequest long_request = GreedyTokenRequest({7, 8, 9}, 40);
  long_request.set_request_id("same-id");
  GenerateOutcome survivor;
  std::thread survivor_thread([&] { survivor = cluster_.Generate(long_request); });
  // The second client, same id, cancels right after it starts.
  auto stub = v1::Generation::NewStub(
      grpc::CreateChannel(cluster_.router_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::GenerateRequest second = GreedyTokenRequest({7, 8, 9}, 40);
  second.set_request_id("same-id");
  auto reader = stub->Generate(&context, second);
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.request_id(), "same-id");  // echoed to its client
  context.TryCancel();
  reader->Finish();
  survivor_thread.join();
  EXPECT_TRUE(survivor.status.ok()) << survivor.status.error_message();
  EXPECT_EQ(survivor.tokens.size(), 40u);
  EXPECT_EQ(survivor.finish_reason, "length");

  // A node itself refuses a second live request under one id.
  v1::ReserveRequest reserve;
  for (int i = 0; i < 4; ++i) reserve.add_prompt_token_ids(50 + i);
  reserve.set_request_id("node-dup");
  grpc::ClientContext c1;
  auto first = decode_->Reserve(&c1, reserve);
  v1::DecodeEvent event;
  ASSERT_TRUE(first->Read(&event));
  grpc::ClientContext c2;
  auto dup = decode_->Reserve(&c2, reserve);
  EXPECT_FALSE(dup->Read(&event));
  EXPECT_EQ(dup->Finish().error_code(), grpc::StatusCode::ALREADY_EXISTS);
  c1.TryCancel();
  first->Finish();
}

// Row 7: error messages carried node addresses and UCX peer names.
// The decode node dies after tokens reached the client: the stream fails with the stage and the
// code, and the router's request id to find the log entry.
TEST_F(RedTeamTest, ErrorsNameTheRequestIdNotTheNodes) {
  auto stub = v1::Generation::NewStub(
      grpc::CreateChannel(cluster_.router_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto reader = stub->Generate(&context, GreedyTokenRequest({1, 2, 3}, 1500));
  v1::GenerateResponse response;
  ASSERT_TRUE(reader->Read(&response));
  cluster_.decode(0).Kill();
  while (reader->Read(&response)) {
  }
  const grpc::Status status = reader->Finish();
  ASSERT_FALSE(status.ok()) << "the stream finished before the decode node was killed";
  EXPECT_THAT(status.error_message(), HasSubstr("(request id req-"));
  EXPECT_THAT(status.error_message(), Not(HasSubstr("127.0.0.1")));
  EXPECT_THAT(status.error_message(), Not(HasSubstr("ucx")));
  EXPECT_THAT(status.error_message(), Not(HasSubstr("decode node ")));
}

}  // namespace
}  // namespace tandem::testing
