#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/attention_reference.h"
#include "kernels/decode_attention.h"
#include "kernels/decode_attention_launch.h"
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

struct DecodeCase {
  int group = 1;
  int head_dim = 64;
  int block_size = 16;
  int sliding_window = 0;
  int num_kv_heads = 2;
  int num_layers = 2;  // the last layer is used
  std::vector<int> context_lens;
  int max_context = 0;  // 0: the longest context
};

std::string Describe(const DecodeCase& c) {
  std::string lens;
  for (size_t i = 0; i < std::min<size_t>(c.context_lens.size(), 8); ++i) {
    absl::StrAppend(&lens, c.context_lens[i], " ");
  }
  if (c.context_lens.size() > 8) absl::StrAppend(&lens, "... (", c.context_lens.size(), " seqs)");
  return absl::StrCat("group ", c.group, " head_dim ", c.head_dim, " block ", c.block_size,
                      " window ", c.sliding_window, " kv_heads ", c.num_kv_heads, " max_context ",
                      c.max_context, " contexts ", lens);
}

// Runs the kernel and the reference on the same random inputs: sequence s's query in row
// num_seqs - s of q/out (row 0 belongs to no sequence and must stay poisoned), blocks scattered
// through the pool, the output and the split workspace poisoned first.
void ExpectKernelMatchesReferenceWith(DecodeCase c, uint64_t seed, DType kv_dtype) {
  const int num_seqs = static_cast<int>(c.context_lens.size());
  const int longest = *std::max_element(c.context_lens.begin(), c.context_lens.end());
  if (c.max_context == 0) c.max_context = longest;
  const std::string what = Describe(c) + " kv " + std::string(DTypeName(kv_dtype));
  const int num_heads = c.num_kv_heads * c.group;
  const int layer = c.num_layers - 1;
  std::vector<int32_t> token_rows, context_lens(c.context_lens.begin(), c.context_lens.end());
  for (int s = 0; s < num_seqs; ++s) token_rows.push_back(num_seqs - s);
  const int rows = num_seqs + 1;
  // Tables sized for max_context, as a captured graph would have them.
  const PagedKv kv =
      MakePagedKv(c.num_layers, c.num_kv_heads, c.head_dim, c.block_size, c.context_lens, seed,
                  /*spare_blocks=*/3, (c.max_context + c.block_size - 1) / c.block_size, kv_dtype);
  const int64_t row_elements = int64_t{num_heads} * c.head_dim;
  const size_t out_elements = static_cast<size_t>(rows) * row_elements;
  const std::vector<Bf16Bits> q = RandomBf16(out_elements, 3.0f, seed + 1);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  std::vector<Bf16Bits> want(out_elements, kPoisonBf16);
  DecodeAttentionReference({.q = q.data(),
                            .out = want.data(),
                            .kv_pool = kv.PoolData(),
                            .kv_scales = kv.ScalesData(),
                            .layout = kv.layout,
                            .layer = layer,
                            .num_heads = num_heads,
                            .num_seqs = num_seqs,
                            .token_rows = token_rows.data(),
                            .context_lens = context_lens.data(),
                            .block_tables = kv.block_tables.data(),
                            .max_blocks_per_seq = kv.max_blocks_per_seq,
                            .sliding_window = c.sliding_window,
                            .scale = scale});

  const DeviceBuffer q_d = Upload(q);
  const DeviceBuffer pool_d = kv.fp8() ? Upload(kv.pool_fp8) : Upload(kv.pool);
  const DeviceBuffer scales_d = Upload(kv.fp8() ? kv.scales : std::vector<float>{1.0f});
  const DeviceBuffer token_rows_d = Upload(token_rows);
  const DeviceBuffer context_lens_d = Upload(context_lens);
  const DeviceBuffer tables_d = Upload(kv.block_tables);
  const size_t workspace_bytes =
      DecodeAttentionWorkspaceBytes(num_seqs, num_heads, c.num_kv_heads, c.head_dim, c.max_context);
  // Both partition kernels against the same reference: tensor cores (the default) and CUDA cores.
  for (const bool tensor_cores : {true, false}) {
    const std::string which = what + (tensor_cores ? " [tensor cores]" : " [cuda cores]");
    const DeviceBuffer out_d = Poisoned<Bf16Bits>(out_elements);
    const DeviceBuffer workspace_d = Poisoned<float>(workspace_bytes / sizeof(float));
    const absl::Status status =
        PagedDecodeAttention({.q = q_d.as<__nv_bfloat16>(),
                              .out = out_d.as<__nv_bfloat16>(),
                              .kv_pool = pool_d.data(),
                              .layout = kv.layout,
                              .kv_scales = kv.fp8() ? scales_d.as<float>() : nullptr,
                              .layer = layer,
                              .num_heads = num_heads,
                              .num_seqs = num_seqs,
                              .token_rows = token_rows_d.as<int32_t>(),
                              .context_lens = context_lens_d.as<int32_t>(),
                              .block_tables = tables_d.as<int32_t>(),
                              .max_blocks_per_seq = kv.max_blocks_per_seq,
                              .max_context = c.max_context,
                              .sliding_window = c.sliding_window,
                              .scale = scale,
                              .tensor_cores = tensor_cores,
                              .workspace = workspace_d.as<float>(),
                              .workspace_bytes = workspace_bytes},
                             /*stream=*/nullptr);
    ASSERT_TRUE(status.ok()) << which << ": " << status;
    const std::vector<Bf16Bits> got = Download<Bf16Bits>(out_d, out_elements);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess) << which;
    testing::ExpectAttentionNear(got, want, kv.ValueBound(), which);
  }
}

