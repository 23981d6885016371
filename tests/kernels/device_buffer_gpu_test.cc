#include <vector>

#include "gtest/gtest.h"
#include "kernels/device_buffer.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

TEST(CudaStatusTest, NamesTheError) {
  const absl::Status status = CudaStatus(cudaErrorInvalidValue, "cudaMemcpy(x)");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("cudaMemcpy(x)"), std::string_view::npos);
  EXPECT_NE(status.message().find("cudaErrorInvalidValue"), std::string_view::npos);
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x").ok());
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "x").code(), absl::StatusCode::kUnavailable);
}

TEST(DeviceBufferTest, RoundTripsBytes) {
  TANDEM_REQUIRE_GPU();
  const std::vector<int32_t> host = {1, 2, 3, -4, 5};
  DeviceBuffer buffer = testing::Upload(host);
  EXPECT_EQ(buffer.bytes(), host.size() * sizeof(int32_t));
  EXPECT_EQ(testing::Download<int32_t>(buffer, host.size()), host);
  auto pinned = PinnedHostBuffer::Allocate(64);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_NE(pinned->data(), nullptr);
}

TEST(DeviceBufferTest, ImpossibleAllocationIsAStatus) {
  TANDEM_REQUIRE_GPU();
  auto buffer = DeviceBuffer::Allocate(size_t{1} << 60);
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kResourceExhausted) << buffer.status();
  // Reported once, as this Status: the next launch's error check must not see it again.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace tandem::kernels
