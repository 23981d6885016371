// PeerTable (cuda_kv_transport_peers.h): the writer's owners, their paths and mappings, write
// numbering and notices. Touches the copier (Import/Close) and the inner transport (notices).
#include "common/transport/cuda/cuda_kv_transport_peers.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tandem::cuda_internal {

KvTarget Peer::inbox() const {
  KvTarget owner;
  owner.address = address;
  owner.remote_key = descriptor.inner_remote_key;
  owner.remote_base = descriptor.landing_base;
  return owner;
}

Peer& PeerTable::Find(const std::string& address) {
  Peer& peer = peers_[address];
  if (peer.address.empty()) {
    peer.address = address;
    peer.tag = PeerTag(address);
  }
  return peer;
}

absl::StatusOr<Peer*> PeerTable::ForWrite(const KvTarget& target) {
  if (target.address.empty()) return absl::InvalidArgumentError("cuda transport: empty address");
  Peer& peer = Find(target.address);
  peer.last_used = ctx_.Now();
  if (peer.path != PeerPath::kUndecided && peer.remote_key == target.remote_key) return &peer;
  absl::StatusOr<DevicePoolDescriptor> d = DecodeDevicePoolDescriptor(target.remote_key);
  if (!d.ok()) return d.status();
  absl::Status s = Decide(peer, target.remote_key, *d);
  if (!s.ok()) return s;
  return &peer;
}

absl::Status PeerTable::Decide(Peer& peer, const std::string& remote_key,
                               const DevicePoolDescriptor& d) {
  if (peer.imported && peer.copies_in_flight == 0) {
    peer.imported.Reset();
    ctx_.published.Count([](CudaKvTransportStats& s) { ++s.imports_closed; });
  }
  peer.descriptor = d;
  peer.remote_key = remote_key;
  peer.path = PeerPath::kStaged;
  if (ctx_.options.allow_direct && d.host_id == ctx_.host_id && !d.export_handle.empty() &&
      !peer.imported) {
    TryOpen(peer);
  }
  if (peer.path == PeerPath::kStaged && (d.num_slots == 0 || d.inner_remote_key.empty())) {
    return absl::FailedPreconditionError(absl::StrCat("cuda transport: ", peer.tag,
                                                      " cannot be written directly and has no "
                                                      "landing slots for the staged path"));
  }
  return absl::OkStatus();
}

void PeerTable::TryOpen(Peer& peer) {
  const DevicePoolDescriptor& d = peer.descriptor;
  absl::StatusOr<void*> p = ctx_.copier->Import(d.export_handle, d.pool_bytes);
  if (!p.ok()) {
    ctx_.published.Count([](CudaKvTransportStats& s) { ++s.import_failures; });
    spdlog::warn(
        "cuda transport: {} is on this host but its pool cannot be opened here ({}); "
        "using the staged path",
        peer.tag, p.status().ToString());
    return;
  }
  peer.imported = ImportedPool(ctx_.copier.get(), *p);
  peer.path = PeerPath::kDirect;
  ctx_.published.Count([](CudaKvTransportStats& s) { ++s.imports_opened; });
  spdlog::info("cuda transport: writing {} directly (same host, its device {})", peer.tag,
               absl::BytesToHexString(d.device_id));
}

uint64_t PeerTable::WriteStarted(Peer* peer) {
  const uint64_t number = ++peer->last_write;
  peer->open_writes.insert(number);
  return number;
}

void PeerTable::WriteEnded(Peer* peer, uint64_t number) {
  peer->open_writes.erase(number);
  SendNotices(peer);
}

void PeerTable::Notify(const KvTarget& target, std::string payload, absl::Time deadline,
                       TransferDone done) {
  if (target.address.empty()) {
    done(absl::InvalidArgumentError("cuda transport notice: empty address"));
    return;
  }
  Peer& peer = Find(target.address);
  peer.last_used = ctx_.Now();
  peer.notices.push_back(
      PendingNotice{peer.last_write, std::move(payload), deadline, std::move(done)});
  SendNotices(&peer);
}

void PeerTable::SendNotices(Peer* peer) {
  while (!peer->notices.empty() && ctx_.loop.issuing()) {
    PendingNotice& n = peer->notices.front();
    if (!peer->open_writes.empty() && *peer->open_writes.begin() <= n.barrier) return;
    StagedMessage m;
    m.type = StagedMessageType::kNotice;
    m.payload = std::move(n.payload);
    auto done = std::make_shared<TransferDone>(std::move(n.done));
    ctx_.SendMessage(peer->inbox(), std::move(m), n.deadline, [this, done](absl::Status s) {
      // Reports the inner outcome, also when the transport is stopping.
      ctx_.loop.Post([done, s](bool) { (*done)(s); });
    });
    peer->notices.pop_front();
  }
}

KvTarget PeerTable::InboxOf(const std::string& address) const {
  auto it = peers_.find(address);
  if (it != peers_.end()) return it->second.inbox();
  KvTarget owner;
  owner.address = address;
  return owner;
}

absl::Time PeerTable::NextNoticeDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [address, peer] : peers_) {
    for (const PendingNotice& n : peer.notices) next = std::min(next, n.deadline);
  }
  return next;
}

void PeerTable::ExpireNotices(absl::Time now) {
  for (auto& [address, peer] : peers_) {
    while (!peer.notices.empty() && now >= peer.notices.front().deadline) {
      TransferDone done = std::move(peer.notices.front().done);
      peer.notices.pop_front();
      done(absl::DeadlineExceededError(absl::StrCat("cuda transport: notice to ", peer.tag,
                                                    " ran past its deadline waiting for writes")));
    }
  }
}

void PeerTable::ForgetIdle(absl::Time now) {
  for (auto it = peers_.begin(); it != peers_.end();) {
    Peer& peer = it->second;
    const bool idle = peer.copies_in_flight == 0 && peer.open_writes.empty() &&
                      peer.notices.empty() &&
                      now - peer.last_used >= ctx_.options.import_idle_close;
    if (!idle) {
      ++it;
      continue;
    }
    if (peer.imported) {
      peer.imported.Reset();
      ctx_.published.Count([](CudaKvTransportStats& s) { ++s.imports_closed; });
    }
    it = peers_.erase(it);
  }
}

void PeerTable::CancelNotices(const absl::Status& status) {
  for (auto& [address, peer] : peers_) {
    std::deque<PendingNotice> notices;
    notices.swap(peer.notices);
    for (PendingNotice& n : notices) n.done(status);
  }
}

void PeerTable::CloseMappings() {
  for (auto& [address, peer] : peers_) peer.imported.Reset();
}

}  // namespace tandem::cuda_internal
