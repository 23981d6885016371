// Owning handles for device memory and pinned host memory (cudaMalloc / cudaMallocHost), freed on
// destruction; allocation failures come back as Status, never as a crash.
#ifndef TANDEM_KERNELS_DEVICE_BUFFER_H_
#define TANDEM_KERNELS_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"

namespace tandem::kernels {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` of device memory on the current device (0 bytes: an empty buffer, no allocation).
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void Reset();
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  static absl::StatusOr<PinnedHostBuffer> Allocate(size_t bytes);
  ~PinnedHostBuffer() { Reset(); }
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void Reset();
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_DEVICE_BUFFER_H_
