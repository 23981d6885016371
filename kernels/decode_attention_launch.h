// Internal to kernels/: the CUDA launch behind kernels/decode_attention.h, defined in
// decode_attention.cu and called by decode_attention.cc once the arguments are checked. Plain C++
// and CUDA runtime only: the KV layout arrives as the pointers and strides the kernel needs.
#ifndef TANDEM_KERNELS_DECODE_ATTENTION_LAUNCH_H_
#define TANDEM_KERNELS_DECODE_ATTENTION_LAUNCH_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tandem::kernels::internal {

// Tokens of one split-K partition: one thread block per (sequence, KV head, partition). At most
// kDecodePartitionTokens (the kernel's shared buffers are sized for it); halved, down to
// kDecodeMinPartitionTokens, while the grid would have fewer than kDecodeTargetBlocks blocks, so
// a small batch still fills the GPU with short blocks. (One 512-token partition per block left a
// batch-1 step at context 1024 with 16 blocks on 132 SMs: 2.3 ms of a 8 ms Llama-3-8B step.)
inline constexpr int kDecodePartitionTokens = 512;
inline constexpr int kDecodeMinPartitionTokens = 64;
inline constexpr int kDecodeTargetBlocks = 1024;

inline int CeilDiv(int a, int b) { return (a + b - 1) / b; }

// The partition size a launch for these sizes uses (a pure function of them, so a captured CUDA
// graph and the workspace sizing agree).
inline int DecodePartitionTokensFor(int num_seqs, int num_kv_heads, int max_context) {
  int tokens = kDecodePartitionTokens;
  while (tokens > kDecodeMinPartitionTokens &&
         int64_t{num_seqs} * num_kv_heads * CeilDiv(max_context > 0 ? max_context : 1, tokens) <
             kDecodeTargetBlocks) {
    tokens /= 2;
  }
  return tokens;
}

// Partitions the grid has for contexts up to `max_context` (at least 1).
inline int DecodeNumPartitions(int max_context, int partition_tokens) {
  const int partitions = CeilDiv(max_context, partition_tokens);
  return partitions > 1 ? partitions : 1;
}

// f32 values of the split workspace one launch of `num_seqs` sequences needs: per (sequence,
// head, partition) head_dim weighted values, a max and a sum. With a single partition the kernel
// writes the output directly and needs none.
inline size_t DecodeWorkspaceFloatsOneLaunch(int num_seqs, int num_heads, int num_kv_heads,
                                             int head_dim, int max_context) {
  const int partitions = DecodeNumPartitions(
      max_context, DecodePartitionTokensFor(num_seqs, num_kv_heads, max_context));
  if (partitions == 1) return 0;
  return static_cast<size_t>(num_seqs) * static_cast<size_t>(num_heads) *
         static_cast<size_t>(partitions) * static_cast<size_t>(head_dim + 2);
}

// The workspace that serves every launch of up to `num_seqs` sequences (a smaller batch may split
// finer, so the largest batch alone does not bound it).
inline size_t DecodeWorkspaceFloats(int num_seqs, int num_heads, int num_kv_heads, int head_dim,
                                    int max_context) {
  size_t most = 0;
  for (int seqs = 1; seqs <= num_seqs; ++seqs) {
    const size_t floats =
        DecodeWorkspaceFloatsOneLaunch(seqs, num_heads, num_kv_heads, head_dim, max_context);
    if (floats > most) most = floats;
  }
  return most;
}

struct DecodeAttentionLaunchArgs {
  const __nv_bfloat16* q = nullptr;
  __nv_bfloat16* out = nullptr;
  // kv_pool + KvLayout::Offset(layer, 0|1, 0, 0, 0): __nv_bfloat16, or __nv_fp8_e4m3 codes when
  // kv_fp8, whose values are the codes' times k_scales / v_scales[kv_head] (this layer's).
  const void* k_layer = nullptr;
  const void* v_layer = nullptr;
  bool kv_fp8 = false;
  const float* k_scales = nullptr;
  const float* v_scales = nullptr;
  int64_t block_stride = 0;  // KvLayout strides, in elements
  int64_t head_stride = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // 64 or 128
  int num_heads = 0;
  int num_seqs = 0;
  const int32_t* token_rows = nullptr;
  const int32_t* context_lens = nullptr;
  const int32_t* block_tables = nullptr;
  int max_blocks_per_seq = 0;
  int max_context = 0;
  int sliding_window = 0;
  float scale = 0.0f;
  bool tensor_cores = true;    // DecodePartitionMmaKernel, else the CUDA-core DecodePartitionKernel
  float* workspace = nullptr;  // DecodeWorkspaceFloatsOneLaunch(...) floats; unused with one
                               // partition
};

// Preconditions (checked by the caller): num_seqs > 0, non-null pointers (the scales with kv_fp8)
// with q, out and the pool 16-byte aligned, head_dim 64 or 128, num_heads a positive multiple of
// num_kv_heads, block_size > 0, sliding_window >= 0, max_context >= 0, the workspace as large as
// DecodeWorkspaceFloatsOneLaunch.
cudaError_t LaunchPagedDecodeAttention(const DecodeAttentionLaunchArgs& args, cudaStream_t stream);

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_DECODE_ATTENTION_LAUNCH_H_
