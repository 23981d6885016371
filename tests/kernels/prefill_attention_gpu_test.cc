#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/attention_reference.h"
#include "kernels/prefill_attention.h"
#include "tests/kernels/attention_test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::Download;
using testing::kPoisonBf16;
using testing::MakePagedKv;
using testing::PagedKv;
using testing::Poisoned;
using testing::RandomBf16;
using testing::Upload;

struct PrefillItem {
  int cached = 0;  // positions already in the pool before this chunk
  int q_len = 0;
};

struct PrefillCase {
  int group = 1;
  int head_dim = 64;
  int block_size = 16;
  int sliding_window = 0;
  int num_kv_heads = 2;
  std::vector<PrefillItem> items;
};

std::string Describe(const PrefillCase& c) {
  std::string items;
  for (const PrefillItem& item : c.items)
    absl::StrAppend(&items, item.cached, "+", item.q_len, " ");
  return absl::StrCat("group ", c.group, " head_dim ", c.head_dim, " block ", c.block_size,
                      " window ", c.sliding_window, " kv_heads ", c.num_kv_heads, " items ", items);
}

// Runs the kernel and the reference on the same random inputs: items laid out in q with one
// padding row after each (never written), every item's blocks scattered through a two-layer pool
// (layer 1 used), the output poisoned first.
void ExpectKernelMatchesReferenceWith(const PrefillCase& c, uint64_t seed, DType kv_dtype) {
  const std::string what = Describe(c) + " kv " + std::string(DTypeName(kv_dtype));
  const int num_heads = c.num_kv_heads * c.group;
  const int num_items = static_cast<int>(c.items.size());
  std::vector<int32_t> q_starts, q_lens, start_positions;
  std::vector<int> capacities;
  int rows = 0, max_q_len = 0;
  for (const PrefillItem& item : c.items) {
    q_starts.push_back(rows);
    q_lens.push_back(item.q_len);
    start_positions.push_back(item.cached);
    capacities.push_back(item.cached + item.q_len);
    rows += item.q_len + 1;
    max_q_len = std::max(max_q_len, item.q_len);
  }
  const PagedKv kv =
      MakePagedKv(/*num_layers=*/2, c.num_kv_heads, c.head_dim, c.block_size, capacities, seed,
                  /*spare_blocks=*/3, /*min_blocks_per_seq=*/1, kv_dtype);
  const int64_t row_elements = int64_t{num_heads} * c.head_dim;
  const size_t out_elements = static_cast<size_t>(rows) * row_elements;
  const std::vector<Bf16Bits> q = RandomBf16(out_elements, 3.0f, seed + 1);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  std::vector<Bf16Bits> want(out_elements, kPoisonBf16);
  PrefillAttentionReference({.q = q.data(),
                             .out = want.data(),
                             .kv_pool = kv.PoolData(),
                             .kv_scales = kv.ScalesData(),
                             .layout = kv.layout,
                             .layer = 1,
                             .num_heads = num_heads,
                             .num_items = num_items,
                             .q_starts = q_starts.data(),
                             .q_lens = q_lens.data(),
                             .start_positions = start_positions.data(),
                             .block_tables = kv.block_tables.data(),
                             .max_blocks_per_seq = kv.max_blocks_per_seq,
                             .sliding_window = c.sliding_window,
                             .scale = scale});

  const DeviceBuffer q_d = Upload(q);
  const DeviceBuffer pool_d = kv.fp8() ? Upload(kv.pool_fp8) : Upload(kv.pool);
  const DeviceBuffer scales_d = Upload(kv.fp8() ? kv.scales : std::vector<float>{1.0f});
  const DeviceBuffer q_starts_d = Upload(q_starts);
  const DeviceBuffer q_lens_d = Upload(q_lens);
  const DeviceBuffer start_positions_d = Upload(start_positions);
  const DeviceBuffer tables_d = Upload(kv.block_tables);
  const DeviceBuffer out_d = Poisoned<Bf16Bits>(out_elements);
  const absl::Status status = PrefillAttention(
      {.q = q_d.as<__nv_bfloat16>(),
       .out = out_d.as<__nv_bfloat16>(),
       .kv_pool = pool_d.data(),
       .layout = kv.layout,
       .kv_scales = kv.fp8() ? scales_d.as<float>() : nullptr,
       .layer = 1,
       .num_heads = num_heads,
       .num_items = num_items,
       .q_starts = q_starts_d.as<int32_t>(),
       .q_lens = q_lens_d.as<int32_t>(),
       .start_positions = start_positions_d.as<int32_t>(),
       .block_tables = tables_d.as<int32_t>(),
       .max_blocks_per_seq = kv.max_blocks_per_seq,
       .max_q_len = max_q_len + 3,  // a larger bound is allowed: its extra tiles exit
       .sliding_window = c.sliding_window,
       .scale = scale},
      /*stream=*/nullptr);
  ASSERT_TRUE(status.ok()) << what << ": " << status;
  const std::vector<Bf16Bits> got = Download<Bf16Bits>(out_d, out_elements);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << what;
  testing::ExpectAttentionNear(got, want, kv.ValueBound(), what);
}

// Each case with a bf16 pool and with an fp8 one.
void ExpectKernelMatchesReference(const PrefillCase& c, uint64_t seed) {
  ExpectKernelMatchesReferenceWith(c, seed, DType::kBF16);
  ExpectKernelMatchesReferenceWith(c, seed, DType::kFP8E4M3);
}

