// Paged decode attention: one query row per sequence against its context in the paged KV pool.
//
// DecodePartitionKernel: one thread block (4 warps) per (sequence, KV head, partition of up to
// kDecodePartitionTokens positions: DecodePartitionTokensFor), serving up to kMaxGroup query heads
// of the KV head's group (a larger group takes several blocks). Each K and V row is loaded once,
// with 16-byte loads: a row is spread over head_dim / 8 lanes, so a warp covers 32 / (head_dim / 8)
// keys per step, and each lane computes its 8-dim share of the dot with every query head, summed
// across the row's lanes by shuffles; each lane loads kUnroll rows before using any, and the
// partition's block-table entries are staged in shared memory first. Scores (in log2 units, q
// pre-scaled) go to shared memory; a warp per head takes their max and exponentiates them; then the
// same walk over V accumulates the weighted values per lane, reduced across lanes and warps. With
// one partition the block writes out = acc / sum in bf16; with several it writes (acc, max, sum) to
// the f32 workspace and DecodeMergeKernel combines the partitions of each (sequence, head).
// Partitions wholly outside [AttentionStart, context) exit at once; context 0 writes zeros.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bf16_vector.cuh"
#include "kernels/block_reduce.cuh"
#include "kernels/decode_attention_launch.h"
#include "kernels/kv_element.cuh"

