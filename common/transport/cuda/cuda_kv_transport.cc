#include "common/transport/cuda/cuda_kv_transport.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/transport/cuda/copy_plan.h"
#include "common/transport/cuda/device_pool_descriptor.h"
#include "common/transport/cuda/landing_slots.h"
#include "common/transport/cuda/staged_messages.h"
#include "spdlog/spdlog.h"

namespace tandem {

namespace {

// Runs on the transport's thread; `cancelled` when the transport stopped before running it.
using Task = absl::AnyInvocable<void(bool cancelled)>;

uint64_t RandomId() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (uint64_t{rd()} << 32) ^ rd();
  return v;
}

// A short printable tag of an inner transport address, for messages.
std::string PeerTag(const std::string& address) {
  uint64_t h = 1469598103934665603ull;
  for (char c : address) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return absl::StrCat("peer-", absl::Hex(h & 0xffffffffull));
}

int64_t ToMillisCeil(absl::Duration d) {
  return absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1)));
}

}  // namespace

class CudaKvTransport::Impl {
 public:
  Impl(std::unique_ptr<KvTransport> inner, std::unique_ptr<MemoryCopier> copier,
       CudaKvTransportOptions options)
      : options_(std::move(options)),
        inner_(std::move(inner)),
        copier_(std::move(copier)),
        writer_id_(RandomId()),
        host_id_(HostIdentity()),
        slots_(options_.landing_slots, options_.max_slots_per_transfer) {}

  ~Impl() { Shutdown(); }

  absl::Status Start() {
    if (options_.chunk_bytes == 0 || options_.staging_buffers <= 0 || options_.landing_slots <= 0 ||
        options_.max_slots_per_transfer <= 0) {
      return absl::InvalidArgumentError(
          "cuda transport: chunk_bytes, staging_buffers, landing_slots and "
          "max_slots_per_transfer must be positive");
    }
    inner_address_ = inner_->address();
    inner_->SetNoticeHandler([this](std::string_view payload) {
      absl::StatusOr<StagedMessage> m = DecodeStagedMessage(payload);
      if (!m.ok()) {
        spdlog::warn("cuda transport: dropped an inner notice: {}", m.status().ToString());
        return;
      }
      Post([this, m = std::move(*m)](bool cancelled) mutable {
        if (!cancelled) OnMessage(std::move(m));
      });
    });
    thread_ = std::thread([this] { Loop(); });
    return absl::OkStatus();
  }

  // Stops the thread, fails what is pending, shuts the inner transport down, waits for copies.
  void Shutdown() {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
    stopping_ = true;  // no new work from here on
    RunQueued(/*cancelled=*/true);
    const absl::Status cancelled = absl::CancelledError("cuda transport stopped");
    for (auto& [address, t] : targets_) {
      std::deque<PendingNotice> notices;
      notices.swap(t.notices);
      for (PendingNotice& n : notices) n.done(cancelled);
    }
    for (auto& op : direct_ops_) FinishDirect(*op, cancelled);
    std::vector<std::shared_ptr<StagedSend>> sends;
    for (auto& [id, send] : sends_) sends.push_back(send);
    for (auto& send : sends) FinishSend(send, cancelled, /*return_grants=*/false);
    // The inner transport's callbacks from now on run inline and only report outcomes.
    inner_.reset();
    RunQueued(/*cancelled=*/true);
    copier_->Drain();
    for (auto& [address, t] : targets_) {
      if (t.imported != nullptr) copier_->Close(t.imported);
      t.imported = nullptr;
    }
    if (host_ != nullptr) copier_->FreeHost(host_);
    host_ = nullptr;
  }

  // Queues `task` for the transport's thread; runs task(true) here when it has stopped.
  void Post(Task task) {
    {
      absl::MutexLock lock(&mu_);
      if (!stop_) {
        queue_.push_back(std::move(task));
        return;
      }
    }
    task(true);
  }

  absl::Status RunSync(std::function<absl::Status()> fn) {
    absl::Notification done;
    absl::Status status;
    Post([&](bool cancelled) {
      status = cancelled ? absl::CancelledError("cuda transport stopped") : fn();
      done.Notify();
    });
    done.WaitForNotification();
    return status;
  }

