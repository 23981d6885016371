#include "kernels/decode_attention.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"
#include "kernels/attention_checks.h"
#include "kernels/cuda_status.h"
#include "kernels/decode_attention_launch.h"

namespace tandem::kernels {
namespace {

absl::Status Invalid(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("PagedDecodeAttention: ", what));
}

}  // namespace

size_t DecodeAttentionWorkspaceBytes(int num_seqs, int num_heads, int num_kv_heads, int head_dim,
                                     int max_context) {
  if (num_seqs <= 0 || num_heads <= 0 || num_kv_heads <= 0 || head_dim <= 0 || max_context <= 0) {
    return 0;
  }
  return internal::DecodeWorkspaceFloats(num_seqs, num_heads, num_kv_heads, head_dim, max_context) *
         sizeof(float);
}

absl::Status PagedDecodeAttention(const DecodeAttentionArgs& args, cudaStream_t stream) {
  const KvLayout& layout = args.layout;
  if (args.num_seqs < 0) return Invalid(absl::StrCat("num_seqs ", args.num_seqs, " < 0"));
  RETURN_IF_ERROR(CheckAttentionShape("PagedDecodeAttention", layout, args.num_heads, args.layer,
                                      args.sliding_window, args.kv_scales));
  if (args.max_context < 0) return Invalid(absl::StrCat("max_context ", args.max_context, " < 0"));
  if (args.max_blocks_per_seq < 0) {
    return Invalid(absl::StrCat("max_blocks_per_seq ", args.max_blocks_per_seq, " < 0"));
  }
  if (int64_t{args.max_context} > int64_t{args.max_blocks_per_seq} * layout.block_size) {
    return Invalid(absl::StrCat("max_context ", args.max_context, " > max_blocks_per_seq ",
                                args.max_blocks_per_seq, " x block_size ", layout.block_size));
  }
  if (internal::DecodeNumPartitions(args.max_context, internal::kDecodeMinPartitionTokens) >
      65535) {
    return Invalid(absl::StrCat("max_context ", args.max_context, " needs more than 65535 ",
                                internal::kDecodeMinPartitionTokens, "-token partitions"));
  }
  if (args.num_seqs == 0) return absl::OkStatus();

  if (args.q == nullptr) return Invalid("q is null");
  if (args.out == nullptr) return Invalid("out is null");
  if (args.kv_pool == nullptr) return Invalid("kv_pool is null");
  if (args.token_rows == nullptr) return Invalid("token_rows is null");
  if (args.context_lens == nullptr) return Invalid("context_lens is null");
  if (args.block_tables == nullptr) return Invalid("block_tables is null");
  RETURN_IF_ERROR(CheckAttentionPointers("PagedDecodeAttention", args.q, args.out, args.kv_pool));
  const size_t workspace_bytes = args.max_context <= 0
                                     ? 0
                                     : internal::DecodeWorkspaceFloatsOneLaunch(
                                           args.num_seqs, args.num_heads, layout.num_kv_heads,
                                           layout.head_dim, args.max_context) *
                                           sizeof(float);
  if (workspace_bytes > 0 && args.workspace == nullptr) {
    return Invalid(absl::StrCat("workspace is null; ", workspace_bytes, " bytes needed"));
  }
  if (args.workspace_bytes < workspace_bytes) {
    return Invalid(
        absl::StrCat("workspace_bytes ", args.workspace_bytes, " < ", workspace_bytes, " needed"));
  }

  internal::DecodeAttentionLaunchArgs launch;
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
  launch.num_seqs = args.num_seqs;
  launch.token_rows = args.token_rows;
  launch.context_lens = args.context_lens;
  launch.block_tables = args.block_tables;
  launch.max_blocks_per_seq = args.max_blocks_per_seq;
  launch.max_context = args.max_context;
  launch.sliding_window = args.sliding_window;
  launch.scale = args.scale;
  launch.tensor_cores = args.tensor_cores;
  launch.workspace = args.workspace;
  return CudaStatus(internal::LaunchPagedDecodeAttention(launch, stream),
                    "PagedDecodeAttention kernel launch");
}

}  // namespace tandem::kernels
