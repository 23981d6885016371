#include "common/transport/local_transport.h"

#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/kv_write_corruption.h"

namespace tandem {

namespace {

// A queued operation, owned by the queue; `cancelled` is true when the transport shut down
// before running it.
using Task = absl::AnyInvocable<void(bool cancelled)>;

}  // namespace

struct LocalTransport::Endpoint {
  std::string address;
  std::string pool_key;
  uint64_t incarnation = 0;
  LocalTransportOptions options;

  mutable absl::Mutex mu;
  std::deque<Task> queue ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;
  bool paused ABSL_GUARDED_BY(mu) = false;
  int pending ABSL_GUARDED_BY(mu) = 0;
  absl::Status injected ABSL_GUARDED_BY(mu);
  KvWriteCorruption corruption;
  NoticeHandler handler ABSL_GUARDED_BY(mu);

  // Writers copy into the pool under a reader lock; closing takes the writer lock, so no copy is
  // under way once the owner is gone.
  mutable absl::Mutex pool_mu;
  char* pool ABSL_GUARDED_BY(pool_mu) = nullptr;
  size_t pool_bytes ABSL_GUARDED_BY(pool_mu) = 0;
  bool pool_open ABSL_GUARDED_BY(pool_mu) = true;

  std::thread worker;

  // Queues `task` (moved from). False when closed: `task` is left to the caller, which then runs
  // task(true) itself or fails its own way.
  bool Post(Task& task) {
    absl::MutexLock lock(&mu);
    if (closed) return false;
    queue.push_back(std::move(task));
    ++pending;
    return true;
  }

  void Run() {
    while (true) {
      Task task;
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(
            +[](Endpoint* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu) {
              return e->closed || (!e->paused && !e->queue.empty());
            },
            this));
        if (closed) break;
        task = std::move(queue.front());
        queue.pop_front();
      }
      task(false);
      absl::MutexLock lock(&mu);
      --pending;
    }
    // Closed: fail whatever is still queued.
    std::deque<Task> rest;
    {
      absl::MutexLock lock(&mu);
      rest.swap(queue);
    }
    for (Task& t : rest) {
      t(true);
      absl::MutexLock lock(&mu);
      --pending;
    }
  }

  // Sleeps `d` unless the transport closes first. True when closed.
  bool SleepUnlessClosed(absl::Duration d) {
    absl::MutexLock lock(&mu);
    return mu.AwaitWithTimeout(absl::Condition(&closed), d);
  }

  absl::Status WriteNow(const KvTarget& target, const std::vector<KvCopy>& copies,
                        absl::Time deadline);
};

namespace {

absl::Mutex registry_mu(absl::kConstInit);
absl::flat_hash_map<std::string, std::shared_ptr<LocalTransport::Endpoint>>& Registry()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_mu) {
  static auto* registry =
      new absl::flat_hash_map<std::string, std::shared_ptr<LocalTransport::Endpoint>>();
  return *registry;
}

std::shared_ptr<LocalTransport::Endpoint> Lookup(const std::string& address) {
  absl::MutexLock lock(&registry_mu);
  auto it = Registry().find(address);
  if (it == Registry().end()) return nullptr;
  return it->second;
}

std::atomic<uint64_t> next_id{1};

}  // namespace