  absl::Status RegisterDevicePool(void* base, size_t bytes, int cuda_device) {
    if (base == nullptr || bytes == 0) return absl::InvalidArgumentError("empty device pool");
    return RunSync([&]() -> absl::Status {
      if (pool_ != nullptr) return absl::FailedPreconditionError("pool already registered");
      absl::Status s = copier_->CheckPool(base, bytes, cuda_device);
      if (!s.ok()) return s;
      const size_t staging_bytes = options_.chunk_bytes * options_.staging_buffers;
      const size_t landing_bytes = options_.chunk_bytes * options_.landing_slots;
      absl::StatusOr<void*> host = copier_->AllocateHost(staging_bytes + landing_bytes);
      if (!host.ok()) return host.status();
      s = inner_->RegisterPool(*host, staging_bytes + landing_bytes);
      if (!s.ok()) {
        copier_->FreeHost(*host);
        return s;
      }
      host_ = static_cast<char*>(*host);
      staging_bytes_ = staging_bytes;
      staging_free_.assign(options_.staging_buffers, true);
      DevicePoolDescriptor d;
      d.pool_bytes = bytes;
      d.host_id = host_id_;
      d.device_id = copier_->device_id();
      absl::StatusOr<std::string> handle = copier_->Export(base, bytes);
      if (handle.ok()) {
        d.export_handle = *handle;
      } else {
        spdlog::info(
            "cuda transport: pool not shared with same-host peers ({}); they use the "
            "staged path",
            handle.status().ToString());
      }
      d.inner_remote_key = inner_->pool_remote_key();
      d.landing_base = inner_->pool_base() + staging_bytes;
      d.slot_bytes = options_.chunk_bytes;
      d.num_slots = static_cast<uint32_t>(options_.landing_slots);
      pool_ = static_cast<char*>(base);
      pool_bytes_ = bytes;
      absl::MutexLock lock(&info_mu_);
      descriptor_ = EncodeDevicePoolDescriptor(d);
      pool_base_ = reinterpret_cast<uintptr_t>(base);
      return absl::OkStatus();
    });
  }

  std::string address() const { return inner_address_; }
  uint64_t incarnation() const { return inner_incarnation_; }
  std::string pool_remote_key() const {
    absl::MutexLock lock(&info_mu_);
    return descriptor_;
  }
  uint64_t pool_base() const {
    absl::MutexLock lock(&info_mu_);
    return pool_base_;
  }
  void SetNoticeHandler(NoticeHandler handler) {
    absl::MutexLock lock(&info_mu_);
    handler_ = std::move(handler);
  }
  CudaKvTransportStats stats() const {
    absl::MutexLock lock(&info_mu_);
    return stats_;
  }

