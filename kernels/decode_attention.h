// Paged decode attention: one query token per sequence against its whole context in the paged KV
// pool. GQA-aware: one thread block reads a KV head's keys and values once for all the query heads
// of its group. Contexts are split along the sequence into partitions (shorter ones when the batch
// is small) whose partial results (max, sum, weighted values) are merged by a second kernel, so
// small batches still fill the GPU.
#ifndef TANDEM_KERNELS_DECODE_ATTENTION_H_
#define TANDEM_KERNELS_DECODE_ATTENTION_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "common/kv/kv_layout.h"

namespace tandem::kernels {

struct DecodeAttentionArgs {
  const __nv_bfloat16* q = nullptr;  // [tokens, num_heads * head_dim], rotated
  __nv_bfloat16* out = nullptr;      // [tokens, num_heads * head_dim]
  const void* kv_pool = nullptr;     // layout.dtype elements: bf16, or fp8 E4M3 codes
  KvLayout layout;                   // dtype kBF16 or kFP8E4M3
  // kFP8E4M3: [num_layers][2 (K, V)][num_kv_heads] scales on the device (common/kv/kv_scales.h):
  // an element's value is its code's times its head's scale. Unused for bf16.
  const float* kv_scales = nullptr;
  int layer = 0;
  int num_heads = 0;
  int num_seqs = 0;
  // Sequence s's query is row token_rows[s] of q/out, at position context_lens[s] - 1; it sees
  // positions [AttentionStart, context_lens[s] - 1] through block_tables[s * max_blocks_per_seq +
  // p / block_size]. context_lens[s] == 0 (padding of a captured CUDA graph) writes zeros.
  const int32_t* token_rows = nullptr;    // [num_seqs], device
  const int32_t* context_lens = nullptr;  // [num_seqs], device
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq], device
  int max_blocks_per_seq = 0;
  // >= every context_lens[s]: sizes the split grid (a captured graph passes the longest context
  // it will ever see; partitions past a sequence's end exit at once).
  int max_context = 0;
  int sliding_window = 0;
  float scale = 0.0f;
  // The partition kernel: tensor cores (mma.sync; the default) or CUDA cores (FMAs and shuffles;
  // kept as the second implementation the tests and the benchmark compare).
  bool tensor_cores = true;
  float* workspace = nullptr;  // DecodeAttentionWorkspaceBytes(...) bytes, device
  size_t workspace_bytes = 0;
};

// Device workspace the split partials need for any launch of up to `num_seqs` sequences with
// contexts up to `max_context`.
size_t DecodeAttentionWorkspaceBytes(int num_seqs, int num_heads, int num_kv_heads, int head_dim,
                                     int max_context);

// Checks: pointers (kv_scales for fp8), num_seqs >= 0, layout.dtype kBF16 or kFP8E4M3, head_dim 64
// or 128, num_heads a multiple of num_kv_heads, layer in range, max_context <= max_blocks_per_seq *
// block_size, workspace large enough. num_seqs == 0 is a no-op.
absl::Status PagedDecodeAttention(const DecodeAttentionArgs& args, cudaStream_t stream);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_DECODE_ATTENTION_H_
