#include "kernels/device_buffer.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"

namespace tandem::kernels {

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMalloc(&buffer.data_, bytes),
                              absl::StrCat("cudaMalloc(", bytes, " bytes)"));
  buffer.bytes_ = bytes;
  return buffer;
}

void DeviceBuffer::Reset() {
  if (data_ != nullptr) cudaFree(data_);
  data_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<PinnedHostBuffer> PinnedHostBuffer::Allocate(size_t bytes) {
  PinnedHostBuffer buffer;
  if (bytes == 0) return buffer;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMallocHost(&buffer.data_, bytes),
                              absl::StrCat("cudaMallocHost(", bytes, " bytes)"));
  buffer.bytes_ = bytes;
  return buffer;
}

void PinnedHostBuffer::Reset() {
  if (data_ != nullptr) cudaFreeHost(data_);
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace tandem::kernels
