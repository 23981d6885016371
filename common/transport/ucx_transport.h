// KvTransport over UCX (UCP): RMA put into the owner's registered pool, an active message for the
// notice. Works with any UCX transport the two sides share (tcp, posix/sysv shared memory, ...).
//
// Threading: one UCP context and one worker, owned by one progress thread that makes every UCX
// call. Write/Notify (any thread) append a command to a mutex-protected queue and wake the thread
// through an eventfd; the thread sleeps on that eventfd and the worker's own event fd when idle
// (after spinning `busy_poll` without progress). `done` callbacks and the notice handler run on the
// progress thread.
//
// Endpoints are created from the peer's worker address on first use and cached per address, with
// peer error handling: a dead peer fails its pending operations (and the endpoint leaves the
// cache) instead of hanging. Remote keys are unpacked once per (endpoint, key).
//
// Write = one ucp_put_nbx per copy, then ucp_ep_flush_nbx; `done` runs when the flush completes.
// Notify = flush of the earlier writes to the target, then an active message (eager or rendezvous,
// whichever UCX picks), then a flush; the owner's handler gets the payload.
//
// Deadlines: the progress loop checks them. An operation past its deadline fails with
// DeadlineExceeded. If any of its puts may still read local memory, its endpoint is closed by force
// (failing the other operations on it with Unavailable) so that when `done` runs, nothing reads the
// caller's memory any more.
//
// UCX 1.13's shared-memory transports (posix, sysv) have no peer error handling: endpoints that
// only they reach are created without it (logged once). There a dead or hung peer is noticed only
// at each operation's deadline, and UCX cannot cancel queued puts: the operation fails at its
// deadline anyway and the endpoint is abandoned, but a put UCX still holds may read its source
// later if the peer resumes (the source pool stays mapped until the transport is destroyed; the
// owner must treat blocks of a failed transfer as poisoned, as it must for any failed writer).
//
// Shared memory and the pool: an owner pool from AllocatePool lives in a UCX shared-memory
// segment that same-host writers copy into directly; a pool passed to RegisterPool cannot be
// reached that way, and UCX emulates RMA with active messages that both progress threads copy
// (on a 2-core VM: 2-9 GB/s against 36-41 GB/s, and far less when the CPUs are busy; see
// bench/kv_transfer). tcp does not care.
#ifndef TANDEM_COMMON_TRANSPORT_UCX_TRANSPORT_H_
#define TANDEM_COMMON_TRANSPORT_UCX_TRANSPORT_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"

namespace tandem {

struct UcxTransportOptions {
  // UCX_TLS for this transport ("tcp", "posix,sysv,self", "sm", ...); "" keeps UCX's own
  // configuration (the UCX_TLS environment variable, else UCX's default).
  std::string tls;
  // Further UCP configuration (ucp_config_modify names without the UCX_ prefix, e.g.
  // {"KEEPALIVE_INTERVAL", "1s"}).
  std::map<std::string, std::string> config;
  // How long the progress thread polls without progress before it sleeps on the event fds while
  // operations are in flight. Longer: lower latency, more CPU.
  absl::Duration busy_poll = absl::Microseconds(50);
  // Create endpoints with UCX peer error handling, so a dead peer fails its operations at once.
  // Peers only reachable through transports without it (UCX 1.13's posix/sysv shared memory) get
  // an endpoint without (logged once); there, and with this false, a dead or hung peer is noticed
  // at each operation's deadline. With several transports configured, peer error handling makes
  // UCX prefer those that support it (tcp over shared memory on one host).
  bool peer_error_handling = true;
  // How notices travel. kAuto lets UCX choose (eager for small payloads); the others force a
  // protocol (tests use them to cover both receive paths).
  enum class NoticeProtocol { kAuto, kEager, kRendezvous };
  NoticeProtocol notice_protocol = NoticeProtocol::kAuto;
  // Upper bound on the destructor's wait for endpoints to close.
  absl::Duration shutdown_timeout = absl::Seconds(2);
  // UCP context/worker name (shows up in UCX logs).
  std::string name = "tandem";
  // Test hook (kv_write_corruption.h): the first this many Writes each put one byte flipped. The
  // nodes set it from TANDEM_TEST_CORRUPT_KV_WRITES; nothing else should.
  int64_t test_corrupt_writes = 0;
  // The clock operations' deadlines are read on (borrowed; the callers' deadlines come from the
  // same clock). The progress loop's pacing and the shutdown wait are real time: UCX's I/O is.
  Clock* clock = Clock::Real();
};

class UcxTransport : public KvTransport {
 public:
  // Creates the UCP context and worker on a new progress thread. Errors: UCX could not start (e.g.
  // no usable transport in `tls`).
  static absl::StatusOr<std::unique_ptr<UcxTransport>> Create(UcxTransportOptions options = {});

  // Fails queued and in-flight operations with Cancelled, closes endpoints, unmaps the pool and
  // joins the progress thread.
  ~UcxTransport() override;

  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  std::string_view name() const override { return "ucx"; }
  // Maps `base` with ucp_mem_map and packs its remote key. Blocks until the progress thread did it.
  absl::Status RegisterPool(void* base, size_t bytes) override;
  // Alternative to RegisterPool for an owner: UCX allocates the pool itself (ucp_mem_map with
  // UCP_MEM_MAP_ALLOCATE; UCX_MEM_ALLOC_METHODS decides how, shared-memory segments first by
  // default, else ordinary memory), which lets shared-memory peers write into it directly
  // instead of through active messages. Returns the pool's first byte (zeroed); it lives until
  // the transport is destroyed.
  absl::StatusOr<void*> AllocatePool(size_t bytes) override;

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

  // UCX's description of the endpoint to `address` (its lanes and transports), creating the
  // endpoint if needed. For logs and benchmarks.
  absl::StatusOr<std::string> DescribeEndpoint(const std::string& address);

  class Impl;

 private:
  explicit UcxTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_UCX_TRANSPORT_H_
