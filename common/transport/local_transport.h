// An in-process KvTransport for unit tests: transports find each other through a process-wide
// registry keyed by address, writes are memcpy on the writer's worker thread, and notices run the
// target's handler on the target's worker thread.
//
// Ordering and completion follow the KvTransport contract: each transport's operations run one at
// a time in the order they were queued, so a Notify reaches the target only after every earlier
// Write to it has been copied. Write's `done` runs on the writer's worker thread; Notify's `done`
// runs on the target's worker thread right after its handler returned (the notice is delivered by
// then), or on the writer's thread when it failed before reaching the target.
//
// Test hooks: a per-write delay (to exercise deadlines), Pause()/Resume() of the worker (to hold
// writes in flight), an injected error for subsequent writes, and a byte flipped in flight
// (kv_write_corruption.h).
#ifndef TANDEM_COMMON_TRANSPORT_LOCAL_TRANSPORT_H_
#define TANDEM_COMMON_TRANSPORT_LOCAL_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"

namespace tandem {

struct LocalTransportOptions {
  // Each Write waits this long before copying (cut short by its deadline), in real time.
  absl::Duration write_delay = absl::ZeroDuration();
  // The clock operations' deadlines are read on (borrowed; the callers' deadlines come from it).
  Clock* clock = Clock::Real();
};

class LocalTransport : public KvTransport {
 public:
  explicit LocalTransport(LocalTransportOptions options = {});
  // Unregisters, fails queued operations with Cancelled and joins the worker. Once it returns, no
  // other transport writes into this one's pool any more.
  ~LocalTransport() override;

  LocalTransport(const LocalTransport&) = delete;
  LocalTransport& operator=(const LocalTransport&) = delete;

  std::string_view name() const override { return "local"; }
  absl::Status RegisterPool(void* base, size_t bytes) override;
  std::string address() const override;
  std::string pool_remote_key() const override;
  uint64_t pool_base() const override;
  uint64_t incarnation() const override;
  std::span<const uint8_t> host_pool() const override;
  void SetNoticeHandler(NoticeHandler handler) override;
  void Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
             TransferDone done) override;
  void Notify(const KvTarget& target, std::string payload, absl::Time deadline,
              TransferDone done) override;

  // Test hooks.
  // While paused, queued operations wait (deadlines still apply when they resume).
  void Pause();
  void Resume();
  // Writes that start after this fail with `status` (OK clears it).
  void InjectWriteError(absl::Status status);
  // The next `writes` Writes each land with one byte flipped (the source stays intact).
  void CorruptNextWrites(int64_t writes);
  // Operations queued and not yet finished.
  int pending() const;
  // A copy of the registered pool taken while no write is copying into it (writers hold the
  // pool's lock shared; this takes it exclusively), so a test never reads a write half landed.
  std::vector<uint8_t> PoolSnapshot() const;

  struct Endpoint;  // shared with the registry; defined in the .cc

 private:
  std::shared_ptr<Endpoint> endpoint_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_LOCAL_TRANSPORT_H_