// Each case with a bf16 pool and with an fp8 one.
void ExpectKernelMatchesReference(const DecodeCase& c, uint64_t seed) {
  ExpectKernelMatchesReferenceWith(c, seed, DType::kBF16);
  ExpectKernelMatchesReferenceWith(c, seed, DType::kFP8E4M3);
}

TEST(PagedDecodeAttentionGpuTest, OddAndBoundaryContexts) {
  TANDEM_REQUIRE_GPU();
  for (const int head_dim : {64, 128}) {
    // Two partitions; zero-length padding.
    ExpectKernelMatchesReference(
        {.group = 1, .head_dim = head_dim, .context_lens = {1, 15, 16, 17, 511, 512, 513, 0}},
        10 + head_dim);
    // One partition: written directly, no workspace.
    ExpectKernelMatchesReference(
        {.group = 4, .head_dim = head_dim, .context_lens = {1, 2, 100, 0, 512}}, 20 + head_dim);
  }
}

TEST(PagedDecodeAttentionGpuTest, GqaGroups) {
  TANDEM_REQUIRE_GPU();
  for (const int group : {1, 4, 7, 8, 12, 16}) {
    for (const int head_dim : {64, 128}) {
      ExpectKernelMatchesReference(
          {.group = group, .head_dim = head_dim, .context_lens = {700, 3, 1025, 64}},
          30 + group * 1000 + head_dim);
    }
  }
}

TEST(PagedDecodeAttentionGpuTest, LongContexts) {
  TANDEM_REQUIRE_GPU();
  ExpectKernelMatchesReference(
      {.group = 4, .head_dim = 128, .num_layers = 1, .context_lens = {32768, 1000, 0, 4097}}, 40);
  ExpectKernelMatchesReference({.group = 8,
                                .head_dim = 64,
                                .block_size = 32,
                                .num_kv_heads = 1,
                                .num_layers = 1,
                                .context_lens = {32000},
                                .max_context = 32768},
                               41);
}

TEST(PagedDecodeAttentionGpuTest, ManySequences) {
  TANDEM_REQUIRE_GPU();
  for (const int num_seqs : {1, 2, 33, 64}) {
    std::vector<int> lens;
    for (int s = 0; s < num_seqs; ++s) lens.push_back((s * 977 + 13) % 3000);
    ExpectKernelMatchesReference(
        {.group = 4, .head_dim = 128, .context_lens = lens, .max_context = 3000}, 50 + num_seqs);
  }
}

TEST(PagedDecodeAttentionGpuTest, SlidingWindow) {
  TANDEM_REQUIRE_GPU();
  for (const int window : {1, 512, 1000}) {
    for (const int head_dim : {64, 128}) {
      ExpectKernelMatchesReference({.group = 4,
                                    .head_dim = head_dim,
                                    .sliding_window = window,
                                    .context_lens = {5000, 999, 1000, 1001, 1, 0, 1537}},
                                   60 + window + head_dim);
    }
  }
}

TEST(PagedDecodeAttentionGpuTest, OddBlockSizes) {
  TANDEM_REQUIRE_GPU();
  for (const int block_size : {1, 5, 256}) {
    ExpectKernelMatchesReference(
        {.group = 4, .head_dim = 64, .block_size = block_size, .context_lens = {1300, 77}},
        70 + block_size);
  }
}

TEST(PagedDecodeAttentionTest, PartitionsShrinkUntilTheGridIsFull) {
  using internal::DecodePartitionTokensFor;
  // 128 sequences x 8 KV heads x 1 partition already fill the target: full 512-token partitions.
  EXPECT_EQ(DecodePartitionTokensFor(128, 8, 512), 512);
  // One sequence at 32k: 8 x 64 = 512 blocks, halved once to 1024 blocks.
  EXPECT_EQ(DecodePartitionTokensFor(1, 8, 32768), 256);
  // One short sequence: down to the 64-token floor.
  EXPECT_EQ(DecodePartitionTokensFor(1, 8, 1024), 64);
  EXPECT_EQ(DecodePartitionTokensFor(1, 1, 1), 64);
}

