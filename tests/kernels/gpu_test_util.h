// Helpers for tests that run kernels on a GPU: skip with a clear message when no GPU can be used,
// copy vectors to and from the device, and poison outputs so an element a kernel fails to write
// shows up as NaN.
#ifndef TANDEM_TESTS_KERNELS_GPU_TEST_UTIL_H_
#define TANDEM_TESTS_KERNELS_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cuda_status.h"
#include "kernels/device_buffer.h"

// Skips the current test, naming why, when no CUDA device can be used (CI has none).
#define TANDEM_REQUIRE_GPU()                                                      \
  do {                                                                            \
    const absl::Status tandem_gpu_ = ::tandem::kernels::CudaDeviceAvailable();    \
    if (!tandem_gpu_.ok()) {                                                      \
      GTEST_SKIP() << "GPU test skipped, no usable CUDA device: " << tandem_gpu_; \
    }                                                                             \
  } while (false)

namespace tandem::kernels::testing {

// Device copy of `host` (CHECK-fails the test on CUDA errors).
template <typename T>
DeviceBuffer Upload(const std::vector<T>& host) {
  auto buffer = DeviceBuffer::Allocate(host.size() * sizeof(T));
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (!host.empty()) {
    EXPECT_EQ(
        cudaMemcpy(buffer->data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  return std::move(*buffer);
}

// A device buffer of `n` elements of T, every byte 0xFF: NaN for f32 and bf16, -1 for integers.
template <typename T>
DeviceBuffer Poisoned(size_t n) {
  auto buffer = DeviceBuffer::Allocate(n * sizeof(T));
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (n > 0) {
    EXPECT_EQ(cudaMemset(buffer->data(), 0xFF, n * sizeof(T)), cudaSuccess);
  }
  return std::move(*buffer);
}

template <typename T>
std::vector<T> Download(const DeviceBuffer& buffer, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (n > 0) {
    EXPECT_EQ(cudaMemcpy(host.data(), buffer.data(), n * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  return host;
}

}  // namespace tandem::kernels::testing

#endif  // TANDEM_TESTS_KERNELS_GPU_TEST_UTIL_H_
