#include "tools/cluster/local_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

constexpr int kLogTailLines = 30;

std::string LogTail(const std::string& path) {
  std::string tail = ReadFileTail(path, kLogTailLines);
  if (tail.empty()) return absl::StrCat("  log: ", path, " (empty)");
  return absl::StrCat("  log: ", path, "\n  --- last lines ---\n", tail, "\n  ---");
}

}  // namespace

LocalCluster::LocalCluster(ClusterOptions options, ClusterDirs dirs)
    : options_(std::move(options)), dirs_(std::move(dirs)) {}

LocalCluster::~LocalCluster() {
  // ChildProcess's destructor SIGKILLs and reaps; do the router first like Stop().
  while (!members_.empty()) members_.pop_back();
}

std::string LocalCluster::Describe(const Member& member) const {
  std::string pid = member.process ? absl::StrCat(", pid ", member.process->pid()) : "";
  return absl::StrCat(member.plan.name, " (", RoleBinary(member.plan.role), pid, ")");
}

absl::Status LocalCluster::StartMember(const ProcessPlan& plan) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(plan.spec);
  if (!child.ok()) {
    return absl::Status(child.status().code(),
                        absl::StrCat(plan.name, " did not start: ", child.status().message()));
  }
  members_.push_back(Member{plan, *std::move(child), ReadyInfo{}});
  reported_.push_back(false);
  return absl::OkStatus();
}

absl::Status LocalCluster::WaitReady(Member& member, absl::Time deadline,
                                     const std::function<bool()>& should_stop) {
  absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
  absl::StatusOr<ReadyInfo> ready =
      WaitForReadyFile(member.plan.ready_file, *member.process, left, should_stop);
  if (ready.ok()) {
    member.ready = *std::move(ready);
    return absl::OkStatus();
  }
  if (ready.status().code() == absl::StatusCode::kCancelled) return ready.status();
  if (ready.status().code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(
        absl::StrCat(Describe(member), " did not become ready within --startup-timeout-s ",
                     options_.startup_timeout_s, " (", ready.status().message(), ")\n",
                     LogTail(member.plan.spec.stdout_path)));
  }
  // It exited: mark it reported so CheckExited does not report it again.
  for (size_t i = 0; i < members_.size(); ++i) {
    if (&members_[i] == &member) reported_[i] = true;
  }
  return absl::Status(ready.status().code(),
                      absl::StrCat(Describe(member), " failed to start: ", ready.status().message(),
                                   "\n", LogTail(member.plan.spec.stdout_path)));
}

absl::Status LocalCluster::Start(const std::function<bool()>& should_stop) {
  absl::Time deadline = absl::Now() + absl::Seconds(options_.startup_timeout_s);
  std::vector<ProcessPlan> nodes = PlanNodes(options_, dirs_);
  // Every binary must be there before anything starts.
  std::vector<std::string> missing;
  std::vector<std::string> binaries;
  for (const ProcessPlan& plan : nodes) binaries.push_back(plan.spec.binary);
  binaries.push_back(PlanRouter(options_, dirs_, {}, {}).spec.binary);
  for (const std::string& binary : binaries) {
    if (::access(binary.c_str(), X_OK) != 0 &&
        std::find(missing.begin(), missing.end(), binary) == missing.end()) {
      missing.push_back(binary);
    }
  }
  if (!missing.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "cannot start the cluster: ", absl::StrJoin(missing, ", "),
        " not found or not executable (is it built? build the tandem-prefill, tandem-decode "
        "and tandem-router targets, or pass --bin-dir DIR)"));
  }
  // All nodes load their model at once; then wait for each in turn.
  for (const ProcessPlan& plan : nodes) RETURN_IF_ERROR(StartMember(plan));
  std::vector<std::string> prefill;
  std::vector<std::string> decode;
  for (Member& member : members_) {
    RETURN_IF_ERROR(WaitReady(member, deadline, should_stop));
    (member.plan.role == ClusterRole::kPrefill ? prefill : decode).push_back(member.ready.grpc);
  }
  RETURN_IF_ERROR(StartMember(PlanRouter(options_, dirs_, prefill, decode)));
  return WaitReady(members_.back(), deadline, should_stop);
}

std::string LocalCluster::router_address() const {
  for (const Member& member : members_) {
    if (member.plan.role == ClusterRole::kRouter) return member.ready.grpc;
  }
  return "";
}

std::string LocalCluster::router_endpoint(const std::string& key) const {
  for (const Member& member : members_) {
    if (member.plan.role != ClusterRole::kRouter) continue;
    for (const auto& [k, value] : member.ready.extra) {
      if (k == key) return value;
    }
  }
  return "";
}

std::optional<std::string> LocalCluster::CheckExited() {
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& member = members_[i];
    if (reported_[i] || member.process->Running()) continue;
    reported_[i] = true;
    return absl::StrCat(Describe(member), " ", member.process->DescribeExit(), "\n",
                        LogTail(member.plan.spec.stdout_path));
  }
  return std::nullopt;
}

