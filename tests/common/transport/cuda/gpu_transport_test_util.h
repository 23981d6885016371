// Helpers for the transport tests that need GPUs: skip with the reason when there are too few
// usable CUDA devices, and a device pool filled from / read back to host vectors.
#ifndef TANDEM_TESTS_COMMON_TRANSPORT_CUDA_GPU_TRANSPORT_TEST_UTIL_H_
#define TANDEM_TESTS_COMMON_TRANSPORT_CUDA_GPU_TRANSPORT_TEST_UTIL_H_

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

// Skips the current test, naming why, unless at least `n` CUDA devices can be used (CI has none).
#define TANDEM_REQUIRE_CUDA_DEVICES(n)                                                             \
  do {                                                                                             \
    int tandem_count_ = 0;                                                                         \
    const cudaError_t tandem_error_ = cudaGetDeviceCount(&tandem_count_);                          \
    if (tandem_error_ != cudaSuccess) {                                                            \
      GTEST_SKIP() << "GPU test skipped, no usable CUDA device: "                                  \
                   << cudaGetErrorName(tandem_error_) << " (" << cudaGetErrorString(tandem_error_) \
                   << ")";                                                                         \
    }                                                                                              \
    if (tandem_count_ == 0) {                                                                      \
      GTEST_SKIP() << "GPU test skipped, no usable CUDA device: cudaGetDeviceCount found none";    \
    }                                                                                              \
    if (tandem_count_ < (n)) {                                                                     \
      GTEST_SKIP() << "GPU test skipped: needs " << (n) << " CUDA devices, this machine "          \
                   << "has " << tandem_count_;                                                     \
    }                                                                                              \
  } while (false)

namespace tandem::testing {

// `bytes` of device memory on `device`, freed on destruction.
class DevicePool {
 public:
  DevicePool(int device, size_t bytes) : device_(device), bytes_(bytes) {
    cudaSetDevice(device);
    EXPECT_EQ(cudaMalloc(&data_, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(data_, 0, bytes), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DevicePool() {
    cudaSetDevice(device_);
    cudaFree(data_);
  }
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  char* data() const { return static_cast<char*>(data_); }
  size_t size() const { return bytes_; }
  int device() const { return device_; }

  void Upload(const std::vector<char>& host) {
    cudaSetDevice(device_);
    ASSERT_EQ(cudaMemcpy(data_, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<char> Download() const {
    std::vector<char> host(bytes_);
    cudaSetDevice(device_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  int device_;
  size_t bytes_;
  void* data_ = nullptr;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_TRANSPORT_CUDA_GPU_TRANSPORT_TEST_UTIL_H_