absl::Status LocalTransport::Endpoint::WriteNow(const KvTarget& target,
                                                const std::vector<KvCopy>& copies,
                                                absl::Time deadline) {
  if (options.write_delay > absl::ZeroDuration()) {
    absl::Duration wait = std::min(options.write_delay, deadline - options.clock->Now());
    if (wait > absl::ZeroDuration() && SleepUnlessClosed(wait)) {
      return absl::CancelledError("local transport shut down");
    }
  }
  if (options.clock->Now() > deadline) {
    return absl::DeadlineExceededError("local write: deadline passed before the copy");
  }
  {
    absl::MutexLock lock(&mu);
    if (!injected.ok()) return injected;
  }
  const char* src_pool = nullptr;
  size_t src_bytes = 0;
  {
    absl::ReaderMutexLock lock(&pool_mu);
    src_pool = pool;
    src_bytes = pool_bytes;
  }
  if (src_pool == nullptr) return absl::FailedPreconditionError("local write: no pool registered");
  for (const KvCopy& c : copies) {
    if (c.src_offset > src_bytes || c.bytes > src_bytes - c.src_offset) {
      return absl::InvalidArgumentError(absl::StrCat("local write: source range [", c.src_offset,
                                                     ", +", c.bytes, ") is outside the ", src_bytes,
                                                     "-byte pool"));
    }
  }
  std::shared_ptr<Endpoint> peer = Lookup(target.address);
  if (peer == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("local write: no transport at address '", target.address, "'"));
  }
  absl::ReaderMutexLock lock(&peer->pool_mu);
  if (!peer->pool_open) return absl::UnavailableError("local write: target shut down");
  if (peer->pool == nullptr)
    return absl::FailedPreconditionError("local write: target has no pool");
  if (target.remote_key != peer->pool_key) {
    return absl::PermissionDeniedError("local write: remote key does not match the target's pool");
  }
  const uint64_t peer_base = reinterpret_cast<uintptr_t>(peer->pool);
  for (const KvCopy& c : copies) {
    const uint64_t dst = target.remote_base + c.dst_offset;
    if (dst < peer_base || dst - peer_base > peer->pool_bytes ||
        c.bytes > peer->pool_bytes - (dst - peer_base)) {
      return absl::InvalidArgumentError(
          absl::StrCat("local write: destination range [", c.dst_offset, ", +", c.bytes,
                       ") is outside the target's ", peer->pool_bytes, "-byte pool"));
    }
  }
  for (const KvCopy& c : copies) {
    std::memcpy(peer->pool + (target.remote_base + c.dst_offset - peer_base),
                src_pool + c.src_offset, c.bytes);
  }
  if (std::optional<KvByteFlip> flip = corruption.Take(copies)) {
    const KvCopy& c = copies[flip->copy];
    peer->pool[target.remote_base + c.dst_offset - peer_base + flip->offset] ^= KvByteFlip::kMask;
  }
  return absl::OkStatus();
}

LocalTransport::LocalTransport(LocalTransportOptions options)
    : endpoint_(std::make_shared<Endpoint>()) {
  const uint64_t id = next_id.fetch_add(1);
  endpoint_->address = absl::StrCat("local:", id, ":", RandomIncarnation());
  endpoint_->pool_key = absl::StrCat("local-pool:", id);
  endpoint_->incarnation = RandomIncarnation();
  endpoint_->options = options;
  {
    absl::MutexLock lock(&registry_mu);
    Registry()[endpoint_->address] = endpoint_;
  }
  endpoint_->worker = std::thread([e = endpoint_.get()] { e->Run(); });
}

LocalTransport::~LocalTransport() {
  {
    absl::MutexLock lock(&registry_mu);
    Registry().erase(endpoint_->address);
  }
  {
    absl::MutexLock lock(&endpoint_->pool_mu);
    endpoint_->pool_open = false;
  }
  {
    absl::MutexLock lock(&endpoint_->mu);
    endpoint_->closed = true;
  }
  endpoint_->worker.join();
}

absl::Status LocalTransport::RegisterPool(void* base, size_t bytes) {
  if (base == nullptr || bytes == 0) return absl::InvalidArgumentError("empty pool");
  absl::MutexLock lock(&endpoint_->pool_mu);
  if (endpoint_->pool != nullptr) return absl::FailedPreconditionError("pool already registered");
  endpoint_->pool = static_cast<char*>(base);
  endpoint_->pool_bytes = bytes;
  return absl::OkStatus();
}

std::string LocalTransport::address() const { return endpoint_->address; }
std::string LocalTransport::pool_remote_key() const { return endpoint_->pool_key; }