  void Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
             TransferDone done) {
    Post([this, target, copies = std::move(copies), deadline,
          done = std::move(done)](bool cancelled) mutable {
      if (cancelled) {
        done(absl::CancelledError("cuda transport stopped"));
        return;
      }
      StartWrite(target, std::move(copies), deadline, std::move(done));
    });
  }

  void Notify(const KvTarget& target, std::string payload, absl::Time deadline, TransferDone done) {
    Post([this, target, payload = std::move(payload), deadline,
          done = std::move(done)](bool cancelled) mutable {
      if (cancelled) {
        done(absl::CancelledError("cuda transport stopped"));
        return;
      }
      StartNotify(target, std::move(payload), deadline, std::move(done));
    });
  }

  void set_inner_incarnation(uint64_t v) { inner_incarnation_ = v; }

 private:
  enum class Path { kUndecided, kDirect, kStaged };

  struct PendingNotice {
    uint64_t barrier = 0;  // waits for every write to the target numbered <= barrier
    std::string payload;
    absl::Time deadline;
    TransferDone done;
  };

  // What this writer knows about one owner (by its inner address).
  struct Target {
    std::string address;
    std::string tag;
    std::string remote_key;  // the descriptor it was decided with
    DevicePoolDescriptor descriptor;
    Path path = Path::kUndecided;
    void* imported = nullptr;  // direct path: the owner's pool mapped here
    int copies_in_flight = 0;  // direct fences not passed yet (the mapping must stay)
    absl::Time last_used;
    uint64_t last_write = 0;         // number of the latest write to this target
    std::set<uint64_t> open_writes;  // writes whose `done` has not run
    std::deque<PendingNotice> notices;
  };

  struct DirectOp {
    uint64_t number = 0;
    Target* target = nullptr;
    uint64_t fence = 0;
    absl::Time deadline;
    TransferDone done;
    absl::Status status;  // an error queuing the copies
    bool finished = false;
  };

  // One staged Write on the writer.
  struct StagedSend {
    uint64_t transfer = 0;
    uint64_t number = 0;
    Target* target = nullptr;
    KvTarget inner_target;  // the owner's landing region through the inner transport
    std::vector<StagedChunk> chunks;
    size_t next_stage = 0;  // next chunk to copy into a staging buffer
    size_t staging = 0;     // chunks being copied into staging buffers
    struct Ready {
      size_t chunk;
      int buffer;
    };
    std::deque<Ready> ready;       // staged, waiting for a grant
    std::deque<SlotGrant> grants;  // granted, not used yet
    size_t acknowledged = 0;
    absl::Time deadline;
    TransferDone done;
    bool finished = false;
  };

  struct StageFence {
    uint64_t fence;
    std::shared_ptr<StagedSend> send;
    size_t chunk;
    int buffer;
  };

  // An owner-side copy of a landing slot into the pool.
  struct FillFence {
    uint64_t fence;
    uint32_t slot;
    uint64_t writer_id;
    std::string reply_address;
    uint64_t transfer;
  };

  // ---- the transport's thread ----

  void Loop() {
    while (true) {
      std::deque<Task> tasks;
      {
        absl::MutexLock lock(&mu_);
        const bool polling = HasFences();
        const absl::Duration wait =
            polling ? options_.poll_interval : std::min(absl::Milliseconds(100), UntilNextTimer());
        auto ready = [this] { return stop_ || !queue_.empty(); };
        mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
        if (stop_) return;
        tasks.swap(queue_);
      }
      for (Task& t : tasks) t(false);
      PollFences();
      CheckTimers(options_.clock->Now());
    }
  }

  void RunQueued(bool cancelled) {
    while (true) {
      std::deque<Task> tasks;
      {
        absl::MutexLock lock(&mu_);
        tasks.swap(queue_);
      }
      if (tasks.empty()) return;
      for (Task& t : tasks) t(cancelled);
    }
  }

  bool HasFences() const {
    return !direct_ops_.empty() || !stage_fences_.empty() || !fill_fences_.empty();
  }

  absl::Duration UntilNextTimer() const {
    // Deadlines are checked at least every 100 ms; sooner only matters for tests with tiny
    // deadlines, which poll anyway while copies are in flight.
    absl::Time next = absl::InfiniteFuture();
    const absl::Time now = options_.clock->Now();
    for (const auto& [id, s] : sends_) next = std::min(next, s->deadline);
    for (const auto& [address, t] : targets_) {
      for (const PendingNotice& n : t.notices) next = std::min(next, n.deadline);
    }
    if (!slots_empty_) next = std::min(next, now + absl::Milliseconds(100));
    return std::max(absl::ZeroDuration(), next - now);
  }

  void Count(std::function<void(CudaKvTransportStats&)> fn) {
    absl::MutexLock lock(&info_mu_);
    fn(stats_);
  }

  // ---- writer ----

  // The target for `t`'s address, deciding its path on first use (or when its key changed).
  absl::StatusOr<Target*> GetTarget(const KvTarget& kt) {
    if (kt.address.empty()) return absl::InvalidArgumentError("cuda transport: empty address");
    Target& t = targets_[kt.address];
    t.last_used = options_.clock->Now();
    if (t.address.empty()) {
      t.address = kt.address;
      t.tag = PeerTag(kt.address);
    }
    if (t.path != Path::kUndecided && t.remote_key == kt.remote_key) return &t;
    absl::StatusOr<DevicePoolDescriptor> d = DecodeDevicePoolDescriptor(kt.remote_key);
    if (!d.ok()) return d.status();
    if (t.imported != nullptr && t.copies_in_flight == 0) {
      copier_->Close(t.imported);
      t.imported = nullptr;
      Count([](CudaKvTransportStats& s) { ++s.imports_closed; });
    }
    t.descriptor = *d;
    t.remote_key = kt.remote_key;
    t.path = Path::kStaged;
    if (options_.allow_direct && d->host_id == host_id_ && !d->export_handle.empty() &&
        t.imported == nullptr) {
      absl::StatusOr<void*> p = copier_->Import(d->export_handle, d->pool_bytes);
      if (p.ok()) {
        t.imported = *p;
        t.path = Path::kDirect;
        Count([](CudaKvTransportStats& s) { ++s.imports_opened; });
        spdlog::info("cuda transport: writing {} directly (same host, its device {})", t.tag,
                     absl::BytesToHexString(d->device_id));
      } else {
        Count([](CudaKvTransportStats& s) { ++s.import_failures; });
        spdlog::warn(
            "cuda transport: {} is on this host but its pool cannot be opened here ({}); "
            "using the staged path",
            t.tag, p.status().ToString());
      }
    }
    if (t.path == Path::kStaged && (d->num_slots == 0 || d->inner_remote_key.empty())) {
      return absl::FailedPreconditionError(absl::StrCat("cuda transport: ", t.tag,
                                                        " cannot be written directly and has no "
                                                        "landing slots for the staged path"));
    }
    return &t;
  }

  void StartWrite(const KvTarget& kt, std::vector<KvCopy> copies, absl::Time deadline,
                  TransferDone done) {
    if (pool_ == nullptr) {
      done(absl::FailedPreconditionError("cuda transport write: no pool registered"));
      return;
    }
    absl::StatusOr<Target*> target = GetTarget(kt);
    if (!target.ok()) {
      done(target.status());
      return;
    }
    Target* t = *target;
    absl::Status s =
        CheckCopyBounds(copies, pool_bytes_, t->descriptor.pool_bytes, "cuda transport write");
    if (!s.ok()) {
      done(s);
      return;
    }
    if (options_.clock->Now() >= deadline) {
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
    const uint64_t number = ++t->last_write;
    t->open_writes.insert(number);
    if (t->path == Path::kDirect) {
      StartDirect(t, number, copies, deadline, std::move(done));
      Count([bytes](CudaKvTransportStats& s) {
        ++s.direct_writes;
        s.direct_bytes += static_cast<int64_t>(bytes);
      });
    } else {
      StartStaged(t, number, copies, deadline, std::move(done));
      Count([bytes](CudaKvTransportStats& s) {
        ++s.staged_writes;
        s.staged_bytes += static_cast<int64_t>(bytes);
      });
    }
  }

  void StartDirect(Target* t, uint64_t number, const std::vector<KvCopy>& copies,
                   absl::Time deadline, TransferDone done) {
    auto op = std::make_unique<DirectOp>();
    op->number = number;
    op->target = t;
    op->deadline = deadline;
    op->done = std::move(done);
    char* dst = static_cast<char*>(t->imported);
    for (const KvCopy& c : copies) {
      op->status = copier_->Copy(dst + c.dst_offset, pool_ + c.src_offset, c.bytes);
      if (!op->status.ok()) break;
    }
    // A fence even after an error: copies queued before it may run.
    absl::StatusOr<uint64_t> fence = copier_->Fence();
    if (!fence.ok()) {
      // Nothing to wait for that we can see; report now.
      WriteEnded(t, number);
      op->done(fence.status());
      return;
    }
    op->fence = *fence;
    ++t->copies_in_flight;
    direct_ops_.push_back(std::move(op));
  }

  void FinishDirect(DirectOp& op, const absl::Status& status) {
    if (op.finished) return;
    op.finished = true;
    TransferDone done = std::move(op.done);
    WriteEnded(op.target, op.number);
    done(status);
  }

  void StartStaged(Target* t, uint64_t number, const std::vector<KvCopy>& copies,
                   absl::Time deadline, TransferDone done) {
    auto send = std::make_shared<StagedSend>();
    send->transfer = next_transfer_++;
    send->number = number;
    send->target = t;
    send->inner_target.address = t->address;
    send->inner_target.remote_key = t->descriptor.inner_remote_key;
    send->inner_target.remote_base = t->descriptor.landing_base;
    send->chunks = PlanStagedChunks(
        copies, std::min<uint64_t>(options_.chunk_bytes, t->descriptor.slot_bytes));
    send->deadline = deadline;
    send->done = std::move(done);
    sends_[send->transfer] = send;
    StagedMessage request;
    request.type = StagedMessageType::kRequest;
    request.transfer = send->transfer;
    request.chunks = static_cast<uint32_t>(send->chunks.size());
    request.time_left_ms = ToMillisCeil(deadline - options_.clock->Now());
    SendToOwner(send, std::move(request));
    PumpStaging();
  }

  // Sends a writer-to-owner message for `send`; a failure fails the send.
  void SendToOwner(const std::shared_ptr<StagedSend>& send, StagedMessage m) {
    m.writer_id = writer_id_;
    m.reply_address = inner_address_;
    std::weak_ptr<StagedSend> weak = send;
    inner_->Notify(send->inner_target, EncodeStagedMessage(m), send->deadline,
                   [this, weak, type = m.type](absl::Status s) {
                     if (s.ok()) return;
                     Post([this, weak, type, s](bool cancelled) {
                       std::shared_ptr<StagedSend> send = weak.lock();
                       if (cancelled || send == nullptr) return;
                       FinishSend(send,
                                  absl::Status(s.code(), absl::StrCat("cuda transport: sending a ",
                                                                      StagedMessageTypeName(type),
                                                                      " message: ", s.message())),
                                  /*return_grants=*/true);
                     });
                   });
  }

  // Starts device-to-host copies into free staging buffers, one chunk per send per round, for
  // sends holding a grant no staged chunk has claimed yet. Staging only against grants keeps the
  // two resources from deadlocking: a staging buffer never waits for a landing slot.
  void PumpStaging() {
    if (stopping_) return;
    bool progress = true;
    while (progress) {
      progress = false;
      for (auto& [id, send] : sends_) {
        if (send->finished || send->next_stage >= send->chunks.size()) continue;
        if (send->staging + send->ready.size() >= send->grants.size()) continue;
        const int buffer = TakeStagingBuffer();
        if (buffer < 0) return;
        const size_t index = send->next_stage++;
        const StagedChunk& chunk = send->chunks[index];
        char* dst = host_ + static_cast<size_t>(buffer) * options_.chunk_bytes;
        absl::Status s;
        uint64_t at = 0;
        for (const KvCopy& piece : chunk.pieces) {
          s = copier_->Copy(dst + at, pool_ + piece.src_offset, piece.bytes);
          if (!s.ok()) break;
          at += piece.bytes;
        }
        absl::StatusOr<uint64_t> fence = copier_->Fence();
        if (!fence.ok() && s.ok()) s = fence.status();
        if (!fence.ok()) {
          staging_free_[buffer] = true;  // no fence: nothing we queued can be waited for
          FinishSend(send, s, /*return_grants=*/true);
          return;  // sends_ changed
        }
        ++send->staging;
        stage_fences_.push_back({*fence, send, index, buffer});
        if (!s.ok()) stage_errors_[*fence] = s;
        progress = true;
      }
    }
  }

  int TakeStagingBuffer() {
    for (size_t i = 0; i < staging_free_.size(); ++i) {
      if (staging_free_[i]) {
        staging_free_[i] = false;
        return static_cast<int>(i);
      }
    }
    return -1;
  }

  void FreeStagingBuffer(int buffer) {
    staging_free_[buffer] = true;
    PumpStaging();
  }

  // A chunk finished staging.
  void OnStaged(const StageFence& f, const absl::Status& status) {
    StagedSend& send = *f.send;
    --send.staging;
    if (!status.ok() || send.finished) {
      if (!send.finished) FinishSend(f.send, status, /*return_grants=*/true);
      FreeStagingBuffer(f.buffer);
      return;
    }
    send.ready.push_back({f.chunk, f.buffer});
    SendReadyChunks(f.send);
  }

  // Puts staged chunks into granted slots and tells the owner.
  void SendReadyChunks(const std::shared_ptr<StagedSend>& send) {
    while (!send->finished && !send->ready.empty() && !send->grants.empty()) {
      const StagedSend::Ready ready = send->ready.front();
      send->ready.pop_front();
      const SlotGrant grant = send->grants.front();
      send->grants.pop_front();
      const StagedChunk& chunk = send->chunks[ready.chunk];
      const KvCopy put{static_cast<uint64_t>(ready.buffer) * options_.chunk_bytes,
                       static_cast<uint64_t>(grant.slot) * send->target->descriptor.slot_bytes,
                       chunk.bytes};
      std::weak_ptr<StagedSend> weak = send;
      const int buffer = ready.buffer;
      inner_->Write(
          send->inner_target, {put}, send->deadline, [this, weak, buffer](absl::Status s) {
            Post([this, weak, buffer, s](bool cancelled) {
              if (cancelled) return;
              // The put no longer reads the buffer.
              std::shared_ptr<StagedSend> send = weak.lock();
              if (!s.ok() && send != nullptr) {
                FinishSend(
                    send,
                    absl::Status(s.code(), absl::StrCat("cuda transport: put: ", s.message())),
                    /*return_grants=*/true);
              }
              FreeStagingBuffer(buffer);
            });
          });
      StagedMessage m;
      m.type = StagedMessageType::kChunk;
      m.transfer = send->transfer;
      m.grants = {grant};
      for (const KvCopy& piece : chunk.pieces)
        m.segments.push_back({piece.dst_offset, piece.bytes});
      SendToOwner(send, std::move(m));
      Count([](CudaKvTransportStats& s) { ++s.chunks_sent; });
    }
  }

  // Ends a staged send once: reports, gives unused grants back, frees staged buffers.
  void FinishSend(const std::shared_ptr<StagedSend>& send, const absl::Status& status,
                  bool return_grants) {
    if (send->finished) return;
    send->finished = true;
    sends_.erase(send->transfer);
    if (return_grants) {
      for (const SlotGrant& g : send->grants) ReturnGrant(send->inner_target, g);
    }
    send->grants.clear();
    std::deque<StagedSend::Ready> ready;
    ready.swap(send->ready);
    TransferDone done = std::move(send->done);
    WriteEnded(send->target, send->number);
    done(status);
    for (const StagedSend::Ready& r : ready) staging_free_[r.buffer] = true;
    if (!ready.empty()) PumpStaging();
  }

  void ReturnGrant(const KvTarget& inner_target, const SlotGrant& g) {
    if (stopping_) return;
    StagedMessage m;
    m.type = StagedMessageType::kReturn;
    m.writer_id = writer_id_;
    m.reply_address = inner_address_;
    m.grants = {g};
    inner_->Notify(inner_target, EncodeStagedMessage(m),
                   options_.clock->Now() + options_.control_timeout,
                   [](absl::Status) {});  // best effort: the owner takes it back at expiry
  }

  void OnGrant(const StagedMessage& m) {
    auto it = sends_.find(m.transfer);
    if (it == sends_.end()) {
      // The send ended: give the slots back.
      KvTarget owner;
      owner.address = m.reply_address;
      auto t = targets_.find(m.reply_address);
      if (t != targets_.end()) {
        owner.remote_key = t->second.descriptor.inner_remote_key;
        owner.remote_base = t->second.descriptor.landing_base;
      }
      for (const SlotGrant& g : m.grants) ReturnGrant(owner, g);
      return;
    }
    std::shared_ptr<StagedSend> send = it->second;
    for (const SlotGrant& g : m.grants) send->grants.push_back(g);
    SendReadyChunks(send);
    PumpStaging();
  }

  void OnChunkDone(const StagedMessage& m) {
    auto it = sends_.find(m.transfer);
    if (it == sends_.end()) return;  // ended already
    std::shared_ptr<StagedSend> send = it->second;
    if (!m.status.ok()) {
      FinishSend(
          send,
          absl::Status(m.status.code(), absl::StrCat("cuda transport: the owner refused a chunk: ",
                                                     m.status.message())),
          /*return_grants=*/true);
      return;
    }
    if (++send->acknowledged == send->chunks.size()) {
      FinishSend(send, absl::OkStatus(), /*return_grants=*/true);
    }
  }

  // A write to `t` ended (done ran or is about to): notices waiting for it may go.
  void WriteEnded(Target* t, uint64_t number) {
    t->open_writes.erase(number);
    SendNotices(t);
  }

  void StartNotify(const KvTarget& kt, std::string payload, absl::Time deadline,
                   TransferDone done) {
    if (kt.address.empty()) {
      done(absl::InvalidArgumentError("cuda transport notice: empty address"));
      return;
    }
    Target& t = targets_[kt.address];
    if (t.address.empty()) {
      t.address = kt.address;
      t.tag = PeerTag(kt.address);
    }
    t.last_used = options_.clock->Now();
    t.notices.push_back(PendingNotice{t.last_write, std::move(payload), deadline, std::move(done)});
    SendNotices(&t);
  }

  // Sends the target's notices, in order, whose earlier writes have all ended.
  void SendNotices(Target* t) {
    while (!t->notices.empty() && !stopping_) {
      PendingNotice& n = t->notices.front();
      if (!t->open_writes.empty() && *t->open_writes.begin() <= n.barrier) return;
      StagedMessage m;
      m.type = StagedMessageType::kNotice;
      m.writer_id = writer_id_;
      m.reply_address = inner_address_;
      m.payload = std::move(n.payload);
      KvTarget owner;
      owner.address = t->address;
      owner.remote_key = t->descriptor.inner_remote_key;
      owner.remote_base = t->descriptor.landing_base;
      auto done = std::make_shared<TransferDone>(std::move(n.done));
      inner_->Notify(owner, EncodeStagedMessage(m), n.deadline, [this, done](absl::Status s) {
        // Reports the inner outcome, also when the transport is stopping.
        Post([done, s](bool) { (*done)(s); });
      });
      t->notices.pop_front();
    }
  }

  // ---- owner ----

  void OnMessage(StagedMessage m) {
    switch (m.type) {
      case StagedMessageType::kRequest:
        OnRequest(m);
        break;
      case StagedMessageType::kChunk:
        OnChunk(m);
        break;
      case StagedMessageType::kReturn:
        for (const SlotGrant& g : m.grants) slots_.Return(m.writer_id, g);
        GrantSlots();
        break;
      case StagedMessageType::kNotice:
        Deliver(m.payload);
        break;
      case StagedMessageType::kGrant:
        OnGrant(m);
        break;
      case StagedMessageType::kChunkDone:
        OnChunkDone(m);
        break;
    }
  }

  void Deliver(const std::string& payload) {
    NoticeHandler handler;
    {
      absl::MutexLock lock(&info_mu_);
      handler = handler_;
      ++stats_.notices_delivered;
    }
    if (handler) {
      handler(payload);
    } else {
      spdlog::warn("cuda transport: notice of {} bytes dropped: no handler", payload.size());
    }
  }

  void OnRequest(const StagedMessage& m) {
    if (host_ == nullptr) {
      ReplyChunkDone(m.reply_address, m.transfer, 0,
                     absl::FailedPreconditionError("cuda transport owner: no pool registered"));
      return;
    }
    const absl::Time expires = options_.clock->Now() +
                               absl::Milliseconds(std::max<int64_t>(0, m.time_left_ms)) +
                               options_.grant_grace;
    slots_.AddDemand(m.writer_id, m.reply_address, m.transfer, m.chunks, expires);
    slots_empty_ = false;
    GrantSlots();
  }

  void GrantSlots() {
    for (LandingSlots::GrantBatch& b : slots_.Grant()) {
      StagedMessage g;
      g.type = StagedMessageType::kGrant;
      g.transfer = b.transfer;
      g.grants = std::move(b.grants);
      SendToWriter(b.reply_address, std::move(g));
    }
    slots_empty_ = slots_.transfers() == 0;
  }

  void SendToWriter(const std::string& address, StagedMessage m) {
    if (stopping_) return;
    m.writer_id = writer_id_;
    m.reply_address = inner_address_;  // the owner's, for returning grants
    KvTarget writer;
    writer.address = address;
    const std::string type = StagedMessageTypeName(m.type);
    inner_->Notify(writer, EncodeStagedMessage(m), options_.clock->Now() + options_.control_timeout,
                   [tag = PeerTag(address), type](absl::Status s) {
                     if (!s.ok()) {
                       // The writer's own deadline fails its transfer; slots come back at expiry.
                       spdlog::warn("cuda transport: {} to writer {} failed: {}", type, tag,
                                    s.ToString());
                     }
                   });
  }

  void ReplyChunkDone(const std::string& address, uint64_t transfer, uint32_t slot,
                      absl::Status status) {
    StagedMessage done;
    done.type = StagedMessageType::kChunkDone;
    done.transfer = transfer;
    done.grants = {SlotGrant{slot, 0}};
    done.status = std::move(status);
    SendToWriter(address, std::move(done));
  }

  void OnChunk(const StagedMessage& m) {
    if (m.grants.size() != 1) {
      ReplyChunkDone(m.reply_address, m.transfer, 0,
                     absl::InvalidArgumentError("chunk message without exactly one slot"));
      return;
    }
    const SlotGrant g = m.grants[0];
    absl::Status s = slots_.BeginFill(m.writer_id, m.transfer, g);
    if (!s.ok()) {
      ReplyChunkDone(m.reply_address, m.transfer, g.slot, s);
      return;
    }
    // Check the segments against the slot and the pool before copying anything.
    uint64_t total = 0;
    for (const StagedSegment& seg : m.segments) {
      if (seg.dst_offset > pool_bytes_ || seg.bytes > pool_bytes_ - seg.dst_offset) {
        s = absl::InvalidArgumentError(absl::StrCat("chunk segment [", seg.dst_offset, ", +",
                                                    seg.bytes, ") is outside the ", pool_bytes_,
                                                    "-byte pool"));
        break;
      }
      total += seg.bytes;
      if (total > options_.chunk_bytes) {
        s = absl::InvalidArgumentError(
            absl::StrCat("chunk of more than ", options_.chunk_bytes, " bytes"));
        break;
      }
    }
    const char* slot = host_ + staging_bytes_ + static_cast<size_t>(g.slot) * options_.chunk_bytes;
    uint64_t at = 0;
    for (size_t i = 0; s.ok() && i < m.segments.size(); ++i) {
      s = copier_->Copy(pool_ + m.segments[i].dst_offset, slot + at, m.segments[i].bytes);
      at += m.segments[i].bytes;
    }
    absl::StatusOr<uint64_t> fence = copier_->Fence();
    if (!fence.ok()) {
      // No way to know when the copies end: keep the slot out of use.
      spdlog::error("cuda transport: landing slot {} lost: {}", g.slot, fence.status().ToString());
      ReplyChunkDone(m.reply_address, m.transfer, g.slot, fence.status());
      return;
    }
    fill_fences_.push_back({*fence, g.slot, m.writer_id, m.reply_address, m.transfer});
    if (!s.ok()) fill_errors_[*fence] = s;
    Count([](CudaKvTransportStats& st) { ++st.chunks_received; });
  }

  void OnFilled(const FillFence& f, const absl::Status& status) {
    ReplyChunkDone(f.reply_address, f.transfer, f.slot, status);
    slots_.Release(f.slot);
    GrantSlots();
  }

  // ---- fences and timers ----

  void PollFences() {
    // Direct writes.
    for (size_t i = 0; i < direct_ops_.size();) {
      DirectOp& op = *direct_ops_[i];
      absl::StatusOr<bool> r = copier_->Poll(op.fence);
      if (r.ok() && !*r) {
        ++i;
        continue;
      }
      absl::Status s = r.ok() ? op.status : r.status();
      Target* t = op.target;
      --t->copies_in_flight;
      t->last_used = options_.clock->Now();
      FinishDirect(op, s);
      direct_ops_.erase(direct_ops_.begin() + static_cast<ptrdiff_t>(i));
    }
    // Staging copies.
    for (size_t i = 0; i < stage_fences_.size();) {
      absl::StatusOr<bool> r = copier_->Poll(stage_fences_[i].fence);
      if (r.ok() && !*r) {
        ++i;
        continue;
      }
      StageFence f = std::move(stage_fences_[i]);
      stage_fences_.erase(stage_fences_.begin() + static_cast<ptrdiff_t>(i));
      absl::Status s = r.status();
      if (auto e = stage_errors_.find(f.fence); e != stage_errors_.end()) {
        if (s.ok()) s = e->second;
        stage_errors_.erase(e);
      }
      OnStaged(f, s);  // may append fences; `i` now names the next one
    }
    // Landing slots into the pool.
    for (size_t i = 0; i < fill_fences_.size();) {
      absl::StatusOr<bool> r = copier_->Poll(fill_fences_[i].fence);
      if (r.ok() && !*r) {
        ++i;
        continue;
      }
      FillFence f = std::move(fill_fences_[i]);
      fill_fences_.erase(fill_fences_.begin() + static_cast<ptrdiff_t>(i));
      absl::Status s = r.status();
      if (auto e = fill_errors_.find(f.fence); e != fill_errors_.end()) {
        if (s.ok()) s = e->second;
        fill_errors_.erase(e);
      }
      OnFilled(f, s);
    }
  }

  void CheckTimers(absl::Time now) {
    for (auto& op : direct_ops_) {
      if (!op->finished && now >= op->deadline) {
        // The copy keeps running on the device; its fence is still polled before the mapping
        // may close.
        FinishDirect(*op, absl::DeadlineExceededError(absl::StrCat(
                              "cuda transport: direct write to ", op->target->tag,
                              " ran past its deadline (the device copy finishes regardless)")));
      }
    }
    std::vector<std::shared_ptr<StagedSend>> expired;
    for (auto& [id, send] : sends_) {
      if (now >= send->deadline) expired.push_back(send);
    }
    for (auto& send : expired) {
      FinishSend(
          send,
          absl::DeadlineExceededError(absl::StrCat("cuda transport: staged write to ",
                                                   send->target->tag, " ran past its deadline")),
          /*return_grants=*/true);
    }
    for (auto& [address, t] : targets_) {
      while (!t.notices.empty() && now >= t.notices.front().deadline) {
        TransferDone done = std::move(t.notices.front().done);
        t.notices.pop_front();
        done(absl::DeadlineExceededError(absl::StrCat(
            "cuda transport: notice to ", t.tag, " ran past its deadline waiting for writes")));
      }
    }
    if (!slots_empty_) {
      const int taken = slots_.Expire(now);
      if (taken > 0) {
        spdlog::warn("cuda transport: took back {} landing slots unfilled past their deadline",
                     taken);
        Count([taken](CudaKvTransportStats& s) { s.grants_reclaimed += taken; });
        GrantSlots();
      }
      slots_empty_ = slots_.transfers() == 0;
    }
    // Close pools of targets idle for long; forget idle targets.
    for (auto it = targets_.begin(); it != targets_.end();) {
      Target& t = it->second;
      const bool idle = t.copies_in_flight == 0 && t.open_writes.empty() && t.notices.empty() &&
                        now - t.last_used >= options_.import_idle_close;
      if (!idle) {
        ++it;
        continue;
      }
      if (t.imported != nullptr) {
        copier_->Close(t.imported);
        Count([](CudaKvTransportStats& s) { ++s.imports_closed; });
      }
      targets_.erase(it++);
    }
  }

  const CudaKvTransportOptions options_;
  std::unique_ptr<KvTransport> inner_;
  std::unique_ptr<MemoryCopier> copier_;
  const uint64_t writer_id_;
  const std::string host_id_;
  std::string inner_address_;       // set by Start, read-only after
  uint64_t inner_incarnation_ = 0;  // likewise
  std::thread thread_;

  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  mutable absl::Mutex info_mu_;
  std::string descriptor_ ABSL_GUARDED_BY(info_mu_);
  uint64_t pool_base_ ABSL_GUARDED_BY(info_mu_) = 0;
  NoticeHandler handler_ ABSL_GUARDED_BY(info_mu_);
  CudaKvTransportStats stats_ ABSL_GUARDED_BY(info_mu_);

  // The transport's thread only.
  bool stopping_ = false;
  char* pool_ = nullptr;
  size_t pool_bytes_ = 0;
  char* host_ = nullptr;      // staging buffers, then landing slots
  size_t staging_bytes_ = 0;  // where the landing slots start in host_
  std::vector<bool> staging_free_;
  std::map<std::string, Target> targets_;  // by inner address; stable element addresses
  std::vector<std::unique_ptr<DirectOp>> direct_ops_;
  std::map<uint64_t, std::shared_ptr<StagedSend>> sends_;  // by transfer, unfinished only
  uint64_t next_transfer_ = 1;
  std::vector<StageFence> stage_fences_;
  std::map<uint64_t, absl::Status> stage_errors_;  // fence -> error queuing its copies
  LandingSlots slots_;
  bool slots_empty_ = true;  // no transfer holds or wants slots
  std::vector<FillFence> fill_fences_;
  std::map<uint64_t, absl::Status> fill_errors_;
};

absl::StatusOr<std::unique_ptr<CudaKvTransport>> CudaKvTransport::Create(
    std::unique_ptr<KvTransport> inner, std::unique_ptr<MemoryCopier> copier,
    CudaKvTransportOptions options) {
  if (inner == nullptr || copier == nullptr) {
    return absl::InvalidArgumentError("cuda transport: needs an inner transport and a copier");
  }
  const uint64_t incarnation = inner->incarnation();
  auto impl = std::make_unique<Impl>(std::move(inner), std::move(copier), std::move(options));
  impl->set_inner_incarnation(incarnation);
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
