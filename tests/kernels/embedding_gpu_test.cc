#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/embedding.h"
#include "kernels/embedding_reference.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::Download;
using testing::Poisoned;
using testing::Upload;

// Ids mostly in [0, vocab), some past either end, and the extremes of int32.
std::vector<int32_t> RandomIds(int n, int vocab, uint64_t seed) {
  const std::vector<float> u = RandomUniform(n, -0.1f * vocab, 1.1f * vocab, seed);
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(std::floor(u[i]));
  if (n >= 3) {
    ids[0] = std::numeric_limits<int32_t>::max();
    ids[1] = std::numeric_limits<int32_t>::min();
    ids[2] = vocab;
  }
  return ids;
}

// Bit-exact comparison of `got` (from `offset` on) with `want`, naming the first difference.
template <typename T>
::testing::AssertionResult SameBits(const std::vector<T>& got, size_t offset,
                                    const std::vector<T>& want, int width) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(&got[offset + i], &want[i], sizeof(T)) != 0) {
      return ::testing::AssertionFailure() << "row " << i / width << " col " << i % width
                                           << ": got " << +got[offset + i] << " want " << +want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// `table_offset` / `x_offset` shift the device pointers by that many elements (1: not 16-byte
// aligned, so the kernel must take its scalar path).
void CheckEmbeddingGather(int vocab, int hidden, int n, uint64_t seed, int table_offset = 0,
                          int x_offset = 0) {
  SCOPED_TRACE(::testing::Message()
               << "vocab=" << vocab << " hidden=" << hidden << " n=" << n
               << " table_offset=" << table_offset << " x_offset=" << x_offset);
  const std::vector<Bf16Bits> table =
      ToBf16(RandomUniform(size_t(vocab) * hidden + table_offset, -2, 2, seed));
  const std::vector<int32_t> ids = RandomIds(n, vocab, seed + 1);
  const DeviceBuffer table_dev = Upload(table);
  const DeviceBuffer ids_dev = Upload(ids);
  const DeviceBuffer x_dev = Poisoned<float>(size_t(n) * hidden + x_offset);
  const absl::Status status =
      EmbeddingGather(table_dev.as<__nv_bfloat16>() + table_offset, vocab, hidden,
                      ids_dev.as<int32_t>(), n, x_dev.as<float>() + x_offset, nullptr);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<float> got = Download<float>(x_dev, size_t(n) * hidden + x_offset);
  std::vector<float> want(size_t(n) * hidden);
  EmbeddingGatherReference(table.data() + table_offset, vocab, hidden, ids.data(), n, want.data());
  EXPECT_TRUE(SameBits(got, x_offset, want, hidden));
}

TEST(EmbeddingGatherGpuTest, MatchesReferenceOverShapes) {
  TANDEM_REQUIRE_GPU();
  uint64_t seed = 1;
  for (int hidden : {1, 7, 8, 64, 896, 4096, 4099, 8192}) {
    for (int n : {1, 3, 200}) CheckEmbeddingGather(1000, hidden, n, seed++);
  }
  CheckEmbeddingGather(151936, 64, 4097, seed++);  // a real vocabulary, many rows
}

TEST(EmbeddingGatherGpuTest, UnalignedPointersTakeTheScalarPath) {
  TANDEM_REQUIRE_GPU();
  CheckEmbeddingGather(100, 64, 9, 5, /*table_offset=*/1, /*x_offset=*/0);
  CheckEmbeddingGather(100, 64, 9, 6, /*table_offset=*/0, /*x_offset=*/1);
  CheckEmbeddingGather(100, 4096, 9, 7, /*table_offset=*/8, /*x_offset=*/4);  // still aligned
}

void CheckGatherRows(int src_rows, int width, int n, uint64_t seed, int src_offset = 0) {
  SCOPED_TRACE(::testing::Message()
               << "width=" << width << " n=" << n << " src_offset=" << src_offset);
  const std::vector<Bf16Bits> src =
      ToBf16(RandomUniform(size_t(src_rows) * width + src_offset, -5, 5, seed));
  const std::vector<float> u = RandomUniform(n, 0, static_cast<float>(src_rows), seed + 1);
  std::vector<int32_t> rows(n);
  for (int i = 0; i < n; ++i) rows[i] = std::min(src_rows - 1, static_cast<int32_t>(u[i]));
  const DeviceBuffer src_dev = Upload(src);
  const DeviceBuffer rows_dev = Upload(rows);
  const DeviceBuffer dst_dev = Poisoned<Bf16Bits>(size_t(n) * width);
  const absl::Status status =
      GatherRows(src_dev.as<__nv_bfloat16>() + src_offset, width, rows_dev.as<int32_t>(), n,
                 dst_dev.as<__nv_bfloat16>(), nullptr);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<Bf16Bits> got = Download<Bf16Bits>(dst_dev, size_t(n) * width);
  std::vector<Bf16Bits> want(size_t(n) * width);
  GatherRowsReference(src.data() + src_offset, width, rows.data(), n, want.data());
  EXPECT_TRUE(SameBits(got, 0, want, width));
}

TEST(GatherRowsGpuTest, MatchesReferenceOverShapes) {
  TANDEM_REQUIRE_GPU();
  uint64_t seed = 100;
  for (int width : {1, 7, 8, 64, 4096, 4099, 4100}) {
    for (int n : {1, 5, 300}) CheckGatherRows(400, width, n, seed++);
  }
  CheckGatherRows(6, 151936, 9, seed++);  // rows as wide as a vocabulary
  CheckGatherRows(400, 64, 17, seed++, /*src_offset=*/1);
}

// Argument checks run before any CUDA call, so these need no GPU.
TEST(EmbeddingGatherGpuTest, RejectsBadArguments) {
  const auto* table = reinterpret_cast<const __nv_bfloat16*>(16);
  const auto* ids = reinterpret_cast<const int32_t*>(16);
  auto* x = reinterpret_cast<float*>(16);
  EXPECT_EQ(EmbeddingGather(table, 0, 8, ids, 1, x, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbeddingGather(table, 8, 0, ids, 1, x, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbeddingGather(table, 8, 8, ids, -1, x, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbeddingGather(nullptr, 8, 8, ids, 1, x, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbeddingGather(table, 8, 8, nullptr, 1, x, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EmbeddingGather(table, 8, 8, ids, 1, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(EmbeddingGather(nullptr, 8, 8, nullptr, 0, nullptr, nullptr).ok());  // no-op

  const auto* src = reinterpret_cast<const __nv_bfloat16*>(16);
  auto* dst = reinterpret_cast<__nv_bfloat16*>(16);
  EXPECT_EQ(GatherRows(src, 0, ids, 1, dst, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherRows(src, 8, ids, -1, dst, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherRows(nullptr, 8, ids, 1, dst, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherRows(src, 8, nullptr, 1, dst, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GatherRows(src, 8, ids, 1, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(GatherRows(nullptr, 8, nullptr, 0, nullptr, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels
