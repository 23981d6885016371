#include "router/node_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "router/node_probe.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

constexpr char kStatic[] = "static";

int RoleIndex(NodeRole role) { return role == NodeRole::kPrefill ? 0 : 1; }

}  // namespace

NodePool::NodePool(NodePoolOptions options, std::shared_ptr<DnsResolver> resolver, Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      resolver_(resolver != nullptr ? std::move(resolver)
                                    : std::make_shared<GetAddrInfoResolver>()) {}

NodePool::~NodePool() { Stop(); }

absl::Status NodePool::Start() {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      GrpcChannelCredentials(options_.node_tls, &channel_args_);
  if (!credentials.ok()) return credentials.status();
  credentials_ = *std::move(credentials);
  for (const NodeSource* source : {&options_.prefill, &options_.decode}) {
    std::string host;
    int port = 0;
    for (const std::string& address : source->addresses) {
      if (absl::Status s = SplitHostPort(address, &host, &port); !s.ok()) return s;
    }
    if (!source->dns_name.empty()) {
      if (absl::Status s = SplitHostPort(source->dns_name, &host, &port); !s.ok()) return s;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    if (started_) return absl::FailedPreconditionError("the node pool is already started");
    started_ = true;
  }
  UpdateMembers(NodeRole::kPrefill, kStatic, options_.prefill.addresses);
  UpdateMembers(NodeRole::kDecode, kStatic, options_.decode.addresses);
  RefreshDns();
  CheckHealthWithin(
      absl::Milliseconds(std::max(options_.first_check_timeout_ms, options_.health_interval_ms)));
  health_thread_ = std::thread([this] { HealthLoop(); });
  if (!options_.prefill.dns_name.empty() || !options_.decode.dns_name.empty()) {
    dns_thread_ = std::thread([this] { DnsLoop(); });
  }
  return absl::OkStatus();
}

void NodePool::Stop() {
  std::vector<std::unique_ptr<KvEventsWatcher>> watchers;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& role_members : members_) {
      for (auto& [address, member] : role_members) {
        if (member.watcher != nullptr) watchers.push_back(std::move(member.watcher));
      }
    }
  }
  if (health_thread_.joinable()) health_thread_.join();
  if (dns_thread_.joinable()) dns_thread_.join();
  watchers.clear();  // each joins its thread
}

std::vector<std::shared_ptr<Node>> NodePool::Nodes(NodeRole role) const {
  std::vector<std::shared_ptr<Node>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [address, member] : members_[RoleIndex(role)]) out.push_back(member.node);
  return out;
}

std::vector<std::shared_ptr<Node>> NodePool::UpNodes(NodeRole role) const {
  std::vector<std::shared_ptr<Node>> out = Nodes(role);
  out.erase(std::remove_if(out.begin(), out.end(),
                           [](const std::shared_ptr<Node>& n) {
                             const Node::Snapshot s = n->snapshot();
                             return !s.up || s.load.draining();
                           }),
            out.end());
  return out;
}

void NodePool::ReportFailure(const std::shared_ptr<Node>& node, const std::string& error) {
  if (node->MarkDown(error)) {
    ++counters_.marked_down;
    spdlog::warn("{} node {} marked down: {}", NodeRoleName(node->role()), node->address(), error);
  }
}