TEST(PagedDecodeAttentionTest, WorkspaceCoversEveryPartition) {
  EXPECT_EQ(DecodeAttentionWorkspaceBytes(4, 8, 2, 128, 0), 0u);
  EXPECT_EQ(DecodeAttentionWorkspaceBytes(4, 8, 0, 128, 512), 0u);
  // 64 tokens of context: one partition at any batch size, so no workspace.
  EXPECT_EQ(DecodeAttentionWorkspaceBytes(4, 8, 2, 128, 64), 0u);
  // 513 tokens: 9 partitions of 64 at every batch size up to 4 (4 x 2 x 9 < 1024); 4 sequences
  // need the most.
  EXPECT_EQ(DecodeAttentionWorkspaceBytes(4, 8, 2, 128, 513), 4u * 8 * 9 * (128 + 2) * 4);
  // One sequence at 32k with 32 KV heads: 32 x 64 = 2048 blocks, full partitions.
  EXPECT_EQ(DecodeAttentionWorkspaceBytes(1, 32, 32, 64, 32768), 32u * 64 * (64 + 2) * 4);
  // A smaller batch that splits finer needs more than the largest batch: 128 sequences use
  // 512-token partitions (2 at 1024 tokens), 1 sequence 64-token ones (16).
  const size_t one = DecodeAttentionWorkspaceBytes(1, 8, 8, 128, 1024);
  EXPECT_EQ(one, 1u * 8 * 16 * (128 + 2) * 4);
  EXPECT_GE(DecodeAttentionWorkspaceBytes(128, 8, 8, 128, 1024), one);
  EXPECT_EQ(internal::DecodeWorkspaceFloatsOneLaunch(128, 8, 8, 128, 1024),
            128u * 8 * 2 * (128 + 2));
}

// Precondition checks return before any CUDA call, so these run without a GPU too.
TEST(PagedDecodeAttentionTest, RejectsBadArguments) {
  alignas(16) static __nv_bfloat16 buffer[64];
  alignas(16) static float workspace[16];
  static const int32_t ints[3] = {0, 1, 0};
  const KvLayout layout{.dtype = DType::kBF16,
                        .num_layers = 2,
                        .num_kv_heads = 2,
                        .head_dim = 128,
                        .block_size = 16,
                        .num_blocks = 4};
  const DecodeAttentionArgs valid{.q = buffer,
                                  .out = buffer,
                                  .kv_pool = buffer,
                                  .layout = layout,
                                  .layer = 1,
                                  .num_heads = 8,
                                  .num_seqs = 1,
                                  .token_rows = ints,
                                  .context_lens = ints + 1,
                                  .block_tables = ints + 2,
                                  .max_blocks_per_seq = 1,
                                  .max_context = 16,
                                  .scale = 0.1f};
  auto expect_invalid = [&](DecodeAttentionArgs args, const char* names) {
    const absl::Status status = PagedDecodeAttention(args, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << names << ": " << status;
    EXPECT_NE(std::string(status.message()).find(names), std::string::npos) << status;
  };
  DecodeAttentionArgs args = valid;
  args.q = nullptr;
  expect_invalid(args, "q is null");
  args = valid;
  args.out = nullptr;
  expect_invalid(args, "out is null");
  args = valid;
  args.kv_pool = nullptr;
  expect_invalid(args, "kv_pool");
  args = valid;
  args.token_rows = nullptr;
  expect_invalid(args, "token_rows");
  args = valid;
  args.context_lens = nullptr;
  expect_invalid(args, "context_lens");
  args = valid;
  args.block_tables = nullptr;
  expect_invalid(args, "block_tables");
  args = valid;
  args.out = buffer + 4;
  expect_invalid(args, "aligned");
  args = valid;
  args.num_seqs = -1;
  expect_invalid(args, "num_seqs");
  args = valid;
  args.layout.dtype = DType::kF16;
  expect_invalid(args, "dtype");
  args = valid;
  args.layout.dtype = DType::kFP8E4M3;
  expect_invalid(args, "kv_scales");
  args = valid;
  args.layout.head_dim = 256;
  expect_invalid(args, "head_dim");
  args = valid;
  args.num_heads = 3;
  expect_invalid(args, "num_heads");
  args = valid;
  args.layer = -1;
  expect_invalid(args, "layer");
  args = valid;
  args.max_context = 17;  // one block of 16
  expect_invalid(args, "max_context");
  args = valid;
  args.max_blocks_per_seq = 40;
  args.max_context = 600;  // two partitions: a workspace is needed
  expect_invalid(args, "workspace");
  args.workspace = workspace;
  args.workspace_bytes = sizeof(workspace);
  expect_invalid(args, "workspace_bytes");

  // Nothing to do: OK without touching the device, even with null pointers.
  args = DecodeAttentionArgs{.layout = layout, .num_heads = 8, .num_seqs = 0};
  EXPECT_TRUE(PagedDecodeAttention(args, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels
