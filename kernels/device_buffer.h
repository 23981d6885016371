// Owning handles for device memory and pinned host memory (cudaMalloc / cudaMallocHost), freed on
// destruction; allocation failures come back as Status, never as a crash.
#ifndef TANDEM_KERNELS_DEVICE_BUFFER_H_
#define TANDEM_KERNELS_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"

namespace tandem::kernels {

// `Memory` says how to allocate and free: DeviceMemory or PinnedHostMemory below.
template <typename Memory>
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  // `bytes` of memory (on the current device for device memory); 0 bytes: an empty buffer.
  static absl::StatusOr<OwnedBuffer> Allocate(size_t bytes) {
    OwnedBuffer buffer;
    if (bytes == 0) return buffer;
    if (absl::Status s = Memory::Allocate(&buffer.data_, bytes); !s.ok()) return s;
    buffer.bytes_ = bytes;
    return buffer;
  }
  ~OwnedBuffer() { Reset(); }
  OwnedBuffer(OwnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  OwnedBuffer& operator=(OwnedBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void Reset() {
    if (data_ != nullptr) Memory::Free(data_);
    data_ = nullptr;
    bytes_ = 0;
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct DeviceMemory {
  static absl::Status Allocate(void** data, size_t bytes);  // cudaMalloc
  static void Free(void* data);
};
struct PinnedHostMemory {
  static absl::Status Allocate(void** data, size_t bytes);  // cudaMallocHost
  static void Free(void* data);
};

using DeviceBuffer = OwnedBuffer<DeviceMemory>;
using PinnedHostBuffer = OwnedBuffer<PinnedHostMemory>;

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_DEVICE_BUFFER_H_
