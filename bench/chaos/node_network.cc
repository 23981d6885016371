#include "bench/chaos/node_network.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tools/cluster/child_process.h"

namespace tandem::chaos {
namespace {

constexpr char kNamespacePrefix[] = "tandem-chaos-";
constexpr absl::Duration kCommandTimeout = absl::Seconds(10);

std::string FindTool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string path = absl::StrCat(dir, name);
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// Runs `tool args...` to its end (bounded); its output is appended to `log_path` (when not
// empty). Error naming the command and its output when it fails.
absl::Status Run(const std::string& tool, const std::vector<std::string>& args,
                 const std::string& log_path) {
  const std::string binary = FindTool(tool);
  const std::string command = absl::StrCat(tool, " ", absl::StrJoin(args, " "));
  if (binary.empty()) return absl::FailedPreconditionError(absl::StrCat(tool, " not found"));
  ChildSpec spec;
  spec.binary = binary;
  spec.args = args;
  spec.stdout_path =
      absl::StrCat(log_path.empty() ? "/tmp/tandem-chaos" : log_path, ".cmd.", ::getpid());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(spec);
  if (!child.ok()) return child.status();
  const bool ended = (*child)->WaitFor(kCommandTimeout);
  std::ifstream in(spec.stdout_path);
  std::stringstream output;
  output << in.rdbuf();
  std::error_code ec;
  std::filesystem::remove(spec.stdout_path, ec);
  if (!log_path.empty()) {
    std::ofstream log(log_path, std::ios::app);
    log << "$ " << command << "\n" << output.str();
  }
  if (!ended || !(*child)->ExitedCleanly()) {
    return absl::InternalError(absl::StrCat("`", command, "` ",
                                            ended ? (*child)->DescribeExit() : "timed out", ": ",
                                            absl::StripAsciiWhitespace(output.str())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EnterPrivateNetwork() {
  if (FindTool("ip").empty() || FindTool("tc").empty()) {
    return absl::FailedPreconditionError("iproute2's ip and tc are not installed");
  }
  if (::unshare(CLONE_NEWNET) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("unshare(CLONE_NEWNET): ", std::strerror(errno), " (needs root)"));
  }
  if (absl::Status up = Run("ip", {"link", "set", "lo", "up"}, ""); !up.ok()) return up;
  std::ofstream forward("/proc/sys/net/ipv4/ip_forward");
  forward << "1\n";
  forward.close();
  if (!forward) {
    return absl::FailedPreconditionError("cannot turn on IPv4 forwarding in the new namespace");
  }
  return absl::OkStatus();
}

void RemoveStaleNamespaces() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string name = entry.path().filename().string();
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, kNamespacePrefix)) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(rest, '-');
    int pid = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &pid) || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its run is still going
    (void)Run("ip", {"netns", "del", name}, "");
  }
}

absl::StatusOr<std::unique_ptr<NodeNetwork>> NodeNetwork::Create(int index,
                                                                 const std::string& log_path) {
  if (index < 0 || index > 250) return absl::InvalidArgumentError("node index out of range");
  const std::string subnet = absl::StrCat("10.77.", index + 1, ".");
  std::unique_ptr<NodeNetwork> net(new NodeNetwork(
      absl::StrCat(kNamespacePrefix, ::getpid(), "-", index), absl::StrCat("chv", index),
      absl::StrCat("chn", index), absl::StrCat(subnet, "2"), log_path));
  const std::string& ns = net->ns_;
  if (absl::Status s = Run("ip", {"netns", "add", ns}, log_path); !s.ok()) return s;
  net->created_ = true;
  const std::vector<std::vector<std::string>> steps = {
      {"link", "add", net->host_dev_, "type", "veth", "peer", "name", net->node_dev_},
      {"link", "set", net->node_dev_, "netns", ns},
      {"addr", "add", absl::StrCat(subnet, "1/24"), "dev", net->host_dev_},
      {"link", "set", net->host_dev_, "up"},
      {"-n", ns, "addr", "add", absl::StrCat(subnet, "2/24"), "dev", net->node_dev_},
      {"-n", ns, "link", "set", net->node_dev_, "up"},
      {"-n", ns, "link", "set", "lo", "up"},
      {"-n", ns, "route", "add", "default", "via", absl::StrCat(subnet, "1")}};
  for (const std::vector<std::string>& step : steps) {
    if (absl::Status s = Run("ip", step, log_path); !s.ok()) return s;
  }
  return net;
}

NodeNetwork::~NodeNetwork() {
  if (created_) (void)Run("ip", {"netns", "del", ns_}, log_path_);
}

std::vector<std::string> NodeNetwork::ExecPrefix() const {
  return {FindTool("ip"), "netns", "exec", ns_};
}

absl::Status NodeNetwork::Cut() {
  absl::Status host =
      Run("tc", {"qdisc", "replace", "dev", host_dev_, "root", "blackhole"}, log_path_);
  absl::Status node = Run("ip",
                          {"netns", "exec", ns_, FindTool("tc"), "qdisc", "replace", "dev",
                           node_dev_, "root", "blackhole"},
                          log_path_);
  host_cut_ = host.ok();
  node_cut_ = node.ok();
  return host.ok() ? node : host;
}

absl::Status NodeNetwork::Heal() {
  absl::Status host = absl::OkStatus();
  absl::Status node = absl::OkStatus();
  if (host_cut_) host = Run("tc", {"qdisc", "del", "dev", host_dev_, "root"}, log_path_);
  if (node_cut_) {
    node =
        Run("ip", {"netns", "exec", ns_, FindTool("tc"), "qdisc", "del", "dev", node_dev_, "root"},
            log_path_);
  }
  host_cut_ = host_cut_ && !host.ok();
  node_cut_ = node_cut_ && !node.ok();
  return host.ok() ? node : host;
}

}  // namespace tandem::chaos
