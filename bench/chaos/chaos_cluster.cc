#include "bench/chaos/chaos_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem::chaos {
namespace {

constexpr int kNodeGrpcPort = 50051;
constexpr int kNodeMetricsPort = 9400;
constexpr int kLogTailLines = 30;

// Sets the value that follows `flag` in `args` (appends the pair when the flag is absent).
void SetFlag(std::vector<std::string>* args, const std::string& flag, const std::string& value) {
  auto it = std::find(args->begin(), args->end(), flag);
  if (it != args->end() && it + 1 != args->end()) {
    *(it + 1) = value;
  } else {
    args->insert(args->end(), {flag, value});
  }
}

std::string ExtraField(const ReadyInfo& ready, const std::string& key) {
  for (const auto& [k, value] : ready.extra) {
    if (k == key) return value;
  }
  return "";
}

absl::Status Failed(const std::string& name, const absl::Status& status, const std::string& log) {
  return absl::Status(status.code(),
                      absl::StrCat(name, ": ", status.message(), "\n  log ", log,
                                   "\n  --- last lines ---\n", ReadFileTail(log, kLogTailLines)));
}

}  // namespace

ChaosCluster::ChaosCluster(ClusterOptions options, ClusterDirs dirs, bool isolate)
    : options_(std::move(options)), dirs_(std::move(dirs)), isolate_(isolate) {}

ChaosCluster::~ChaosCluster() {
  router_.reset();  // ChildProcess's destructor SIGKILLs and reaps
  for (Node& node : nodes_) {
    if (node.process != nullptr) node.process->Signal(SIGCONT);
    node.process.reset();
    node.net.reset();
  }
}

absl::Status ChaosCluster::StartNode(int i, absl::Time deadline) {
  Node& node = nodes_[i];
  ChildSpec spec = node.plan.spec;
  ++node.starts;
  spec.stdout_path = absl::StrCat(dirs_.log_dir, "/", node.plan.name, ".", node.starts, ".log");
  logs_.push_back(spec.stdout_path);
  if (node.net != nullptr) {  // ip netns exec NS binary args...
    std::vector<std::string> argv = node.net->ExecPrefix();
    argv.push_back(spec.binary);
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
    spec.binary = argv.front();
    spec.args.assign(argv.begin() + 1, argv.end());
  }
  std::error_code ec;
  std::filesystem::remove(node.plan.ready_file, ec);  // a stale file would read as ready
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(spec);
  if (!child.ok()) return Failed(node.plan.name, child.status(), spec.stdout_path);
  node.process = *std::move(child);
  PublishPids();
  absl::StatusOr<ReadyInfo> ready = WaitForReadyFile(
      node.plan.ready_file, *node.process, std::max(deadline - absl::Now(), absl::ZeroDuration()));
  if (!ready.ok()) return Failed(node.plan.name, ready.status(), spec.stdout_path);
  node.ready = *std::move(ready);
  // Later starts listen where this one did.
  SetFlag(&node.plan.spec.args, "--listen", node.ready.grpc);
  if (std::string metrics = ExtraField(node.ready, "metrics"); !metrics.empty()) {
    SetFlag(&node.plan.spec.args, "--metrics-listen", metrics);
  }
  return absl::OkStatus();
}

absl::Status ChaosCluster::Start(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<ProcessPlan> plans = PlanNodes(options_, dirs_);
  for (size_t i = 0; i < plans.size(); ++i) {
    Node node;
    node.plan = std::move(plans[i]);
    if (isolate_) {
      absl::StatusOr<std::unique_ptr<NodeNetwork>> net =
          NodeNetwork::Create(static_cast<int>(i), absl::StrCat(dirs_.log_dir, "/network.log"));
      if (!net.ok()) return net.status();
      node.net = *std::move(net);
      const std::string& ip = node.net->node_ip();
      SetFlag(&node.plan.spec.args, "--listen", absl::StrCat(ip, ":", kNodeGrpcPort));
      SetFlag(&node.plan.spec.args, "--metrics-listen", absl::StrCat(ip, ":", kNodeMetricsPort));
    }
    nodes_.push_back(std::move(node));
  }
  for (int i = 0; i < num_nodes(); ++i) {
    if (absl::Status s = StartNode(i, deadline); !s.ok()) return s;
  }
  std::vector<std::string> prefill;
  std::vector<std::string> decode;
  for (const Node& node : nodes_) {
    (node.plan.role == ClusterRole::kPrefill ? prefill : decode).push_back(node.ready.grpc);
  }
  ProcessPlan plan = PlanRouter(options_, dirs_, prefill, decode);
  logs_.push_back(plan.spec.stdout_path);
  absl::StatusOr<std::unique_ptr<ChildProcess>> router = ChildProcess::Spawn(plan.spec);
  if (!router.ok()) return Failed("router", router.status(), plan.spec.stdout_path);
  router_ = *std::move(router);
  PublishPids();
  absl::StatusOr<ReadyInfo> ready = WaitForReadyFile(
      plan.ready_file, *router_, std::max(deadline - absl::Now(), absl::ZeroDuration()));
  if (!ready.ok()) return Failed("router", ready.status(), plan.spec.stdout_path);
  router_ready_ = *std::move(ready);
  return absl::OkStatus();
}

absl::Status ChaosCluster::Restart(int i, absl::Duration timeout) {
  Node& node = nodes_[i];
  if (node.process != nullptr && node.process->Running()) {
    node.process->Signal(SIGCONT);
    node.process->Stop(absl::ZeroDuration());
  }
  return StartNode(i, absl::Now() + timeout);
}

std::string ChaosCluster::router_metrics() const { return ExtraField(router_ready_, "metrics"); }

absl::StatusOr<v1::NodeLoad> ChaosCluster::Load(int i, absl::Duration timeout) const {
  auto channel = grpc::CreateChannel(nodes_[i].ready.grpc, grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
  v1::NodeLoad load;
  grpc::Status status =
      is_decode(i) ? v1::DecodeNode::NewStub(channel)->GetLoad(&context, v1::LoadRequest(), &load)
                   : v1::PrefillNode::NewStub(channel)->GetLoad(&context, v1::LoadRequest(), &load);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat(nodes_[i].plan.name, " GetLoad: ", status.error_message()));
  }
  return load;
}

void ChaosCluster::PublishPids() {
  std::vector<ClusterProcess> processes;
  if (router_ != nullptr) processes.push_back({"router", router_->pid()});
  for (const Node& node : nodes_) {
    if (node.process != nullptr) processes.push_back({node.plan.name, node.process->pid()});
  }
  absl::MutexLock lock(&mu_);
  processes_ = std::move(processes);
}

std::vector<ClusterProcess> ChaosCluster::Processes() const {
  absl::MutexLock lock(&mu_);
  return processes_;
}

void ChaosCluster::Stop(absl::Duration grace) {
  for (Node& node : nodes_) {
    if (node.process != nullptr) node.process->Signal(SIGCONT);
  }
  if (router_ != nullptr) router_->Stop(grace);
  for (Node& node : nodes_) {
    if (node.process != nullptr && node.process->Running()) node.process->Signal(SIGTERM);
  }
  const absl::Time deadline = absl::Now() + grace;
  for (Node& node : nodes_) {
    if (node.process == nullptr) continue;
    if (!node.process->WaitFor(std::max(deadline - absl::Now(), absl::ZeroDuration()))) {
      node.process->Stop(absl::ZeroDuration());
    }
  }
}

std::vector<std::string> ChaosCluster::LogFiles() const { return logs_; }

}  // namespace tandem::chaos
