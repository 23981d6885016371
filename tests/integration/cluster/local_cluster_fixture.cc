#include "tests/integration/cluster/local_cluster_fixture.h"

#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/backend/sim/sim_backend.h"
#include "tests/integration/cluster_secret.h"

namespace tandem::testing {

std::vector<int> SimTokens(const std::vector<int>& prompt, int n) {
  std::vector<int> out;
  int last = prompt.back();
  for (int i = 0; i < n; ++i) {
    last = SimBackend::NextToken(last, static_cast<int64_t>(prompt.size()) + i, 128000);
    out.push_back(last);
  }
  return out;
}
namespace {

std::vector<std::string> NodeArgs(const ClusterSpec& spec, const std::string& listen) {
  std::vector<std::string> args = {"--model",
                                   spec.model_dir,
                                   "--listen",
                                   listen,
                                   "--threads",
                                   "1",
                                   "--metrics-listen",
                                   "127.0.0.1:0",
                                   "--cluster-secret-file",
                                   TestClusterSecretFile()};
  args.insert(args.end(), spec.node_args.begin(), spec.node_args.end());
  return args;
}

// A top-level field of `process`'s ready file other than grpc and pid.
std::string ReadyField(const LaunchedProcess* process, const std::string& key) {
  if (process == nullptr) return "";
  for (const auto& [k, value] : process->ready().extra) {
    if (k == key) return value;
  }
  return "";
}

}  // namespace

// A router is ready once one decode node is up; a test's first burst must find every node up (on
// a loaded machine another node's first probe can come later, and a burst sent before it goes
// all to the nodes probed first).
bool RouterSeesNodesUp(const std::string& metrics_address, int decode, int prefill,
                       absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<std::string> body = ScrapeMetrics(metrics_address);
    if (body.ok() &&
        MetricValue(*body, R"(tandem_router_nodes{role="decode",state="up"})") >= decode &&
        MetricValue(*body, R"(tandem_router_nodes{role="prefill",state="up"})") >= prefill) {
      return true;
    }
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
}

absl::StatusOr<std::string> ScrapeMetrics(const std::string& address) {
  if (address.empty()) return absl::FailedPreconditionError("no metrics address");
  CommandResult r = RunCommand(
      "/usr/bin/curl",
      {"-sS", "--fail", "--max-time", "10", absl::StrCat("http://", address, "/metrics")}, {},
      absl::Seconds(20));
  if (r.exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("curl http://", address, "/metrics exited ",
                                               r.exit_code, ": ", r.stderr_text));
  }
  return r.stdout_text;
}

