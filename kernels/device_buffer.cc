#include "kernels/device_buffer.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"

namespace tandem::kernels {

absl::Status DeviceMemory::Allocate(void** data, size_t bytes) {
  return CudaStatus(cudaMalloc(data, bytes), absl::StrCat("cudaMalloc(", bytes, " bytes)"));
}

void DeviceMemory::Free(void* data) { cudaFree(data); }

absl::Status PinnedHostMemory::Allocate(void** data, size_t bytes) {
  return CudaStatus(cudaMallocHost(data, bytes), absl::StrCat("cudaMallocHost(", bytes, " bytes)"));
}

void PinnedHostMemory::Free(void* data) { cudaFreeHost(data); }

}  // namespace tandem::kernels
