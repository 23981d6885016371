// Moves KV bytes from a prefill node's pool into blocks a decode node reserved, and carries the
// small notice that ends a transfer (a serialized tandem.v1.KvCompletion).
//
// Both sides register their pool once. The owner (decode node) publishes address(),
// pool_remote_key() and pool_base() in every KvHandoff, and receives notices through its notice
// handler. The writer (prefill node) calls Write() as chunks of KV become final and Notify() when
// the request is done: a notice is delivered only after every earlier write to the same target has
// completed at the target, so a decode node that sees a completion can read the blocks.
//
// Nothing here blocks the caller: Write() and Notify() queue work and report through `done`,
// exactly once, on the transport's own thread (done callbacks must be quick and must not call back
// into the transport synchronously... except Write/Notify, which only queue). Every operation has a
// deadline: past it, or when the peer is unreachable or dead, `done` gets an error — never a hang.
//
// Implementations: `ucx` (UCP RMA put + active messages; any UCX_TLS: tcp, posix/sysv shared
// memory, ...) and `local` (in-process, for unit tests).
#ifndef TANDEM_COMMON_TRANSPORT_KV_TRANSPORT_H_
#define TANDEM_COMMON_TRANSPORT_KV_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem {

// Where writes go: the owner's registered pool, as published in a KvHandoff.
struct KvTarget {
  std::string address;     // the owner's transport address (UCX: its worker address)
  std::string remote_key;  // the owner's packed remote key for its pool
  uint64_t remote_base = 0;
  uint64_t incarnation = 0;  // the owner's; a restarted owner has a new one
};

// One contiguous write: local pool bytes [src_offset, src_offset + bytes) to the target pool's
// bytes [dst_offset, dst_offset + bytes). Offsets are relative to the pools' first bytes.
struct KvCopy {
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
};

using TransferDone = std::function<void(absl::Status)>;
// Receives each notice's payload on the owner, on the transport's thread.
using NoticeHandler = std::function<void(std::string_view payload)>;

class KvTransport {
 public:
  virtual ~KvTransport() = default;

  virtual std::string_view name() const = 0;
  // Registers this process's KV pool (both roles). Once, before any transfer.
  virtual absl::Status RegisterPool(void* base, size_t bytes) = 0;
  // Instead of RegisterPool: the transport allocates the pool (zeroed, page-aligned, alive until
  // the transport is destroyed) where peers reach it fastest, and registers it. UCX allocates it in
  // shared memory, which same-host peers write directly (tens of GB/s) instead of through UCX's
  // active-message emulation of RMA that memory from elsewhere gets (several times slower, far
  // slower on busy CPUs). The default allocates ordinary memory and calls RegisterPool.
  virtual absl::StatusOr<void*> AllocatePool(size_t bytes);
  // Instead of RegisterPool, for a pool in CUDA device memory on `cuda_device` (the cuda
  // backend's). Transports that cannot move device memory return Unimplemented (the default).
  virtual absl::Status RegisterDevicePool(void* base, size_t bytes, int cuda_device);

  // Owner side: what a KvHandoff carries.
  virtual std::string address() const = 0;
  virtual std::string pool_remote_key() const = 0;
  virtual uint64_t pool_base() const = 0;
  // Random per process start.
  virtual uint64_t incarnation() const = 0;
  // The registered pool's bytes when they are host memory this process reads directly (what the
  // KV block checksums hash, common/handoff/kv_checksum.h); empty for a device pool, or before a
  // pool is registered.
  virtual std::span<const uint8_t> host_pool() const { return {}; }
  // Set once, before traffic.
  virtual void SetNoticeHandler(NoticeHandler handler) = 0;

  // Writer side. Queues `copies` to `target`; `done` runs once, when all of them have completed
  // at the target (or one failed, or `deadline` passed). Bounds are checked against the local pool
  // (InvalidArgument through `done`).
  virtual void Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
                     TransferDone done) = 0;
  // Sends `payload` to the target's notice handler after every earlier Write to that target has
  // completed there. `done` runs once: delivered, or the error.
  virtual void Notify(const KvTarget& target, std::string payload, absl::Time deadline,
                      TransferDone done) = 0;

 private:
  // The default AllocatePool's memory; freed after the derived transport is gone.
  std::unique_ptr<void, void (*)(void*)> owned_pool_{nullptr, &std::free};
};

// A random nonzero 64-bit id: a transport's incarnation (a restarted node has a new one) or a
// writer's id.
uint64_t RandomIncarnation();

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_KV_TRANSPORT_H_