namespace tandem::kernels::internal {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxGroup = 8;  // query heads per thread block
constexpr int kUnroll = 4;    // K or V rows each lane loads before using any
constexpr float kLog2e = 1.4426950408889634f;

// common/backend/paged_attention.h AttentionStart, on the device.
__device__ __forceinline__ int FirstVisible(int position, int sliding_window) {
  return sliding_window > 0 && position >= sliding_window ? position - sliding_window + 1 : 0;
}

__device__ __forceinline__ float WarpMax(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// The split workspace: weighted values [seq][head][partition][head_dim], then maxes and sums
// [seq][head][partition].
struct Workspace {
  float* acc;
  float* maxes;
  float* sums;

  __device__ Workspace(const DecodeAttentionLaunchArgs& args, int num_partitions) {
    const size_t slots =
        static_cast<size_t>(args.num_seqs) * args.num_heads * static_cast<size_t>(num_partitions);
    acc = args.workspace;
    maxes = acc + slots * args.head_dim;
    sums = maxes + slots;
  }
};

// KvT: the pool's element, __nv_bfloat16 or __nv_fp8_e4m3 (kernels/kv_element.cuh); an fp8
// pool's K scale joins q's, its V scale multiplies the output.
template <int kHeadDim, typename KvT>
__global__ void __launch_bounds__(kThreads)
    DecodePartitionKernel(const DecodeAttentionLaunchArgs args, const int partition_tokens,
                          const int num_partitions, const int group_blocks) {
  constexpr int kLanesPerKey = kHeadDim / kBf16PerVector;  // 8 or 16
  constexpr int kKeysPerWarpStep = 32 / kLanesPerKey;      // 4 or 2
  constexpr int kKeysPerBlockStep = kKeysPerWarpStep * kWarps;
  __shared__ float q_s[kMaxGroup][kHeadDim];
  __shared__ float p_s[kMaxGroup][kDecodePartitionTokens];
  __shared__ float partial_s[kWarps][kMaxGroup][kHeadDim];
  __shared__ float max_s[kMaxGroup];
  __shared__ float sum_s[kMaxGroup];
  // The partition's block ids: a partition spans at most kDecodePartitionTokens blocks (size 1).
  __shared__ int32_t block_s[kDecodePartitionTokens];

  const int seq = blockIdx.x;
  const int kv_head = blockIdx.y / group_blocks;
  const int group_block = blockIdx.y % group_blocks;
  const int partition = blockIdx.z;
  const int group = args.num_heads / args.num_kv_heads;
  const int head0 = kv_head * group + group_block * kMaxGroup;
  const int heads = min(kMaxGroup, group - group_block * kMaxGroup);
  const int64_t row = int64_t{args.token_rows[seq]} * args.num_heads * kHeadDim;
  // This block's heads are contiguous in q and out.
  const __nv_bfloat16* q = args.q + row + int64_t{head0} * kHeadDim;
  __nv_bfloat16* out = args.out + row + int64_t{head0} * kHeadDim;
  const bool direct = num_partitions == 1;

  const int context = args.context_lens[seq];
  if (context <= 0) {  // padding: zeros (the merge kernel writes them when split)
    if (direct) {
      for (int i = threadIdx.x; i < heads * kHeadDim; i += kThreads)
        out[i] = __float2bfloat16(0.0f);
    }
    return;
  }
  const int last = context - 1;
  const int key_begin = max(partition * partition_tokens, FirstVisible(last, args.sliding_window));
  const int key_end = min((partition + 1) * partition_tokens, context);
  if (key_begin >= key_end) return;
  const int n = key_end - key_begin;

  const float k_scale = args.k_scales != nullptr ? args.k_scales[kv_head] : 1.0f;
  const float v_scale = args.v_scales != nullptr ? args.v_scales[kv_head] : 1.0f;
  const float q_scale = args.scale * kLog2e * k_scale;
  for (int i = threadIdx.x; i < heads * kHeadDim; i += kThreads) {
    q_s[i / kHeadDim][i % kHeadDim] = __bfloat162float(q[i]) * q_scale;
  }
  {  // The partition's block-table entries, so each K/V load waits for one memory trip, not two.
    const int32_t* block_table = args.block_tables + int64_t{seq} * args.max_blocks_per_seq;
    const int first = key_begin / args.block_size;
    const int count = (key_end - 1) / args.block_size - first + 1;
    for (int i = threadIdx.x; i < count; i += kThreads) block_s[i] = block_table[first + i];
  }
  __syncthreads();

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int key_in_step = lane / kLanesPerKey;              // which key of the warp's step
  const int dim0 = (lane % kLanesPerKey) * kBf16PerVector;  // this lane's 8 dims of a row
  const KvT* k_head = static_cast<const KvT*>(args.k_layer) + kv_head * args.head_stride;
  const KvT* v_head = static_cast<const KvT*>(args.v_layer) + kv_head * args.head_stride;
  const int first_block = key_begin / args.block_size;
  auto row_offset = [&](int t) {
    const int pos = key_begin + t;
    return block_s[pos / args.block_size - first_block] * args.block_stride +
           int64_t{pos % args.block_size} * kHeadDim + dim0;
  };

  // Scores: p_s[g][t] = log2(e) * scale * q[g]·K[key_begin + t].
  {
    float q_r[kMaxGroup][kBf16PerVector];
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
      for (int j = 0; j < kBf16PerVector; ++j) q_r[g][j] = g < heads ? q_s[g][dim0 + j] : 0.0f;
    }
    for (int base = warp * kKeysPerWarpStep; base < n; base += kKeysPerBlockStep * kUnroll) {
      // kUnroll rows' loads issued before any is used: enough bytes in flight per SM to cover
      // HBM latency (one row per lane at a time reached 0.3 of the copy rate on an H100).
      float k[kUnroll][kBf16PerVector];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int t = base + u * kKeysPerBlockStep + key_in_step;
        if (t < n) {
          LoadKvF32x8(k_head + row_offset(t), k[u]);
        } else {
#pragma unroll
          for (int j = 0; j < kBf16PerVector; ++j) k[u][j] = 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int t = base + u * kKeysPerBlockStep + key_in_step;
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) {
          if (g >= heads) break;  // uniform over the block
          float dot = 0.0f;
#pragma unroll
          for (int j = 0; j < kBf16PerVector; ++j) dot += q_r[g][j] * k[u][j];
#pragma unroll
          for (int offset = kLanesPerKey / 2; offset > 0; offset /= 2) {
            dot += __shfl_xor_sync(0xffffffffu, dot, offset);
          }
          if (t < n && lane % kLanesPerKey == 0) p_s[g][t] = dot;
        }
      }
    }
  }
  __syncthreads();