TEST(PrefillAttentionGpuTest, OddAndBlockBoundaryLengths) {
  TANDEM_REQUIRE_GPU();
  for (const int head_dim : {64, 128}) {
    ExpectKernelMatchesReference({.group = 1,
                                  .head_dim = head_dim,
                                  .items = {{0, 1}, {0, 17}, {0, 16}, {0, 64}, {0, 65}, {0, 200}}},
                                 11);
  }
}

TEST(PrefillAttentionGpuTest, GqaGroupsWithCachedPrefix) {
  TANDEM_REQUIRE_GPU();
  for (const int group : {1, 4, 8}) {
    for (const int head_dim : {64, 128}) {
      ExpectKernelMatchesReference(
          {.group = group,
           .head_dim = head_dim,
           .items = {{0, 129}, {100, 37}, {64, 64}, {0, 0}, {1000, 130}, {31, 1}}},
          100 + group + head_dim);
    }
  }
}

TEST(PrefillAttentionGpuTest, LongPromptsAfterCachedPrefix) {
  TANDEM_REQUIRE_GPU();
  ExpectKernelMatchesReference(
      {.group = 4, .head_dim = 128, .num_kv_heads = 1, .items = {{0, 2048}, {1024, 1000}}}, 21);
  ExpectKernelMatchesReference(
      {.group = 8, .head_dim = 64, .block_size = 32, .num_kv_heads = 1, .items = {{1500, 777}}},
      22);
}

TEST(PrefillAttentionGpuTest, SlidingWindow) {
  TANDEM_REQUIRE_GPU();
  for (const int window : {1, 64, 100}) {
    for (const int head_dim : {64, 128}) {
      ExpectKernelMatchesReference({.group = 4,
                                    .head_dim = head_dim,
                                    .sliding_window = window,
                                    .items = {{0, 300}, {250, 77}, {0, 5}}},
                                   200 + window + head_dim);
    }
  }
}

TEST(PrefillAttentionGpuTest, OddBlockSizes) {
  TANDEM_REQUIRE_GPU();
  for (const int block_size : {1, 7, 256}) {
    ExpectKernelMatchesReference(
        {.group = 2, .head_dim = 128, .block_size = block_size, .items = {{13, 90}, {0, 70}}},
        300 + block_size);
  }
}

TEST(PrefillAttentionGpuTest, ManyItems) {
  TANDEM_REQUIRE_GPU();
  PrefillCase c{.group = 4, .head_dim = 64};
  for (int i = 0; i < 40; ++i) c.items.push_back({(i * 37) % 300, (i * 53) % 97});
  ExpectKernelMatchesReference(c, 400);
}

// Precondition checks return before any CUDA call, so these run without a GPU too.
TEST(PrefillAttentionTest, RejectsBadArguments) {
  alignas(16) static __nv_bfloat16 buffer[64];
  static const int32_t ints[4] = {0, 1, 0, 0};
  const KvLayout layout{.dtype = DType::kBF16,
                        .num_layers = 2,
                        .num_kv_heads = 2,
                        .head_dim = 64,
                        .block_size = 16,
                        .num_blocks = 4};
  const PrefillAttentionArgs valid{.q = buffer,
                                   .out = buffer,
                                   .kv_pool = buffer,
                                   .layout = layout,
                                   .layer = 1,
                                   .num_heads = 8,
                                   .num_items = 1,
                                   .q_starts = ints,
                                   .q_lens = ints + 1,
                                   .start_positions = ints + 2,
                                   .block_tables = ints + 3,
                                   .max_blocks_per_seq = 1,
                                   .max_q_len = 1,
                                   .scale = 0.125f};
  auto expect_invalid = [&](PrefillAttentionArgs args, const char* names) {
    const absl::Status status = PrefillAttention(args, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << names << ": " << status;
    EXPECT_NE(std::string(status.message()).find(names), std::string::npos) << status;
  };
  PrefillAttentionArgs args = valid;
  args.q = nullptr;
  expect_invalid(args, "q is null");
  args = valid;
  args.out = nullptr;
  expect_invalid(args, "out is null");
  args = valid;
  args.kv_pool = nullptr;
  expect_invalid(args, "kv_pool");
  args = valid;
  args.block_tables = nullptr;
  expect_invalid(args, "block_tables");
  args = valid;
  args.q_lens = nullptr;
  expect_invalid(args, "q_lens");
  args = valid;
  args.q = buffer + 1;
  expect_invalid(args, "aligned");
  args = valid;
  args.num_items = -1;
  expect_invalid(args, "num_items");
  args = valid;
  args.max_q_len = -1;
  expect_invalid(args, "max_q_len");
  args = valid;
  args.layout.dtype = DType::kF32;
  expect_invalid(args, "dtype");
  args = valid;
  args.layout.dtype = DType::kFP8E4M3;
  expect_invalid(args, "kv_scales");
  args = valid;
  args.layout.head_dim = 96;
  expect_invalid(args, "head_dim");
  args = valid;
  args.num_heads = 7;
  expect_invalid(args, "num_heads");
  args = valid;
  args.layer = 2;
  expect_invalid(args, "layer");
  args = valid;
  args.sliding_window = -1;
  expect_invalid(args, "sliding_window");

  // Nothing to do: OK without touching the device, even with null pointers.
  args = PrefillAttentionArgs{.layout = layout, .num_heads = 8, .num_items = 0};
  EXPECT_TRUE(PrefillAttention(args, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels
