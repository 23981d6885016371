// The MemoryCopier of a real GPU: copies are cudaMemcpyAsync (cudaMemcpyDefault: host, device and
// IPC-mapped pointers alike) on the copier's own non-blocking stream, fences are CUDA events
// (recycled), Poll is cudaEventQuery. Host staging memory is pinned (cudaHostAlloc). Export is
// cudaIpcGetMemHandle of the pool's allocation plus the pool's offset in it (the driver's
// cuMemGetAddressRange, looked up through cudaGetDriverEntryPointByVersion so nothing links
// libcuda); Import is cudaIpcOpenMemHandle with lazy peer access, so a pool on another GPU of the
// same host is reachable when the GPUs can be peers.
//
// Every call sets the copier's device for its duration and restores the caller's.
// CUDA forbids a process opening its own IPC handle: two transports in one process can only use the
// staged path between them.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_CUDA_MEMORY_COPIER_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_CUDA_MEMORY_COPIER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/transport/cuda/memory_copier.h"

namespace tandem {

class CudaMemoryCopier : public MemoryCopier {
 public:
  // Creates the stream on `device`. Unavailable when there is no usable device.
  static absl::StatusOr<std::unique_ptr<CudaMemoryCopier>> Create(int device);
  // Waits for queued copies, then frees events, the stream, pinned buffers and opened handles.
  ~CudaMemoryCopier() override;

  std::string_view kind() const override { return "cuda"; }
  std::string device_id() const override { return uuid_; }
  int device() const { return device_; }
  // The pool must be device memory of this copier's device, and cuda_device must name it.
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

  struct State;  // CUDA handles; defined in the .cc so this header needs no CUDA headers

 private:
  CudaMemoryCopier(int device, std::string uuid, std::unique_ptr<State> state);

  const int device_;
  const std::string uuid_;
  std::unique_ptr<State> state_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_CUDA_MEMORY_COPIER_H_
