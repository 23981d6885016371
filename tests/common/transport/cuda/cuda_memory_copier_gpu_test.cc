// CudaMemoryCopier on a real GPU: copies in every direction complete by their fences, pools are
// checked, and the IPC handle is well-formed. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "absl/time/clock.h"
#include "common/transport/cuda/cuda_memory_copier.h"
#include "tests/common/transport/cuda/gpu_transport_test_util.h"
#include "tests/common/transport/transport_test_util.h"

namespace tandem {
namespace {

using testing::DevicePool;
using testing::FillRandom;

// Polls `fence` until done (or 10 s).
absl::Status WaitFence(MemoryCopier& copier, uint64_t fence) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up) {
    absl::StatusOr<bool> r = copier.Poll(fence);
    if (!r.ok()) return r.status();
    if (*r) return absl::OkStatus();
  }
  return absl::DeadlineExceededError("fence never passed");
}

TEST(CudaMemoryCopierGpuTest, CreateFailsCleanlyForAMissingDevice) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // No GPU (CI): creating fails with a Status, not a crash.
    EXPECT_FALSE(CudaMemoryCopier::Create(0).ok());
    return;
  }
  EXPECT_EQ(CudaMemoryCopier::Create(count).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CudaMemoryCopierGpuTest, CopiesEveryDirectionByTheirFences) {
  TANDEM_REQUIRE_CUDA_DEVICES(1);
  auto copier = CudaMemoryCopier::Create(0);
  ASSERT_TRUE(copier.ok()) << copier.status();
  EXPECT_EQ((*copier)->device_id().size(), 16u);
  constexpr size_t kBytes = 8 << 20;
  DevicePool a(0, kBytes), b(0, kBytes);
  absl::StatusOr<void*> pinned = (*copier)->AllocateHost(kBytes);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  char* host = static_cast<char*>(*pinned);
  FillRandom(host, kBytes, 1);
  std::vector<char> expected(host, host + kBytes);
  // host -> a, a -> b (in 4 pieces, reversed), b -> host (after clearing it)
  ASSERT_TRUE((*copier)->Copy(a.data(), host, kBytes).ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(
        (*copier)
            ->Copy(b.data() + (3 - i) * (kBytes / 4), a.data() + i * (kBytes / 4), kBytes / 4)
            .ok());
  }
  absl::StatusOr<uint64_t> f1 = (*copier)->Fence();
  ASSERT_TRUE(f1.ok());
  ASSERT_TRUE(WaitFence(**copier, *f1).ok());
  std::memset(host, 0, kBytes);
  ASSERT_TRUE((*copier)->Copy(host, b.data(), kBytes).ok());
  absl::StatusOr<uint64_t> f2 = (*copier)->Fence();
  ASSERT_TRUE(f2.ok());
  ASSERT_TRUE(WaitFence(**copier, *f2).ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(
        std::memcmp(host + (3 - i) * (kBytes / 4), expected.data() + i * (kBytes / 4), kBytes / 4),
        0)
        << "piece " << i;
  }
  EXPECT_FALSE((*copier)->Poll(*f2).ok()) << "a passed fence is released";
  (*copier)->FreeHost(host);
}

TEST(CudaMemoryCopierGpuTest, ChecksPools) {
  TANDEM_REQUIRE_CUDA_DEVICES(1);
  auto copier = CudaMemoryCopier::Create(0);
  ASSERT_TRUE(copier.ok()) << copier.status();
  DevicePool pool(0, 1 << 20);
  EXPECT_TRUE((*copier)->CheckPool(pool.data(), pool.size(), 0).ok());
  EXPECT_EQ((*copier)->CheckPool(pool.data(), pool.size(), 1).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<char> host(4096);
  EXPECT_EQ((*copier)->CheckPool(host.data(), host.size(), 0).code(),
            absl::StatusCode::kInvalidArgument);
}

// Export names the allocation and the pool's offset in it; this process cannot open its own
// handle (CUDA forbids it), which Import reports as an error.
TEST(CudaMemoryCopierGpuTest, ExportsAHandleThisProcessCannotOpen) {
  TANDEM_REQUIRE_CUDA_DEVICES(1);
  auto copier = CudaMemoryCopier::Create(0);
  ASSERT_TRUE(copier.ok()) << copier.status();
  DevicePool pool(0, 4 << 20);
  absl::StatusOr<std::string> whole = (*copier)->Export(pool.data(), pool.size());
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->rfind("cudaipc:", 0), 0u);
  absl::StatusOr<std::string> inner = (*copier)->Export(pool.data() + 4096, 1 << 20);
  ASSERT_TRUE(inner.ok()) << inner.status();
  EXPECT_EQ(whole->size(), inner->size());
  EXPECT_NE(*whole, *inner) << "the offset is part of the handle";
  EXPECT_FALSE((*copier)->Export(pool.data() + 4096, pool.size()).ok()) << "past the allocation";
  EXPECT_FALSE((*copier)->Import(*whole, pool.size()).ok());
  EXPECT_FALSE((*copier)->Import("memfd:1:2", pool.size()).ok());
}

}  // namespace
}  // namespace tandem
