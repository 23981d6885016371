// The tensor-core partition kernel of paged decode attention (included by decode_attention.cu,
// which defines FirstVisible, WarpMax, WarpSum and Workspace before including it).
//
// DecodePartitionMmaKernel: the same grid and outputs as DecodePartitionKernel (one block of 4
// warps per (sequence, KV head, partition); up to 8 query heads of the group per block), but the
// two products run on tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulate), with the
// group's query heads as the n = 8 side: S^T[keys x heads] = K · Q^T, then O^T[dims x heads] =
// V^T · P^T. K and V come into shared memory 64 rows at a time with cp.async (16 bytes per
// instruction; rows past the partition's end are zeroed, so a poisoned pool never reaches an
// accumulator), and are read with ldmatrix (V transposed). Scores go to shared memory in f32 (in
// log2 units, scaled after the product); a warp per head takes their max and writes
// p = exp2(s - max) rounded to bf16 (the sum is taken over the rounded values, so the weights
// stay normalized). On the first GPU run the CUDA-core kernel spent ~0.4 instructions per K/V byte
// and reached 0.2-0.3 of the copy rate; here a warp instruction moves 16 bytes per lane.
#ifndef TANDEM_KERNELS_DECODE_ATTENTION_MMA_CUH_
#define TANDEM_KERNELS_DECODE_ATTENTION_MMA_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::kernels::internal {
namespace {

constexpr int kMmaTileKeys = 64;  // K or V rows staged in shared memory at a time
constexpr int kMmaHeads = 8;      // the mma's n: query heads per block (padded with zeros)
constexpr int kMmaPad = 8;        // bf16 padding per shared row: 16 bytes, conflict-free ldmatrix

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void CpAsync16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SharedAddress(shared)),
               "l"(global));
}

__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::);
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(p)));
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SharedAddress(p)));
}

__device__ __forceinline__ void LdMatrixX2(uint32_t (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(SharedAddress(p)));
}