  // Per head: max, p = exp2(score - max) in place, sum.
  for (int g = warp; g < heads; g += kWarps) {
    float head_max = -INFINITY;
    for (int t = lane; t < n; t += 32) head_max = fmaxf(head_max, p_s[g][t]);
    head_max = WarpMax(head_max);
    float sum = 0.0f;
    for (int t = lane; t < n; t += 32) {
      const float p = exp2f(p_s[g][t] - head_max);
      p_s[g][t] = p;
      sum += p;
    }
    sum = WarpSum(sum);
    if (lane == 0) {
      max_s[g] = head_max;
      sum_s[g] = sum;
    }
  }
  __syncthreads();

  // acc[g] = sum_t p[g][t] * V[key_begin + t], this lane's 8 dims.
  float acc[kMaxGroup][kBf16PerVector] = {};
  for (int base = warp * kKeysPerWarpStep; base < n; base += kKeysPerBlockStep * kUnroll) {
    float v[kUnroll][kBf16PerVector];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = base + u * kKeysPerBlockStep + key_in_step;
      if (t < n) {
        LoadKvF32x8(v_head + row_offset(t), v[u]);
      } else {
#pragma unroll
        for (int j = 0; j < kBf16PerVector; ++j) v[u][j] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = base + u * kKeysPerBlockStep + key_in_step;
      if (t >= n) continue;
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        if (g >= heads) break;
        const float p = p_s[g][t];
#pragma unroll
        for (int j = 0; j < kBf16PerVector; ++j) acc[g][j] += p * v[u][j];
      }
    }
  }
  // Sum over the warp's keys (lanes with the same dims), then over the warps.
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= heads) break;
#pragma unroll
    for (int j = 0; j < kBf16PerVector; ++j) {
#pragma unroll
      for (int offset = kLanesPerKey; offset < 32; offset *= 2) {
        acc[g][j] += __shfl_xor_sync(0xffffffffu, acc[g][j], offset);
      }
    }
  }
  if (key_in_step == 0) {
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= heads) break;
#pragma unroll
      for (int j = 0; j < kBf16PerVector; ++j) partial_s[warp][g][dim0 + j] = acc[g][j];
    }
  }
  __syncthreads();

  const Workspace workspace(args, num_partitions);
  for (int i = threadIdx.x; i < heads * kHeadDim; i += kThreads) {
    const int g = i / kHeadDim;
    const int d = i % kHeadDim;
    float value = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) value += partial_s[w][g][d];
    value *= v_scale;
    if (direct) {
      out[i] = __float2bfloat16(value / sum_s[g]);
    } else {
      const size_t slot =
          (static_cast<size_t>(seq) * args.num_heads + head0 + g) * num_partitions + partition;
      workspace.acc[slot * kHeadDim + d] = value;
      if (d == 0) {
        workspace.maxes[slot] = max_s[g];
        workspace.sums[slot] = sum_s[g];
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels::internal

#include "kernels/decode_attention_mma.cuh"

namespace tandem::kernels::internal {
namespace {

// One block of head_dim threads per (sequence, head): combines the partitions' partial results.
// The partitions are read in parallel (the threads stride over them for the max and the sum; each
// thread walks them for its dimension with kMergeUnroll loads in flight): a serial walk cost one
// memory latency per partition, ~70 us at 64 partitions.
constexpr int kMergeUnroll = 8;

template <int kHeadDim>
__global__ void __launch_bounds__(kHeadDim)
    DecodeMergeKernel(const DecodeAttentionLaunchArgs args, const int partition_tokens,
                      const int num_partitions) {
  constexpr int kMergeWarps = kHeadDim / 32;
  __shared__ float reduce_s[kMergeWarps];
  const int seq = blockIdx.x;
  const int head = blockIdx.y;
  const int d = threadIdx.x;
  const int warp = d / 32;
  const int lane = d % 32;
  __nv_bfloat16* out = args.out + int64_t{args.token_rows[seq]} * args.num_heads * kHeadDim +
                       int64_t{head} * kHeadDim;
  const int context = args.context_lens[seq];
  if (context <= 0) {
    out[d] = __float2bfloat16(0.0f);
    return;
  }
  const int last = context - 1;
  // The partitions DecodePartitionKernel wrote for this sequence.
  const int first_partition = FirstVisible(last, args.sliding_window) / partition_tokens;
  const int last_partition = min(last / partition_tokens, num_partitions - 1);
  const Workspace workspace(args, num_partitions);
  const size_t slot0 = (static_cast<size_t>(seq) * args.num_heads + head) * num_partitions;

  float overall_max = -INFINITY;
  for (int p = first_partition + d; p <= last_partition; p += kHeadDim) {
    overall_max = fmaxf(overall_max, workspace.maxes[slot0 + p]);
  }
  overall_max = WarpMax(overall_max);
  if (lane == 0) reduce_s[warp] = overall_max;
  __syncthreads();
  overall_max = reduce_s[0];
#pragma unroll
  for (int w = 1; w < kMergeWarps; ++w) overall_max = fmaxf(overall_max, reduce_s[w]);
  __syncthreads();

  float sum = 0.0f;
  for (int p = first_partition + d; p <= last_partition; p += kHeadDim) {
    sum += workspace.sums[slot0 + p] * exp2f(workspace.maxes[slot0 + p] - overall_max);
  }
  sum = WarpSum(sum);
  if (lane == 0) reduce_s[warp] = sum;
  __syncthreads();
  sum = 0.0f;
#pragma unroll
  for (int w = 0; w < kMergeWarps; ++w) sum += reduce_s[w];

  float acc = 0.0f;
  for (int p0 = first_partition; p0 <= last_partition; p0 += kMergeUnroll) {
    float values[kMergeUnroll];
    float maxes[kMergeUnroll];
#pragma unroll
    for (int u = 0; u < kMergeUnroll; ++u) {
      const int p = p0 + u;
      const bool in = p <= last_partition;
      values[u] = in ? workspace.acc[(slot0 + p) * kHeadDim + d] : 0.0f;
      maxes[u] = in ? workspace.maxes[slot0 + p] : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kMergeUnroll; ++u) acc += values[u] * exp2f(maxes[u] - overall_max);
  }
  out[d] = __float2bfloat16(acc / sum);
}

template <int kHeadDim>
cudaError_t Launch(const DecodeAttentionLaunchArgs& args, cudaStream_t stream) {
  const int partition_tokens =
      DecodePartitionTokensFor(args.num_seqs, args.num_kv_heads, args.max_context);
  const int num_partitions = DecodeNumPartitions(args.max_context, partition_tokens);
  const int group = args.num_heads / args.num_kv_heads;
  const int group_blocks = (group + kMaxGroup - 1) / kMaxGroup;
  const dim3 grid(static_cast<unsigned>(args.num_seqs),
                  static_cast<unsigned>(args.num_kv_heads * group_blocks),
                  static_cast<unsigned>(num_partitions));
  if (args.tensor_cores && args.kv_fp8) {
    DecodePartitionMmaKernel<kHeadDim, __nv_fp8_e4m3>
        <<<grid, kThreads, 0, stream>>>(args, partition_tokens, num_partitions, group_blocks);
  } else if (args.tensor_cores) {
    DecodePartitionMmaKernel<kHeadDim, __nv_bfloat16>
        <<<grid, kThreads, 0, stream>>>(args, partition_tokens, num_partitions, group_blocks);
  } else if (args.kv_fp8) {
    DecodePartitionKernel<kHeadDim, __nv_fp8_e4m3>
        <<<grid, kThreads, 0, stream>>>(args, partition_tokens, num_partitions, group_blocks);
  } else {
    DecodePartitionKernel<kHeadDim, __nv_bfloat16>
        <<<grid, kThreads, 0, stream>>>(args, partition_tokens, num_partitions, group_blocks);
  }
  if (num_partitions > 1) {
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
    const dim3 merge_grid(static_cast<unsigned>(args.num_seqs),
                          static_cast<unsigned>(args.num_heads));
    DecodeMergeKernel<kHeadDim>
        <<<merge_grid, kHeadDim, 0, stream>>>(args, partition_tokens, num_partitions);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchPagedDecodeAttention(const DecodeAttentionLaunchArgs& args, cudaStream_t stream) {
  switch (args.head_dim) {
    case 64:
      return Launch<64>(args, stream);
    case 128:
      return Launch<128>(args, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace tandem::kernels::internal
