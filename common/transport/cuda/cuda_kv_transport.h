// CudaKvTransport: a KvTransport for KV pools in CUDA device memory, wrapped around an inner
// transport (UCX) that cannot touch device memory (Debian's UCX 1.13 is built without CUDA).
//
// The owner registers its device pool with RegisterDevicePool(); its pool_remote_key() is a
// DevicePoolDescriptor (device_pool_descriptor.h). A writer picks a path per target:
//
//  - Direct (same host): the owner exported its pool (cudaIpcGetMemHandle); the writer opens the
//    handle once per target (cudaIpcOpenMemHandle, cached, closed when idle or on destruction) and
//    copies each Write's coalesced copies device-to-device on its own stream, then records a fence;
//    `done` runs when the fence passed. One GPU shared by a prefill and a decode process is the
//    common case. A handle that cannot be opened (another container, no peer access) falls back to
//    the staged path, logged once per target.
//  - Staged (different hosts): both sides have a pinned host region registered as the inner
//    transport's pool: the writer's ring of staging buffers and the owner's landing slots. The
//    owner grants landing slots on request (kGrant); for each granted slot the writer copies a
//    chunk (chunk_bytes, packed from the Write's copies) device-to-host into a free staging buffer
//    while earlier chunks are on the wire (staging only against a grant in hand, so buffers and
//    slots cannot deadlock), puts it into the slot and tells the owner (kChunk, delivered after the
//    put); the owner copies the slot host-to-device into its pool and answers kChunkDone, freeing
//    the slot for the next grant. `done` runs when every chunk is
//    acknowledged: the data is in the owner's device memory. Protocol: staged_messages.h.
//
// Notify(): waits until every earlier Write to the target has completed (direct: its fence
// passed; staged: every chunk acknowledged), then sends the notice through the inner transport;
// the owner delivers it at once (its data is already in place). `done`: the inner Notify's outcome.
//
// Threads: one thread runs the protocol, every MemoryCopier call and the polling of fences (every
// `poll_interval` while copies are in flight; it sleeps otherwise). Write/Notify/inner callbacks
// only queue work for it. `done` callbacks and the notice handler run on it.
//
// Deadlines: an operation past its deadline fails with DeadlineExceeded. A copy already queued on
// the GPU cannot be cancelled: it runs to the end after `done` reported the failure, reading the
// source blocks and writing the destination for a moment longer. The owner already treats the
// blocks of a failed transfer as poisoned (it must for any failed writer); the writer's own pool
// memory is not freed by the transport, and the mapping and staging buffer stay held until the
// copy really ended. A granted landing slot left unfilled past its transfer's deadline plus
// `grant_grace` is taken back by the owner (a writer that resumes even later could overwrite it:
// the same residual risk as UCX's shared-memory transports, documented in ucx_transport.h).
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/transport/cuda/memory_copier.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"

namespace tandem {

struct CudaKvTransportOptions {
  // Staged path: bytes per chunk (one staging buffer, one landing slot), the writer's staging
  // buffers, the owner's landing slots, and how many slots one transfer may hold at once.
  size_t chunk_bytes = size_t{4} << 20;
  int staging_buffers = 4;
  int landing_slots = 16;
  int max_slots_per_transfer = 8;
  // Write same-host targets directly when both sides can. False: always staged (tests; setups
  // where IPC is unwanted).
  bool allow_direct = true;
  // Deadline of the owner's replies (grants, acknowledgements) through the inner transport.
  absl::Duration control_timeout = absl::Seconds(10);
  // An unfilled landing slot is taken back this long after its transfer's deadline.
  absl::Duration grant_grace = absl::Seconds(5);
  // An opened peer pool unused this long is closed (an open mapping keeps a dead owner's device
  // memory allocated).
  absl::Duration import_idle_close = absl::Seconds(60);
  // How often in-flight copies are polled (real time).
  absl::Duration poll_interval = absl::Microseconds(20);
  // The clock deadlines, grants and idle timers are read on (borrowed; the inner transport and
  // the callers' deadlines should use the same one).
  Clock* clock = Clock::Real();
};

// Counters for tests, logs and metrics.
struct CudaKvTransportStats {
  int64_t direct_writes = 0;
  int64_t direct_bytes = 0;
  int64_t staged_writes = 0;
  int64_t staged_bytes = 0;
  int64_t chunks_sent = 0;      // writer
  int64_t chunks_received = 0;  // owner
  int64_t imports_opened = 0;
  int64_t imports_closed = 0;
  int64_t import_failures = 0;  // fell back to staged
  int64_t grants_reclaimed = 0;
  int64_t notices_delivered = 0;
};

class CudaKvTransport : public KvTransport {
 public:
  // `inner` carries the staged path's data and every message; it must be fresh (the transport
  // registers its host region as the inner pool and installs the inner notice handler). `copier`
  // moves the pool's memory (CudaMemoryCopier on a GPU; HostMemoryCopier in tests).
  static absl::StatusOr<std::unique_ptr<CudaKvTransport>> Create(
      std::unique_ptr<KvTransport> inner, std::unique_ptr<MemoryCopier> copier,
      CudaKvTransportOptions options = {});

  // Fails queued and in-flight operations with Cancelled, shuts the inner transport down, waits
  // for copies on the device to end, and closes opened peer pools.
  ~CudaKvTransport() override;

  CudaKvTransport(const CudaKvTransport&) = delete;
  CudaKvTransport& operator=(const CudaKvTransport&) = delete;

  std::string_view name() const override { return "cuda"; }
  // Unimplemented: this transport moves device pools (RegisterDevicePool).
  absl::Status RegisterPool(void* base, size_t bytes) override;
  // Registers the pool (both roles), allocates the pinned host region (staging buffers and landing
  // slots) and registers it with the inner transport, and exports the pool for same-host peers.
  // The pool must stay allocated until the transport is destroyed (its destructor waits for copies
  // still queued on the device, which may read or write it).
  absl::Status RegisterDevicePool(void* base, size_t bytes, int cuda_device) override;

  // The inner transport's address and incarnation; the descriptor; the device pool's address.
  std::string address() const override;
  std::string pool_remote_key() const override;
  uint64_t pool_base() const override;
  uint64_t incarnation() const override;
  void SetNoticeHandler(NoticeHandler handler) override;
  void Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
             TransferDone done) override;
  void Notify(const KvTarget& target, std::string payload, absl::Time deadline,
              TransferDone done) override;

  CudaKvTransportStats stats() const;

  class Impl;

 private:
  explicit CudaKvTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_H_