// d += a · b for one m16n8k16 tile (bf16 inputs, f32 accumulators).
__device__ __forceinline__ void MmaBf16(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// KvT: __nv_bfloat16 (staged by cp.async) or __nv_fp8_e4m3 (loaded a tile ahead into registers and
// widened to bf16 into shared memory; the K scale joins the score scale, the V scale the output).
template <int kHeadDim, typename KvT>
__global__ void __launch_bounds__(kThreads)
    DecodePartitionMmaKernel(const DecodeAttentionLaunchArgs args, const int partition_tokens,
                             const int num_partitions, const int group_blocks) {
  constexpr int kRow = kHeadDim + kMmaPad;                 // bf16 per shared K/V/Q row
  constexpr int kChunksPerRow = kHeadDim / 8;              // 16-byte chunks of a row
  constexpr int kDimsPerWarp = kHeadDim / kWarps;          // output dims each warp owns
  constexpr int kMTilesPerWarp = kDimsPerWarp / 16;        // 2 (128) or 1 (64)
  constexpr int kPRow = kDecodePartitionTokens + kMmaPad;  // bf16 per shared P row
  static_assert(kMTilesPerWarp >= 1, "head_dim 64 or 128");
  __shared__ alignas(16) __nv_bfloat16 q_s[kMmaHeads][kRow];
  __shared__ alignas(16) __nv_bfloat16 tile_s[kMmaTileKeys][kRow];
  __shared__ alignas(16) __nv_bfloat16 p16_s[kMmaHeads][kPRow];
  __shared__ float s_s[kMmaHeads][kDecodePartitionTokens];
  __shared__ float max_s[kMmaHeads];
  __shared__ float sum_s[kMmaHeads];
  __shared__ int32_t block_s[kDecodePartitionTokens];

  const int seq = blockIdx.x;
  const int kv_head = blockIdx.y / group_blocks;
  const int group_block = blockIdx.y % group_blocks;
  const int partition = blockIdx.z;
  const int group = args.num_heads / args.num_kv_heads;
  const int head0 = kv_head * group + group_block * kMmaHeads;
  const int heads = min(kMmaHeads, group - group_block * kMmaHeads);
  const int64_t row = int64_t{args.token_rows[seq]} * args.num_heads * kHeadDim;
  const __nv_bfloat16* q = args.q + row + int64_t{head0} * kHeadDim;
  __nv_bfloat16* out = args.out + row + int64_t{head0} * kHeadDim;
  const bool direct = num_partitions == 1;

  const int context = args.context_lens[seq];
  if (context <= 0) {
    if (direct) {
      for (int i = threadIdx.x; i < heads * kHeadDim; i += kThreads) {
        out[i] = __float2bfloat16(0.0f);
      }
    }
    return;
  }
  const int last = context - 1;
  const int key_begin = max(partition * partition_tokens, FirstVisible(last, args.sliding_window));
  const int key_end = min((partition + 1) * partition_tokens, context);
  if (key_begin >= key_end) return;
  const int n = key_end - key_begin;
  const int n_tiles = (n + kMmaTileKeys - 1) / kMmaTileKeys;

  for (int i = threadIdx.x; i < kMmaHeads * kHeadDim; i += kThreads) {
    const int g = i / kHeadDim;
    q_s[g][i % kHeadDim] = g < heads ? q[i] : __float2bfloat16(0.0f);
  }
  const int first_block = key_begin / args.block_size;
  {
    const int32_t* block_table = args.block_tables + int64_t{seq} * args.max_blocks_per_seq;
    const int count = (key_end - 1) / args.block_size - first_block + 1;
    for (int i = threadIdx.x; i < count; i += kThreads) block_s[i] = block_table[first_block + i];
  }
  __syncthreads();

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group_id = lane / 4;  // the mma fragments' row within an 8-row half
  const int pair = lane % 4;      // their column pair
  const float k_scale = args.k_scales != nullptr ? args.k_scales[kv_head] : 1.0f;
  const float v_scale = args.v_scales != nullptr ? args.v_scales[kv_head] : 1.0f;
  const float score_scale = args.scale * kLog2e * k_scale;

  // Stages rows [tile0, tile0 + 64) of `head` (K or V) into tile_s; rows past n are zeros.
  auto stage = [&](const KvT* head, int tile0) {
#pragma unroll
    for (int i = 0; i < kMmaTileKeys * kChunksPerRow / kThreads; ++i) {
      const int chunk = threadIdx.x + i * kThreads;
      const int r = chunk / kChunksPerRow;
      const int c = (chunk % kChunksPerRow) * 8;
      const int t = tile0 + r;
      if (t < n) {
        const int pos = key_begin + t;
        const int64_t offset = block_s[pos / args.block_size - first_block] * args.block_stride +
                               int64_t{pos % args.block_size} * kHeadDim + c;
        CpAsync16(&tile_s[r][c], head + offset);
      } else {
        *reinterpret_cast<uint4*>(&tile_s[r][c]) = make_uint4(0, 0, 0, 0);
      }
    }
    CpAsyncWaitAll();
    __syncthreads();
  };

  // fp8: a tile's codes come into registers with 16-byte loads (16 codes each) one tile ahead:
  // tile i + 1's loads are in flight while tile i's products run, then widen to bf16 into tile_s
  // (zeros past n). A synchronous load-and-widen per tile ran at half the bf16 kernel's speed.
  constexpr int kFp8Chunk = 16;
  constexpr int kFp8ChunksPerRow = kHeadDim / kFp8Chunk;
  constexpr int kFp8Loads = kMmaTileKeys * kFp8ChunksPerRow / kThreads;  // 2 (64) or 4 (128)
  uint4 raw[kFp8Loads];
  auto load_fp8 = [&](const KvT* head, int tile0) {
#pragma unroll
    for (int i = 0; i < kFp8Loads; ++i) {
      const int chunk = threadIdx.x + i * kThreads;
      const int t = tile0 + chunk / kFp8ChunksPerRow;
      raw[i] = make_uint4(0, 0, 0, 0);  // code 0 is +0
      if (t < n) {
        const int pos = key_begin + t;
        const int64_t offset = block_s[pos / args.block_size - first_block] * args.block_stride +
                               int64_t{pos % args.block_size} * kHeadDim +
                               (chunk % kFp8ChunksPerRow) * kFp8Chunk;
        raw[i] = *reinterpret_cast<const uint4*>(head + offset);
      }
    }
  };
  auto widen_fp8 = [&]() {
#pragma unroll
    for (int i = 0; i < kFp8Loads; ++i) {
      const int chunk = threadIdx.x + i * kThreads;
      const int r = chunk / kFp8ChunksPerRow;
      const int c = (chunk % kFp8ChunksPerRow) * kFp8Chunk;
      *reinterpret_cast<uint4*>(&tile_s[r][c]) = WidenFp8x8ToBf16(make_uint2(raw[i].x, raw[i].y));
      *reinterpret_cast<uint4*>(&tile_s[r][c + 8]) =
          WidenFp8x8ToBf16(make_uint2(raw[i].z, raw[i].w));
    }
  };
  // Puts tile `tile` of `head` in tile_s for every thread to read.
  auto begin_tile = [&](const KvT* head, int tile) {
    if constexpr (sizeof(KvT) == 1) {
      if (tile == 0) load_fp8(head, 0);
      widen_fp8();
      __syncthreads();
      if (tile + 1 < n_tiles) load_fp8(head, (tile + 1) * kMmaTileKeys);
    } else {
      stage(head, tile * kMmaTileKeys);
    }
  };

  // 1. Scores: each warp takes 16 of the tile's keys against the 8 heads.
  const KvT* k_head = static_cast<const KvT*>(args.k_layer) + kv_head * args.head_stride;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile0 = tile * kMmaTileKeys;
    begin_tile(k_head, tile);
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int key0 = warp * 16;
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t a[4];
      uint32_t b[2];
      LdMatrixX4(a, &tile_s[key0 + lane % 16][kk * 16 + (lane / 16) * 8]);
      LdMatrixX2(b, &q_s[lane % 8][kk * 16 + ((lane / 8) % 2) * 8]);
      MmaBf16(s, a, b);
    }
    // s[0], s[1]: key key0 + group_id, heads 2 * pair and 2 * pair + 1; s[2], s[3]: key + 8.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int t = tile0 + key0 + group_id + (i / 2) * 8;
      const int g = 2 * pair + i % 2;
      if (g < heads && t < n) s_s[g][t] = s[i] * score_scale;
    }
    __syncthreads();  // tile_s is restaged next
  }

  // 2. Per head: max, p = exp2(score - max) as bf16, and the sum of the rounded p.
  const int n_padded = n_tiles * kMmaTileKeys;
  for (int g = warp; g < kMmaHeads; g += kWarps) {
    if (g >= heads) {
      for (int t = lane; t < n_padded; t += 32) p16_s[g][t] = __float2bfloat16(0.0f);
      continue;
    }
    float head_max = -INFINITY;
    for (int t = lane; t < n; t += 32) head_max = fmaxf(head_max, s_s[g][t]);
    head_max = WarpMax(head_max);
    float sum = 0.0f;
    for (int t = lane; t < n_padded; t += 32) {
      const __nv_bfloat16 p = __float2bfloat16(t < n ? exp2f(s_s[g][t] - head_max) : 0.0f);
      p16_s[g][t] = p;
      sum += __bfloat162float(p);
    }
    sum = WarpSum(sum);
    if (lane == 0) {
      max_s[g] = head_max;
      sum_s[g] = sum;
    }
  }
  __syncthreads();

  // 3. O^T[dims x heads] += V^T · P^T: each warp owns kDimsPerWarp of the dims.
  float o[kMTilesPerWarp][4] = {};
  const KvT* v_head = static_cast<const KvT*>(args.v_layer) + kv_head * args.head_stride;
  for (int tile = 0; tile < n_tiles; ++tile) {
    const int tile0 = tile * kMmaTileKeys;
    begin_tile(v_head, tile);
#pragma unroll
    for (int ks = 0; ks < kMmaTileKeys / 16; ++ks) {
      uint32_t b[2];
      LdMatrixX2(b, &p16_s[lane % 8][tile0 + ks * 16 + ((lane / 8) % 2) * 8]);
#pragma unroll
      for (int mt = 0; mt < kMTilesPerWarp; ++mt) {
        const int dim0 = warp * kDimsPerWarp + mt * 16;
        uint32_t a[4];
        LdMatrixX4Trans(a,
                        &tile_s[ks * 16 + (lane / 16) * 8 + lane % 8][dim0 + ((lane / 8) % 2) * 8]);
        MmaBf16(o[mt], a, b);
      }
    }
    __syncthreads();
  }

  // o[mt][0], o[mt][1]: dim dim0 + group_id, heads 2 * pair, 2 * pair + 1; [2], [3]: dim + 8.
  const Workspace workspace(args, num_partitions);
#pragma unroll
  for (int mt = 0; mt < kMTilesPerWarp; ++mt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int d = warp * kDimsPerWarp + mt * 16 + group_id + (i / 2) * 8;
      const int g = 2 * pair + i % 2;
      if (g >= heads) continue;
      if (direct) {
        out[g * kHeadDim + d] = __float2bfloat16(o[mt][i] * v_scale / sum_s[g]);
      } else {
        const size_t slot =
            (static_cast<size_t>(seq) * args.num_heads + head0 + g) * num_partitions + partition;
        workspace.acc[slot * kHeadDim + d] = o[mt][i] * v_scale;
      }
    }
  }
  if (!direct && threadIdx.x < heads) {
    const int g = threadIdx.x;
    const size_t slot =
        (static_cast<size_t>(seq) * args.num_heads + head0 + g) * num_partitions + partition;
    workspace.maxes[slot] = max_s[g];
    workspace.sums[slot] = sum_s[g];
  }
}

}  // namespace
}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_DECODE_ATTENTION_MMA_CUH_