std::vector<std::string> LocalCluster::Stop(absl::Duration grace) {
  std::vector<std::string> killed;
  auto note_killed = [&](const Member& member) {
    killed.push_back(absl::StrCat(Describe(member), " did not exit within ",
                                  absl::FormatDuration(grace), " of SIGTERM; killed"));
  };
  // The router first, so no new request reaches a stopping node.
  for (Member& member : members_) {
    if (member.plan.role == ClusterRole::kRouter && !member.process->Stop(grace)) {
      note_killed(member);
    }
  }
  std::vector<Member*> nodes;
  for (Member& member : members_) {
    if (member.plan.role != ClusterRole::kRouter && member.process->Running()) {
      member.process->Signal(SIGTERM);
      nodes.push_back(&member);
    }
  }
  absl::Time deadline = absl::Now() + grace;
  for (Member* member : nodes) {
    if (!member->process->WaitFor(std::max(deadline - absl::Now(), absl::ZeroDuration()))) {
      member->process->Stop(absl::ZeroDuration());
      note_killed(*member);
    }
  }
  return killed;
}

std::string LocalCluster::DescribeEndpoints() const {
  size_t width = 0;
  for (const Member& member : members_) width = std::max(width, member.plan.name.size());
  std::string text = absl::StrFormat("tandem cluster ready: %s, %d prefill + %d decode nodes\n",
                                     options_.mode, NumPrefillNodes(options_), options_.num_decode);
  absl::StrAppend(&text, "router gRPC: ", router_address(), "\n");
  if (std::string http = router_endpoint("http"); !http.empty()) {
    absl::StrAppend(&text, "router HTTP: ", tls_ca().empty() ? "http://" : "https://", http,
                    "/v1\n");
  }
  // The router first, then the nodes in start order.
  std::vector<const Member*> order;
  for (const Member& m : members_) {
    if (m.plan.role == ClusterRole::kRouter) order.push_back(&m);
  }
  for (const Member& m : members_) {
    if (m.plan.role != ClusterRole::kRouter) order.push_back(&m);
  }
  for (const Member* m : order) {
    std::string extra;
    for (const auto& [key, value] : m->ready.extra) absl::StrAppend(&extra, "  ", key, " ", value);
    absl::StrAppend(
        &text, absl::StrFormat("  %-*s  %-7s  pid %-7d  grpc %-21s%s  log %s\n",
                               static_cast<int>(width), m->plan.name, RoleName(m->plan.role),
                               m->process->pid(), m->ready.grpc, extra, m->plan.spec.stdout_path));
  }
  const char* inherited = std::getenv("UCX_TLS");
  absl::StrAppend(&text, "UCX_TLS: ",
                  options_.ucx_tls.has_value() ? *options_.ucx_tls
                  : inherited != nullptr       ? absl::StrCat(inherited, " (inherited)")
                                               : "unset (UCX picks)",
                  "\n");
  absl::StrAppend(&text, "logs: ", dirs_.log_dir, "\n");
  if (!tls_ca().empty()) {
    absl::StrAppend(&text,
                    "TLS: the router's gRPC and HTTPS API and every node port (mTLS); CA "
                    "certificate: ",
                    tls_ca(), "\n");
    absl::StrAppend(&text, "try: tandem-cli --router ", router_address(), " --tls-ca ", tls_ca(),
                    " --prompt 'Hello' --max-tokens 16\n");
    absl::StrAppend(&text, "     curl --cacert ", tls_ca(), " https://", router_endpoint("http"),
                    "/v1/models\n");
  } else {
    absl::StrAppend(&text, "try: tandem-cli --router ", router_address(),
                    " --prompt 'Hello' --max-tokens 16\n");
  }
  return text;
}

std::string LocalCluster::EndpointsJson() const {
  nlohmann::ordered_json json;
  json["grpc"] = router_address();
  if (std::string http = router_endpoint("http"); !http.empty()) json["http"] = http;
  json["pid"] = static_cast<int64_t>(::getpid());
  json["mode"] = options_.mode;
  json["log_dir"] = dirs_.log_dir;
  if (!tls_ca().empty()) json["tls_ca"] = tls_ca();
  nlohmann::ordered_json processes = nlohmann::ordered_json::array();
  for (const Member& m : members_) {
    nlohmann::ordered_json p;
    p["name"] = m.plan.name;
    p["role"] = RoleName(m.plan.role);
    p["pid"] = static_cast<int64_t>(m.process->pid());
    p["grpc"] = m.ready.grpc;
    p["log"] = m.plan.spec.stdout_path;
    for (const auto& [key, value] : m.ready.extra) p[key] = value;
    processes.push_back(std::move(p));
  }
  json["processes"] = std::move(processes);
  return json.dump();
}

}  // namespace tandem
