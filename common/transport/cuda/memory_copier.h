// What CudaKvTransport needs from the memory its pools live in, behind one small interface so the
// transport's protocol logic runs the same over a GPU and over plain host memory:
//
//  - copies queued in order and completed asynchronously: Copy() queues, Fence() marks everything
//    queued so far, Poll() says without blocking whether a fence has passed. CUDA: cudaMemcpyAsync
//    on one stream, an event per fence, cudaEventQuery (cuda_memory_copier.h). Host stand-in:
//    memcpy, run when the fence is polled (host_memory_copier.h).
//  - host buffers copies to and from the device are fastest with (pinned).
//  - sharing a pool with another process on the same host: Export() a handle, Import() it in the
//    other process. CUDA: cudaIpcGetMemHandle / cudaIpcOpenMemHandle. Host stand-in: a memfd.
//
// Not thread-safe: CudaKvTransport calls it from its own thread only (Export and the host-buffer
// calls included).
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_MEMORY_COPIER_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_MEMORY_COPIER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem {

class MemoryCopier {
 public:
  virtual ~MemoryCopier() = default;

  // "cuda" or "host" (logs).
  virtual std::string_view kind() const = 0;
  // Which device the copier's pools live on: for CUDA the device's UUID, for the host stand-in a
  // fixed string. Two processes on one host can share a pool when their ids match.
  virtual std::string device_id() const = 0;
  // Checks that a pool the caller registers lives where this copier can copy it (CUDA: memory of
  // this copier's device). InvalidArgument naming what is wrong.
  virtual absl::Status CheckPool(void* base, size_t bytes, int cuda_device) = 0;

  // Queues a copy of `bytes` bytes from `src` to `dst` after every copy queued before it.
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;
  // Marks the copies queued so far; Poll() on the returned fence says when they have all finished.
  virtual absl::StatusOr<uint64_t> Fence() = 0;
  // true: every copy before `fence` has finished (the fence is released: do not poll it again);
  // false: not yet; an error: a copy failed (the fence is released).
  virtual absl::StatusOr<bool> Poll(uint64_t fence) = 0;
  // Blocks until every queued copy has finished (shutdown).
  virtual void Drain() = 0;

  // Host memory for staging, zeroed; freed by FreeHost or with the copier.
  virtual absl::StatusOr<void*> AllocateHost(size_t bytes) = 0;
  virtual void FreeHost(void* p) = 0;

  // A handle another process on this host can Import() to reach the pool at `base` (registered
  // with CheckPool). Unimplemented when the pool cannot be shared.
  virtual absl::StatusOr<std::string> Export(void* base, size_t bytes) = 0;
  // Maps a pool another process exported; valid until Close(). Errors when it cannot be opened
  // here (another host, a container boundary, ...).
  virtual absl::StatusOr<void*> Import(std::string_view handle, size_t bytes) = 0;
  virtual void Close(void* imported) = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_MEMORY_COPIER_H_
