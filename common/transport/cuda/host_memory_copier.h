// A MemoryCopier over plain host memory: host memory stands in for device memory, so
// CudaKvTransport's protocols (the same-host direct path and the staged path) run end to end on a
// machine without a GPU, in tests and in CI.
//
// Copies behave like a stream's: Copy() only queues, and the queued copies run (memcpy, in order)
// when Poll() finds their fence due, `copy_latency` after Fence() — so a protocol that reads a
// destination or reuses a source before its fence passed sees wrong bytes, as it would on a GPU.
//
// Sharing across processes: SharedHostPool allocates a pool in a memfd; Export() of such a pool
// names the memfd through /proc/PID/fd, and Import() in another process on the host maps it — the
// stand-in for cudaIpcGetMemHandle/cudaIpcOpenMemHandle. Pools from elsewhere cannot be exported.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_HOST_MEMORY_COPIER_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_HOST_MEMORY_COPIER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/transport/cuda/memory_copier.h"
#include "common/util/clock.h"

namespace tandem {

// A zeroed pool in a memfd, mapped shared; HostMemoryCopier can Export() it. Unmapped on
// destruction.
class SharedHostPool {
 public:
  static absl::StatusOr<std::unique_ptr<SharedHostPool>> Create(size_t bytes);
  ~SharedHostPool();
  SharedHostPool(const SharedHostPool&) = delete;
  SharedHostPool& operator=(const SharedHostPool&) = delete;

  char* data() const { return data_; }
  size_t size() const { return bytes_; }
  int fd() const { return fd_; }

 private:
  SharedHostPool(char* data, size_t bytes, int fd) : data_(data), bytes_(bytes), fd_(fd) {}
  char* data_;
  size_t bytes_;
  int fd_;
};

struct HostMemoryCopierOptions {
  // How long after Fence() its copies run and Poll() reports them done, on `clock`.
  absl::Duration copy_latency = absl::ZeroDuration();
  Clock* clock = Clock::Real();  // borrowed
};

class HostMemoryCopier : public MemoryCopier {
 public:
  explicit HostMemoryCopier(HostMemoryCopierOptions options = {});
  ~HostMemoryCopier() override;

  std::string_view kind() const override { return "host"; }
  std::string device_id() const override { return "host-memory"; }
  absl::Status CheckPool(void* base, size_t bytes, int cuda_device) override;
  absl::Status Copy(void* dst, const void* src, size_t bytes) override;
  absl::StatusOr<uint64_t> Fence() override;
  absl::StatusOr<bool> Poll(uint64_t fence) override;
  void Drain() override;
  absl::StatusOr<void*> AllocateHost(size_t bytes) override;
  void FreeHost(void* p) override;
  absl::StatusOr<std::string> Export(void* base, size_t bytes) override;
  absl::StatusOr<void*> Import(std::string_view handle, size_t bytes) override;
  void Close(void* imported) override;

  // Test hook (any thread): fences that come due from now on fail with `status` instead of
  // copying; OK clears it.
  void InjectCopyError(absl::Status status);

 private:
  struct PendingCopy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  struct PendingFence {
    absl::Time due;
    size_t copies_end;  // copies [.., copies_end) of pending_ belong to it or earlier fences
  };
  // Runs the copies of fences up to `fence`.
  void RunUpTo(uint64_t fence);

  const HostMemoryCopierOptions options_;
  std::vector<PendingCopy> pending_;  // not yet run, in order
  std::map<uint64_t, PendingFence> fences_;
  uint64_t next_fence_ = 1;
  std::map<void*, size_t> imported_;      // mapping -> bytes
  std::map<void*, size_t> host_buffers_;  // AllocateHost's, -> bytes
  absl::Mutex error_mu_;
  absl::Status injected_error_ ABSL_GUARDED_BY(error_mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_HOST_MEMORY_COPIER_H_
