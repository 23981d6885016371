// CudaKvTransport (cuda_kv_transport.h): the public façade and Impl, which wires the parts
// together. Impl owns the shared context and the parts; it validates options, starts and stops
// the thread, registers the pool, routes each Write to a path and each inner message to the part
// it belongs to, and runs each round's polling and timers in a fixed order. The protocol lives in
// the parts:
//   cuda_kv_transport_loop      the thread, its queue and the run state
//   cuda_kv_transport_context   what the parts share (options, inner, copier, pool, counters)
//   cuda_kv_transport_peers     owners written to: paths, mappings, write order, notices
//   cuda_kv_transport_direct    the direct path (device to device into a mapped pool)
//   cuda_kv_transport_staged    the writer's staged path (staging ring, grants, puts)
//   cuda_kv_transport_owner     the owner's staged path (landing slots, fills) and notices
#include "common/transport/cuda/cuda_kv_transport.h"

#include <algorithm>
#include <utility>

#include "common/transport/cuda/copy_plan.h"
#include "common/transport/cuda/cuda_kv_transport_context.h"
#include "common/transport/cuda/cuda_kv_transport_direct.h"
#include "common/transport/cuda/cuda_kv_transport_owner.h"
#include "common/transport/cuda/cuda_kv_transport_peers.h"
#include "common/transport/cuda/cuda_kv_transport_staged.h"
#include "common/transport/cuda/device_pool_descriptor.h"
#include "spdlog/spdlog.h"

namespace tandem {

using cuda_internal::DirectWrites;
using cuda_internal::HostBuffer;
using cuda_internal::Peer;
using cuda_internal::PeerPath;
using cuda_internal::PeerTable;
using cuda_internal::StagedOwner;
using cuda_internal::StagedSends;
using cuda_internal::TaskLoop;
using cuda_internal::TransportContext;

class CudaKvTransport::Impl {
 public:
  Impl(std::unique_ptr<KvTransport> inner, std::unique_ptr<MemoryCopier> copier,
       CudaKvTransportOptions options)
      : ctx_(std::move(inner), std::move(copier), std::move(options)),
        peers_(ctx_),
        direct_(ctx_, peers_),
        staged_(ctx_, peers_),
        owner_(ctx_) {}

  ~Impl() { Shutdown(); }

  absl::Status Start();
  // Stops the thread, fails what is pending, shuts the inner transport down, waits for copies.
  void Shutdown();

  absl::Status RegisterDevicePool(void* base, size_t bytes, int cuda_device) {
    if (base == nullptr || bytes == 0) return absl::InvalidArgumentError("empty device pool");
    return ctx_.loop.RunSync([&] { return SetUpPool(base, bytes, cuda_device); });
  }

  std::string address() const { return ctx_.inner_address; }
  uint64_t incarnation() const { return ctx_.inner_incarnation; }
  std::string pool_remote_key() const { return ctx_.published.descriptor(); }
  uint64_t pool_base() const { return ctx_.published.pool_base(); }
  void SetNoticeHandler(NoticeHandler handler) {
    ctx_.published.SetNoticeHandler(std::move(handler));
  }
  CudaKvTransportStats stats() const { return ctx_.published.stats(); }

  void Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
             TransferDone done) {
    ctx_.loop.Post([this, target, copies = std::move(copies), deadline,
                    done = std::move(done)](bool cancelled) mutable {
      if (cancelled) {
        done(absl::CancelledError("cuda transport stopped"));
        return;
      }
      StartWrite(target, std::move(copies), deadline, std::move(done));
    });
  }

  void Notify(const KvTarget& target, std::string payload, absl::Time deadline, TransferDone done) {
    ctx_.loop.Post([this, target, payload = std::move(payload), deadline,
                    done = std::move(done)](bool cancelled) mutable {
      if (cancelled) {
        done(absl::CancelledError("cuda transport stopped"));
        return;
      }
      peers_.Notify(target, std::move(payload), deadline, std::move(done));
    });
  }

 private:
  // RegisterDevicePool on the thread: the host region, its inner registration, the descriptor.
  absl::Status SetUpPool(void* base, size_t bytes, int cuda_device);
  // What this owner publishes as its remote key, exporting the pool when the copier can.
  DevicePoolDescriptor Describe(void* base, size_t bytes);
  // Checks a Write, numbers it at its peer and hands it to the peer's path.
  void StartWrite(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
                  TransferDone done);
  void OnMessage(const StagedMessage& m);

  // The loop's hooks: how long to sleep with nothing queued; after each batch of tasks, poll
  // every fence, then check every timer (in this order: direct and staged writes, notices,
  // landing slots, idle peers).
  absl::Duration IdleWait() const;
  void Round();

  TransportContext ctx_;
  PeerTable peers_;
  DirectWrites direct_;
  StagedSends staged_;
  StagedOwner owner_;
};

