#include "kernels/device_buffer.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"

namespace tandem::kernels {
namespace {

// A failed allocation is not sticky, but the runtime also records it as the thread's last error,
// where the next kernel launch's cudaGetLastError would report it as that launch's failure (seen
// on the first GPU run: an embedding launch failed with "out of memory" after a test's impossible
// cudaMalloc). The error is returned as a Status here, so it is cleared.
absl::Status AllocationStatus(cudaError_t error, const char* what, size_t bytes) {
  if (error != cudaSuccess) cudaGetLastError();
  return CudaStatus(error, absl::StrCat(what, "(", bytes, " bytes)"));
}

}  // namespace

absl::Status DeviceMemory::Allocate(void** data, size_t bytes) {
  return AllocationStatus(cudaMalloc(data, bytes), "cudaMalloc", bytes);
}

void DeviceMemory::Free(void* data) { cudaFree(data); }

absl::Status PinnedHostMemory::Allocate(void** data, size_t bytes) {
  return AllocationStatus(cudaMallocHost(data, bytes), "cudaMallocHost", bytes);
}

void PinnedHostMemory::Free(void* data) { cudaFreeHost(data); }

}  // namespace tandem::kernels