std::vector<std::shared_ptr<Node>> NodePool::UpdateMembers(
    NodeRole role, const std::string& source, const std::vector<std::string>& addresses) {
  std::vector<std::shared_ptr<Node>> added;
  std::vector<std::unique_ptr<KvEventsWatcher>> dropped;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return added;
    auto& members = members_[RoleIndex(role)];
    if (source != kStatic) {
      for (auto it = members.begin(); it != members.end();) {
        if (it->second.source == source &&
            std::find(addresses.begin(), addresses.end(), it->first) == addresses.end()) {
          spdlog::info("{} node {} left {}", NodeRoleName(role), it->first, source);
          if (it->second.watcher != nullptr) dropped.push_back(std::move(it->second.watcher));
          it = members.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (const std::string& address : addresses) {
      if (members.contains(address)) continue;
      Member member;
      // A placement counts until a report shows it, or for 4 health intervals at most (its RPC
      // may have failed on the way).
      const InFlightOptions in_flight{
          .router_id = options_.router_id != 0 ? options_.router_id : ProcessRouterId(),
          .ttl = 4 * absl::Milliseconds(std::max<int64_t>(options_.health_interval_ms, 1)),
          .clock = clock_};
      member.node = std::make_shared<Node>(role, address, options_.health_interval_ms, credentials_,
                                           channel_args_, in_flight);
      member.source = source;
      if (role == NodeRole::kPrefill ? options_.watch_prefill_kv_events
                                     : options_.watch_decode_kv_events) {
        member.watcher = std::make_unique<KvEventsWatcher>(
            member.node, absl::Milliseconds(std::max<int64_t>(options_.health_interval_ms, 10)));
      }
      if (source != kStatic)
        spdlog::info("{} node {} joined from {}", NodeRoleName(role), address, source);
      added.push_back(member.node);
      members.emplace(address, std::move(member));
    }
  }
  return added;  // `dropped` watchers are stopped and joined here, outside the lock
}

void NodePool::Probe(const std::vector<std::shared_ptr<Node>>& nodes, absl::Duration timeout) {
  if (nodes.empty()) return;
  std::vector<ProbeResult> results = ProbeNodes(nodes, timeout);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::shared_ptr<Node>& node = nodes[i];
    const ProbeResult& r = results[i];
    if (r.ok) {
      const bool was_up = node->up();
      const bool restarted = node->MarkUp(r.load);
      if (restarted) {
        ++counters_.incarnation_changes;
        spdlog::warn("{} node {} restarted: new incarnation {}", NodeRoleName(node->role()),
                     node->address(), r.load.incarnation());
      }
      if (!was_up) {
        ++counters_.marked_up;
        spdlog::info("{} node {} is up (incarnation {})", NodeRoleName(node->role()),
                     node->address(), r.load.incarnation());
      }
      if (restarted || !was_up) {
        // Its cache view starts over (restart) or can start now (up again).
        absl::MutexLock lock(&mu_);
        auto& members = members_[RoleIndex(node->role())];
        if (auto it = members.find(node->address());
            it != members.end() && it->second.watcher != nullptr) {
          if (restarted) {
            it->second.watcher->Restart();
          } else {
            it->second.watcher->Wake();
          }
        }
      }
    } else if (r.slow && node->up() && !SlowLongEnoughToBeDown(*node)) {
      ++counters_.slow_checks;
    } else {
      const bool first_check = !node->snapshot().checked;  // MarkDown marks it checked
      if (node->MarkDown(r.error)) {
        ++counters_.marked_down;
        spdlog::warn("{} node {} marked down: {}", NodeRoleName(node->role()), node->address(),
                     r.error);
      } else if (first_check) {
        spdlog::warn("{} node {} is not up: {}", NodeRoleName(node->role()), node->address(),
                     r.error);
      }
    }
  }
}

bool NodePool::SlowLongEnoughToBeDown(Node& node) {
  const absl::Time now = clock_->Now();
  const absl::Time since = node.NoteSlowCheck(now);
  const absl::Duration window = absl::Milliseconds(options_.node_down_after_ms);
  if (now == since) {
    spdlog::info("{} node {}: a health check timed out; it stays up while its streams progress",
                 NodeRoleName(node.role()), node.address());
  }
  // Down only when checks have failed for the whole window and its streams did not move in it.
  return now - since >= window && now - node.last_progress() >= window;
}

void NodePool::CheckHealth() { CheckHealthWithin(CheckTimeout()); }

void NodePool::CheckHealthWithin(absl::Duration timeout) {
  std::vector<std::shared_ptr<Node>> nodes = Nodes(NodeRole::kPrefill);
  std::vector<std::shared_ptr<Node>> decode = Nodes(NodeRole::kDecode);
  nodes.insert(nodes.end(), decode.begin(), decode.end());
  Probe(nodes, timeout);
  // When placements started to see these reports (tools/sim/validate.py replays the times).
  spdlog::debug("load reports of {} nodes applied at {} us (Unix)", nodes.size(),
                absl::ToUnixMicros(clock_->Now()));
}

void NodePool::RefreshDns() {
  std::vector<std::shared_ptr<Node>> added;
  for (NodeRole role : {NodeRole::kPrefill, NodeRole::kDecode}) {
    const std::string& name =
        role == NodeRole::kPrefill ? options_.prefill.dns_name : options_.decode.dns_name;
    if (name.empty()) continue;
    absl::StatusOr<std::vector<std::string>> addresses = resolver_->Resolve(name);
    if (!addresses.ok()) {
      // Keep what we know: a name that briefly fails to resolve must not empty the cluster.
      ++counters_.dns_failures;
      spdlog::warn("resolving {} nodes {}: {}", NodeRoleName(role), name,
                   addresses.status().ToString());
      continue;
    }
    std::vector<std::shared_ptr<Node>> new_nodes = UpdateMembers(role, name, *addresses);
    added.insert(added.end(), new_nodes.begin(), new_nodes.end());
  }
  Probe(added, CheckTimeout());
}

void NodePool::HealthLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                           absl::Milliseconds(std::max<int64_t>(options_.health_interval_ms, 1)));
      if (stopping_) return;
    }
    CheckHealth();
  }
}

void NodePool::DnsLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                           absl::Milliseconds(std::max<int64_t>(options_.dns_refresh_ms, 1)));
      if (stopping_) return;
    }
    RefreshDns();
  }
}

}  // namespace tandem