absl::Status CudaKvTransport::Impl::Start() {
  const CudaKvTransportOptions& o = ctx_.options;
  if (o.chunk_bytes == 0 || o.staging_buffers <= 0 || o.landing_slots <= 0 ||
      o.max_slots_per_transfer <= 0) {
    return absl::InvalidArgumentError(
        "cuda transport: chunk_bytes, staging_buffers, landing_slots and "
        "max_slots_per_transfer must be positive");
  }
  ctx_.inner_address = ctx_.inner->address();
  ctx_.inner->SetNoticeHandler([this](std::string_view payload) {
    absl::StatusOr<StagedMessage> m = DecodeStagedMessage(payload);
    if (!m.ok()) {
      spdlog::warn("cuda transport: dropped an inner notice: {}", m.status().ToString());
      return;
    }
    ctx_.loop.Post([this, m = std::move(*m)](bool cancelled) {
      if (!cancelled) OnMessage(m);
    });
  });
  ctx_.loop.Start({.idle_wait = [this] { return IdleWait(); }, .round = [this] { Round(); }});
  return absl::OkStatus();
}

void CudaKvTransport::Impl::Shutdown() {
  if (!ctx_.loop.Stop()) return;  // joined the thread: no new work from here on
  ctx_.loop.RunQueued(/*cancelled=*/true);
  const absl::Status cancelled = absl::CancelledError("cuda transport stopped");
  peers_.CancelNotices(cancelled);
  direct_.CancelAll(cancelled);
  staged_.CancelAll(cancelled);
  // The inner transport's callbacks from now on run inline and only report outcomes.
  ctx_.inner.reset();
  ctx_.loop.RunQueued(/*cancelled=*/true);
  ctx_.copier->Drain();
  peers_.CloseMappings();
  ctx_.host.Reset();
}

absl::Status CudaKvTransport::Impl::SetUpPool(void* base, size_t bytes, int cuda_device) {
  if (ctx_.pool != nullptr) return absl::FailedPreconditionError("pool already registered");
  absl::Status s = ctx_.copier->CheckPool(base, bytes, cuda_device);
  if (!s.ok()) return s;
  const size_t staging_bytes = ctx_.options.chunk_bytes * ctx_.options.staging_buffers;
  const size_t landing_bytes = ctx_.options.chunk_bytes * ctx_.options.landing_slots;
  absl::StatusOr<void*> allocated = ctx_.copier->AllocateHost(staging_bytes + landing_bytes);
  if (!allocated.ok()) return allocated.status();
  HostBuffer host(ctx_.copier.get(), *allocated);  // freed here unless registered
  s = ctx_.inner->RegisterPool(host.get(), staging_bytes + landing_bytes);
  if (!s.ok()) return s;
  ctx_.host = std::move(host);
  ctx_.staging_bytes = staging_bytes;
  staged_.ResetStaging(ctx_.options.staging_buffers);
  const DevicePoolDescriptor d = Describe(base, bytes);
  ctx_.pool = static_cast<char*>(base);
  ctx_.pool_bytes = bytes;
  ctx_.published.Publish(EncodeDevicePoolDescriptor(d), reinterpret_cast<uintptr_t>(base));
  return absl::OkStatus();
}

DevicePoolDescriptor CudaKvTransport::Impl::Describe(void* base, size_t bytes) {
  DevicePoolDescriptor d;
  d.pool_bytes = bytes;
  d.host_id = ctx_.host_id;
  d.device_id = ctx_.copier->device_id();
  absl::StatusOr<std::string> handle = ctx_.copier->Export(base, bytes);
  if (handle.ok()) {
    d.export_handle = *handle;
  } else {
    spdlog::info(
        "cuda transport: pool not shared with same-host peers ({}); they use the staged path",
        handle.status().ToString());
  }
  d.inner_remote_key = ctx_.inner->pool_remote_key();
  d.landing_base = ctx_.inner->pool_base() + ctx_.staging_bytes;
  d.slot_bytes = ctx_.options.chunk_bytes;
  d.num_slots = static_cast<uint32_t>(ctx_.options.landing_slots);
  return d;
}

void CudaKvTransport::Impl::StartWrite(const KvTarget& target, std::vector<KvCopy> copies,
                                       absl::Time deadline, TransferDone done) {
  if (ctx_.pool == nullptr) {
    done(absl::FailedPreconditionError("cuda transport write: no pool registered"));
    return;
  }
  absl::StatusOr<Peer*> peer = peers_.ForWrite(target);
  if (!peer.ok()) {
    done(peer.status());
    return;
  }
  Peer* p = *peer;
  absl::Status s =
      CheckCopyBounds(copies, ctx_.pool_bytes, p->descriptor.pool_bytes, "cuda transport write");
  if (!s.ok()) {
    done(s);
    return;
  }
  if (ctx_.Now() >= deadline) {
    done(absl::DeadlineExceededError("cuda transport write: deadline passed before issuing"));
    return;
  }
  copies = CoalesceCopies(std::move(copies));
  uint64_t bytes = 0;
  for (const KvCopy& c : copies) bytes += c.bytes;
  if (bytes == 0) {
    done(absl::OkStatus());
    return;
  }
  const uint64_t number = peers_.WriteStarted(p);
  const bool direct = p->path == PeerPath::kDirect;
  if (direct) {
    direct_.Start(p, number, copies, deadline, std::move(done));
  } else {
    staged_.Start(p, number, copies, deadline, std::move(done));
  }
  ctx_.published.Count([direct, bytes](CudaKvTransportStats& st) {
    if (direct) {
      ++st.direct_writes;
      st.direct_bytes += static_cast<int64_t>(bytes);
    } else {
      ++st.staged_writes;
      st.staged_bytes += static_cast<int64_t>(bytes);
    }
  });
}

void CudaKvTransport::Impl::OnMessage(const StagedMessage& m) {
  switch (m.type) {
    case StagedMessageType::kRequest:
      owner_.OnRequest(m);
      break;
    case StagedMessageType::kChunk:
      owner_.OnChunk(m);
      break;
    case StagedMessageType::kReturn:
      owner_.OnReturn(m);
      break;
    case StagedMessageType::kNotice:
      owner_.Deliver(m.payload);
      break;
    case StagedMessageType::kGrant:
      staged_.OnGrant(m);
      break;
    case StagedMessageType::kChunkDone:
      staged_.OnChunkDone(m);
      break;
  }
}

absl::Duration CudaKvTransport::Impl::IdleWait() const {
  if (direct_.has_fences() || staged_.has_fences() || owner_.has_fences()) {
    return ctx_.options.poll_interval;
  }
  // Deadlines are checked at least every 100 ms; sooner only matters for tests with tiny
  // deadlines, which poll anyway while copies are in flight.
  const absl::Time now = ctx_.Now();
  absl::Time next = std::min(staged_.NextDeadline(), peers_.NextNoticeDeadline());
  if (owner_.holds_slots()) next = std::min(next, now + absl::Milliseconds(100));
  return std::min(absl::Milliseconds(100), std::max(absl::ZeroDuration(), next - now));
}

void CudaKvTransport::Impl::Round() {
  direct_.Poll();
  staged_.Poll();
  owner_.Poll();
  const absl::Time now = ctx_.Now();
  direct_.ExpireDeadlines(now);
  staged_.ExpireDeadlines(now);
  peers_.ExpireNotices(now);
  owner_.ExpireGrants(now);
  peers_.ForgetIdle(now);
}

absl::StatusOr<std::unique_ptr<CudaKvTransport>> CudaKvTransport::Create(
    std::unique_ptr<KvTransport> inner, std::unique_ptr<MemoryCopier> copier,
    CudaKvTransportOptions options) {
  if (inner == nullptr || copier == nullptr) {
    return absl::InvalidArgumentError("cuda transport: needs an inner transport and a copier");
  }
  auto impl = std::make_unique<Impl>(std::move(inner), std::move(copier), std::move(options));
  absl::Status s = impl->Start();
  if (!s.ok()) return s;
  return std::unique_ptr<CudaKvTransport>(new CudaKvTransport(std::move(impl)));
}

CudaKvTransport::CudaKvTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudaKvTransport::~CudaKvTransport() { impl_->Shutdown(); }

absl::Status CudaKvTransport::RegisterPool(void*, size_t) {
  return absl::UnimplementedError(
      "the cuda KV transport moves device pools: call RegisterDevicePool");
}

absl::Status CudaKvTransport::RegisterDevicePool(void* base, size_t bytes, int cuda_device) {
  return impl_->RegisterDevicePool(base, bytes, cuda_device);
}

std::string CudaKvTransport::address() const { return impl_->address(); }
std::string CudaKvTransport::pool_remote_key() const { return impl_->pool_remote_key(); }
uint64_t CudaKvTransport::pool_base() const { return impl_->pool_base(); }
uint64_t CudaKvTransport::incarnation() const { return impl_->incarnation(); }

void CudaKvTransport::SetNoticeHandler(NoticeHandler handler) {
  impl_->SetNoticeHandler(std::move(handler));
}

void CudaKvTransport::Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
                            TransferDone done) {
  impl_->Write(target, std::move(copies), deadline, std::move(done));
}

void CudaKvTransport::Notify(const KvTarget& target, std::string payload, absl::Time deadline,
                             TransferDone done) {
  impl_->Notify(target, std::move(payload), deadline, std::move(done));
}

CudaKvTransportStats CudaKvTransport::stats() const { return impl_->stats(); }

}  // namespace tandem
