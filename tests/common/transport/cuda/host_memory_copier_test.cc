#include "common/transport/cuda/host_memory_copier.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/time/clock.h"

namespace tandem {
namespace {

TEST(HostMemoryCopierTest, CopiesRunWhenTheirFenceIsPolled) {
  HostMemoryCopier copier;
  std::vector<char> src(64, 'a'), dst(64, 0);
  ASSERT_TRUE(copier.Copy(dst.data(), src.data(), 32).ok());
  EXPECT_EQ(dst[0], 0) << "copied before its fence passed";
  absl::StatusOr<uint64_t> fence = copier.Fence();
  ASSERT_TRUE(fence.ok());
  absl::StatusOr<bool> done = copier.Poll(*fence);
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(*done);
  EXPECT_EQ(dst[0], 'a');
  EXPECT_EQ(dst[31], 'a');
  EXPECT_EQ(dst[32], 0);
}

TEST(HostMemoryCopierTest, LatencyDelaysCompletionAndOrderIsKept) {
  HostMemoryCopier copier({.copy_latency = absl::Milliseconds(50)});
  std::vector<char> a(8, 'a'), b(8, 'b'), dst(8, 0);
  ASSERT_TRUE(copier.Copy(dst.data(), a.data(), 8).ok());
  const uint64_t f1 = *copier.Fence();
  ASSERT_TRUE(copier.Copy(dst.data(), b.data(), 8).ok());
  const uint64_t f2 = *copier.Fence();
  EXPECT_FALSE(*copier.Poll(f1));
  EXPECT_FALSE(*copier.Poll(f2));
  absl::SleepFor(absl::Milliseconds(60));
  EXPECT_TRUE(*copier.Poll(f2));  // runs f1's copies first
  EXPECT_TRUE(*copier.Poll(f1));
  EXPECT_EQ(std::string(dst.data(), 8), "bbbbbbbb");
}

// The latency is counted on the injected clock: the copies wait for it to move, not for real time.
TEST(HostMemoryCopierTest, LatencyIsCountedOnTheInjectedClock) {
  ManualClock clock;
  HostMemoryCopier copier({.copy_latency = absl::Seconds(10), .clock = &clock});
  std::vector<char> src(8, 'c'), dst(8, 0);
  ASSERT_TRUE(copier.Copy(dst.data(), src.data(), 8).ok());
  const uint64_t fence = *copier.Fence();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(*copier.Poll(fence));
  clock.AdvanceSeconds(10);
  EXPECT_TRUE(*copier.Poll(fence));
  EXPECT_EQ(std::string(dst.data(), 8), "cccccccc");
}

TEST(HostMemoryCopierTest, InjectedErrorFailsTheFenceAndSkipsItsCopies) {
  HostMemoryCopier copier;
  std::vector<char> src(8, 's'), dst(8, 0);
  copier.InjectCopyError(absl::DataLossError("ecc"));
  ASSERT_TRUE(copier.Copy(dst.data(), src.data(), 8).ok());
  absl::StatusOr<bool> r = copier.Poll(*copier.Fence());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(dst[0], 0);
  copier.InjectCopyError(absl::OkStatus());
  ASSERT_TRUE(copier.Copy(dst.data(), src.data(), 8).ok());
  EXPECT_TRUE(*copier.Poll(*copier.Fence()));
  EXPECT_EQ(dst[0], 's');
}

TEST(HostMemoryCopierTest, DrainRunsEverything) {
  HostMemoryCopier copier({.copy_latency = absl::Hours(1)});
  std::vector<char> src(8, 's'), dst(8, 0);
  ASSERT_TRUE(copier.Copy(dst.data(), src.data(), 4).ok());
  ASSERT_TRUE(copier.Fence().ok());
  ASSERT_TRUE(copier.Copy(dst.data() + 4, src.data(), 4).ok());
  copier.Drain();
  EXPECT_EQ(std::string(dst.data(), 8), "ssssssss");
}

TEST(HostMemoryCopierTest, HostBuffersAreZeroedAndAligned) {
  HostMemoryCopier copier;
  absl::StatusOr<void*> p = copier.AllocateHost(10000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 4096, 0u);
  const char* c = static_cast<const char*>(*p);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(c[i], 0);
  copier.FreeHost(*p);
  EXPECT_FALSE(copier.AllocateHost(0).ok());
}

TEST(HostMemoryCopierTest, SharedPoolsExportAndImport) {
  absl::StatusOr<std::unique_ptr<SharedHostPool>> pool = SharedHostPool::Create(1 << 20);
  ASSERT_TRUE(pool.ok()) << pool.status();
  HostMemoryCopier owner, writer;
  absl::StatusOr<std::string> handle = owner.Export((*pool)->data(), (*pool)->size());
  ASSERT_TRUE(handle.ok()) << handle.status();
  absl::StatusOr<void*> mapped = writer.Import(*handle, (*pool)->size());
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_NE(*mapped, static_cast<void*>((*pool)->data()));
  std::memcpy(static_cast<char*>(*mapped) + 12345, "shared", 6);
  EXPECT_EQ(std::string((*pool)->data() + 12345, 6), "shared");
  writer.Close(*mapped);

  std::vector<char> ordinary(4096);
  EXPECT_EQ(owner.Export(ordinary.data(), ordinary.size()).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(writer.Import("memfd:1:999999", 4096).ok());
  EXPECT_FALSE(writer.Import("cudaipc:xyz", 4096).ok());
  EXPECT_FALSE(writer.Import("memfd:12:34:56", 4096).ok());
}

}  // namespace
}  // namespace tandem
