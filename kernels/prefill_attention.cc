#include "kernels/prefill_attention.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"
#include "kernels/attention_checks.h"
#include "kernels/cuda_status.h"
#include "kernels/prefill_attention_launch.h"

namespace tandem::kernels {
namespace {

constexpr int kQueryRowsPerBlock = 64;  // kBlockM in prefill_attention.cu

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("PrefillAttention: ", what));
}

}  // namespace

absl::Status PrefillAttention(const PrefillAttentionArgs& args, cudaStream_t stream) {
  const KvLayout& layout = args.layout;
  if (args.num_items < 0) return Invalid(absl::StrCat("num_items ", args.num_items, " < 0"));
  if (args.max_q_len < 0) return Invalid(absl::StrCat("max_q_len ", args.max_q_len, " < 0"));
  RETURN_IF_ERROR(CheckAttentionShape("PrefillAttention", layout, args.num_heads, args.layer,
                                      args.sliding_window, args.kv_scales));
  const int64_t num_q_tiles =
      (int64_t{args.max_q_len} + kQueryRowsPerBlock - 1) / kQueryRowsPerBlock;
  if (num_q_tiles * args.num_items > std::numeric_limits<int32_t>::max()) {
    return Invalid(absl::StrCat("num_items ", args.num_items, " x query tiles ", num_q_tiles,
                                " exceeds the grid"));
  }
  if (args.num_items == 0 || args.max_q_len == 0) return absl::OkStatus();

  if (args.max_blocks_per_seq <= 0) {
    return Invalid(absl::StrCat("max_blocks_per_seq ", args.max_blocks_per_seq, " <= 0"));
  }
  if (args.q == nullptr) return Invalid("q is null");
  if (args.out == nullptr) return Invalid("out is null");
  if (args.kv_pool == nullptr) return Invalid("kv_pool is null");
  if (args.q_starts == nullptr) return Invalid("q_starts is null");
  if (args.q_lens == nullptr) return Invalid("q_lens is null");
  if (args.start_positions == nullptr) return Invalid("start_positions is null");
  if (args.block_tables == nullptr) return Invalid("block_tables is null");
  RETURN_IF_ERROR(CheckAttentionPointers("PrefillAttention", args.q, args.out, args.kv_pool));

  internal::PrefillAttentionLaunchArgs launch;
  launch.q = args.q;
  launch.out = args.out;
  const LayerKv kv = LayerKvOf(layout, args.kv_pool, args.kv_scales, args.layer);
  launch.k_layer = kv.k;
  launch.v_layer = kv.v;
  launch.kv_fp8 = kv.fp8;
  launch.k_scales = kv.k_scales;
  launch.v_scales = kv.v_scales;
  launch.block_stride = layout.block_stride();
  launch.head_stride = layout.head_stride();
  launch.block_size = layout.block_size;
  launch.num_kv_heads = layout.num_kv_heads;
  launch.head_dim = layout.head_dim;
  launch.num_heads = args.num_heads;
  launch.num_items = args.num_items;
  launch.q_starts = args.q_starts;
  launch.q_lens = args.q_lens;
  launch.start_positions = args.start_positions;
  launch.block_tables = args.block_tables;
  launch.max_blocks_per_seq = args.max_blocks_per_seq;
  launch.max_q_len = args.max_q_len;
  launch.sliding_window = args.sliding_window;
  launch.scale = args.scale;
  return CudaStatus(internal::LaunchPrefillAttention(launch, stream),
                    "PrefillAttention kernel launch");
}

}  // namespace tandem::kernels