uint64_t LocalTransport::pool_base() const {
  absl::ReaderMutexLock lock(&endpoint_->pool_mu);
  return reinterpret_cast<uintptr_t>(endpoint_->pool);
}

uint64_t LocalTransport::incarnation() const { return endpoint_->incarnation; }

void LocalTransport::SetNoticeHandler(NoticeHandler handler) {
  absl::MutexLock lock(&endpoint_->mu);
  endpoint_->handler = std::move(handler);
}

void LocalTransport::Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
                           TransferDone done) {
  Endpoint* self = endpoint_.get();
  Task task = [self, target, copies = std::move(copies), deadline,
               done = std::move(done)](bool cancelled) mutable {
    if (cancelled) {
      done(absl::CancelledError("local transport shut down"));
      return;
    }
    done(self->WriteNow(target, copies, deadline));
  };
  // The task owns `done`; when the transport is closed it runs here, failing.
  if (!self->Post(task)) task(true);
}

void LocalTransport::Notify(const KvTarget& target, std::string payload, absl::Time deadline,
                            TransferDone done) {
  Endpoint* self = endpoint_.get();
  // Shared: the delivery task queued on the target calls it, or this task when the target has
  // closed (and `deliver`, which holds it, comes back unqueued).
  auto shared_done = std::make_shared<TransferDone>(std::move(done));
  Task task = [self, address = target.address, payload = std::move(payload), deadline,
               shared_done](bool cancelled) mutable {
    if (cancelled) {
      (*shared_done)(absl::CancelledError("local transport shut down"));
      return;
    }
    if (self->options.clock->Now() > deadline) {
      (*shared_done)(absl::DeadlineExceededError("local notice: deadline passed"));
      return;
    }
    std::shared_ptr<Endpoint> peer = Lookup(address);
    if (peer == nullptr) {
      (*shared_done)(absl::UnavailableError(
          absl::StrCat("local notice: no transport at address '", address, "'")));
      return;
    }
    Endpoint* target = peer.get();
    Task deliver = [target, clock = self->options.clock, payload = std::move(payload), deadline,
                    shared_done](bool cancelled) {
      if (cancelled) {
        (*shared_done)(absl::CancelledError("local notice: target shut down"));
        return;
      }
      if (clock->Now() > deadline) {
        (*shared_done)(absl::DeadlineExceededError("local notice: deadline passed"));
        return;
      }
      NoticeHandler handler;
      {
        absl::MutexLock lock(&target->mu);
        handler = target->handler;
      }
      if (handler) handler(payload);
      (*shared_done)(absl::OkStatus());
    };
    if (!peer->Post(deliver))
      (*shared_done)(absl::UnavailableError("local notice: target shut down"));
  };
  if (!self->Post(task)) task(true);
}

void LocalTransport::Pause() {
  absl::MutexLock lock(&endpoint_->mu);
  endpoint_->paused = true;
}

void LocalTransport::Resume() {
  absl::MutexLock lock(&endpoint_->mu);
  endpoint_->paused = false;
}

void LocalTransport::CorruptNextWrites(int64_t writes) { endpoint_->corruption.Arm(writes); }

std::span<const uint8_t> LocalTransport::host_pool() const {
  absl::ReaderMutexLock lock(&endpoint_->pool_mu);
  return {reinterpret_cast<const uint8_t*>(endpoint_->pool), endpoint_->pool_bytes};
}

void LocalTransport::InjectWriteError(absl::Status status) {
  absl::MutexLock lock(&endpoint_->mu);
  endpoint_->injected = std::move(status);
}

std::vector<uint8_t> LocalTransport::PoolSnapshot() const {
  absl::MutexLock lock(&endpoint_->pool_mu);
  if (endpoint_->pool == nullptr) return {};
  return std::vector<uint8_t>(endpoint_->pool, endpoint_->pool + endpoint_->pool_bytes);
}

int LocalTransport::pending() const {
  absl::MutexLock lock(&endpoint_->mu);
  return endpoint_->pending;
}

}  // namespace tandem