double MetricValue(const std::string& body, const std::string& series) {
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

v1::GenerateRequest GreedyTokenRequest(const std::vector<int>& prompt, int max_tokens) {
  v1::GenerateRequest request;
  request.mutable_token_ids()->mutable_ids()->Assign(prompt.begin(), prompt.end());
  request.mutable_sampling()->set_temperature(0.0f);
  request.mutable_sampling()->set_max_tokens(max_tokens);
  request.mutable_sampling()->set_ignore_eos(true);
  return request;
}

absl::StatusOr<std::string> LocalCluster::StartNode(
    const std::string& binary, const std::vector<std::string>& extra_args,
    const std::string& listen, std::vector<std::unique_ptr<LaunchedProcess>>* processes,
    std::vector<std::string>* addresses, int i) {
  std::vector<std::string> args = NodeArgs(spec_, listen);
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.push_back("--served-model-name");
  args.push_back("test-model");
  LaunchedProcess::Options options;
  options.env = {{"UCX_TLS", spec_.ucx_tls}};
  if (binary == "tandem-prefill") {
    options.env.insert(options.env.end(), spec_.prefill_env.begin(), spec_.prefill_env.end());
  }
  auto process = LaunchedProcess::Start(BinaryPath(binary), args, options);
  if (!process.ok()) return process.status();
  if (static_cast<int>(processes->size()) <= i) processes->resize(i + 1);
  (*processes)[i] = std::move(*process);
  auto address = (*processes)[i]->WaitReady(absl::Seconds(60));
  if (address.ok()) {
    if (static_cast<int>(addresses->size()) <= i) addresses->resize(i + 1);
    (*addresses)[i] = *address;
  }
  return address;
}

absl::StatusOr<std::string> LocalCluster::StartDecode(int i, const std::string& listen) {
  std::vector<std::string> args = spec_.decode_args;
  if (i < static_cast<int>(spec_.decode_args_each.size())) {
    args.insert(args.end(), spec_.decode_args_each[i].begin(), spec_.decode_args_each[i].end());
  }
  return StartNode("tandem-decode", args, listen, &decode_, &decode_addresses_, i);
}

absl::StatusOr<std::string> LocalCluster::StartPrefill(int i, const std::string& listen) {
  return StartNode("tandem-prefill", {}, listen, &prefill_, &prefill_addresses_, i);
}

void LocalCluster::Start(const ClusterSpec& spec) {
  spec_ = spec;
  const std::string missing = MissingBinaries({"tandem-router", "tandem-prefill", "tandem-decode"});
  ASSERT_EQ(missing, "");
  for (int i = 0; i < spec.num_decode; ++i) {
    auto address = StartDecode(i);
    ASSERT_TRUE(address.ok()) << "decode " << i << ": " << address.status();
  }
  for (int i = 0; i < spec.num_prefill; ++i) {
    auto address = StartPrefill(i);
    ASSERT_TRUE(address.ok()) << "prefill " << i << ": " << address.status();
  }
  auto router = LaunchRouter({});
  ASSERT_TRUE(router.ok()) << router.status();
  router_ = std::move(*router);
  router_address_ = router_->grpc_address();
  router_channel_ = grpc::CreateChannel(router_address_, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(RouterSeesNodesUp(router_metrics_address(), spec.num_decode, spec.num_prefill,
                                absl::Seconds(30)))
      << "the router does not see every node up\n"
      << Logs();
}

absl::StatusOr<std::unique_ptr<LaunchedProcess>> LocalCluster::LaunchRouter(
    const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {
      "--model",          spec_.model_dir,        "--listen",
      "127.0.0.1:0",      "--http-listen",        "127.0.0.1:0",
      "--metrics-listen", "127.0.0.1:0",          "--served-model-name",
      "test-model",       "--health-interval-ms", "200"};
  if (!decode_addresses_.empty()) {
    args.push_back("--decode");
    args.push_back(absl::StrJoin(decode_addresses_, ","));
  }
  if (!prefill_addresses_.empty()) {
    args.push_back("--prefill");
    args.push_back(absl::StrJoin(prefill_addresses_, ","));
  }
  args.insert(args.end(), spec_.router_args.begin(), spec_.router_args.end());
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  auto router = LaunchedProcess::Start(BinaryPath("tandem-router"), args);
  if (!router.ok()) return router.status();
  auto address = (*router)->WaitReady(absl::Seconds(60));
  if (!address.ok()) return address.status();
  return router;
}

absl::StatusOr<int> LocalCluster::StartRouterReplica(const std::vector<std::string>& extra_args) {
  auto router = LaunchRouter(extra_args);
  if (!router.ok()) return router.status();
  // The nodes that were up for the first router (one a test stopped since stays down: a bounded
  // wait, not a failure).
  RouterSeesNodesUp(ReadyField(router->get(), "metrics"), spec_.num_decode, spec_.num_prefill,
                    absl::Seconds(10));
  Replica replica;
  replica.address = (*router)->grpc_address();
  replica.channel = grpc::CreateChannel(replica.address, grpc::InsecureChannelCredentials());
  replica.process = *std::move(router);
  replicas_.push_back(std::move(replica));
  return num_routers() - 1;
}

std::string LocalCluster::router_address(int i) const {
  return i == 0 ? router_address_ : replicas_[i - 1].address;
}

std::string LocalCluster::router_metrics_address(int i) const {
  return i == 0 ? router_metrics_address() : ReadyField(replicas_[i - 1].process.get(), "metrics");
}

LocalCluster::~LocalCluster() {
  if (router_ != nullptr) router_->Signal(SIGTERM);
  for (Replica& r : replicas_) r.process->Signal(SIGTERM);
  for (auto& p : prefill_) {
    if (p != nullptr) p->Signal(SIGTERM);
  }
  for (auto& d : decode_) {
    if (d != nullptr) d->Signal(SIGTERM);
  }
  // The LaunchedProcess destructors SIGKILL whatever did not exit.
  if (router_ != nullptr) router_->WaitExit(absl::Seconds(5));
  for (Replica& r : replicas_) r.process->WaitExit(absl::Seconds(5));
  for (auto& p : prefill_) {
    if (p != nullptr) p->WaitExit(absl::Seconds(5));
  }
  for (auto& d : decode_) {
    if (d != nullptr) d->WaitExit(absl::Seconds(5));
  }
}

std::string LocalCluster::decode_metrics_address(int i) const {
  return i < static_cast<int>(decode_.size()) ? ReadyField(decode_[i].get(), "metrics") : "";
}

std::string LocalCluster::prefill_metrics_address(int i) const {
  return i < static_cast<int>(prefill_.size()) ? ReadyField(prefill_[i].get(), "metrics") : "";
}

std::string LocalCluster::router_metrics_address() const {
  return ReadyField(router_.get(), "metrics");
}

std::string LocalCluster::router_http_address() const { return ReadyField(router_.get(), "http"); }

std::string LocalCluster::Logs() {
  std::string out;
  auto add = [&out](const std::string& name, LaunchedProcess* p) {
    if (p == nullptr) return;
    absl::StrAppend(&out, "---- ", name, " (", p->DescribeExit(), ")\n", p->LogTail(30), "\n");
  };
  add("router", router_.get());
  for (size_t i = 0; i < replicas_.size(); ++i) {
    add(absl::StrCat("router ", i + 1), replicas_[i].process.get());
  }
  for (size_t i = 0; i < prefill_.size(); ++i) add(absl::StrCat("prefill ", i), prefill_[i].get());
  for (size_t i = 0; i < decode_.size(); ++i) add(absl::StrCat("decode ", i), decode_[i].get());
  return out;
}

GenerateOutcome LocalCluster::Generate(const v1::GenerateRequest& request,
                                       absl::Duration deadline) {
  return GenerateVia(0, request, deadline);
}

GenerateOutcome LocalCluster::GenerateVia(int router, const v1::GenerateRequest& request,
                                          absl::Duration deadline) {
  auto stub =
      v1::Generation::NewStub(router == 0 ? router_channel_ : replicas_[router - 1].channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub->Generate(&context, request);
  GenerateOutcome outcome;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    ++outcome.num_messages;
    for (const v1::Token& token : response.tokens()) outcome.tokens.push_back(token.id());
    outcome.text += response.text();
    if (!response.finish_reason().empty()) outcome.finish_reason = response.finish_reason();
  }
  outcome.status = reader->Finish();
  return outcome;
}

absl::StatusOr<v1::NodeLoad> LocalCluster::DecodeLoad(const std::string& address) {
  auto stub =
      v1::DecodeNode::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::NodeLoad load;
  grpc::Status status = stub->GetLoad(&context, v1::LoadRequest(), &load);
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  return load;
}

absl::StatusOr<v1::NodeLoad> LocalCluster::PrefillLoad(const std::string& address) {
  auto stub =
      v1::PrefillNode::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::NodeLoad load;
  grpc::Status status = stub->GetLoad(&context, v1::LoadRequest(), &load);
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  return load;
}

bool LocalCluster::WaitForLoad(const std::string& address, bool decode,
                               const std::function<bool(const v1::NodeLoad&)>& pred,
                               absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    auto load = decode ? DecodeLoad(address) : PrefillLoad(address);
    if (load.ok() && pred(*load)) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

}  // namespace tandem::testing
