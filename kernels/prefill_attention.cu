// Flash-style causal prefill attention over the paged KV pool, on tensor cores (WMMA bf16 16x16x16
// with f32 accumulators).
//
// One thread block computes kBlockM query rows of one item for one query head: 4 warps, each
// owning 16 rows. It walks the item's keys kBlockN at a time, from the first position its first
// row sees (sliding window) to its last row's position (causal). Per key tile: all threads stage
// the K and V rows (looked up through the block table, 16-byte loads) in shared memory; each warp
// computes S = Q·K^T for its rows with WMMA into shared memory, applies the mask and the online
// softmax (each row's 64 scores split over two lanes), writes P as bf16, rescales its running
// output O (f32 in shared memory) and accumulates O += P·V with WMMA. At the end O / l is written
// as bf16; rows past the item's q_len are never written.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "kernels/bf16_vector.cuh"
#include "kernels/kv_element.cuh"
#include "kernels/prefill_attention_launch.h"

namespace tandem::kernels::internal {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBlockM = 64;  // query rows per thread block
constexpr int kBlockN = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = kBlockM / kWarps;  // 16: one WMMA row of fragments
constexpr int kFrag = 16;                       // WMMA m = n = k
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kRowsPerWarp == kFrag, "each warp owns one 16-row strip");

// common/backend/paged_attention.h AttentionStart, on the device.
__device__ __forceinline__ int FirstVisible(int position, int sliding_window) {
  return sliding_window > 0 && position >= sliding_window ? position - sliding_window + 1 : 0;
}

// Shared-memory layout for one head_dim. Rows are padded (8 bf16 / 4 f32) to spread banks; WMMA
// needs leading dimensions that are multiples of 16 bytes and 32-byte aligned fragment pointers,
// which 16-row steps of these strides keep.
template <int kHeadDim>
struct Smem {
  static constexpr int kLdQkv = kHeadDim + 8;  // bf16: Q, K, V tiles
  static constexpr int kLdS = kBlockN + 4;     // f32: scores
  static constexpr int kLdP = kBlockN + 8;     // bf16: probabilities
  static constexpr int kLdO = kHeadDim + 4;    // f32: running output
  static constexpr size_t Align(size_t bytes) { return (bytes + 127) / 128 * 128; }
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + Align(sizeof(__nv_bfloat16) * kBlockM * kLdQkv);
  static constexpr size_t kV = kK + Align(sizeof(__nv_bfloat16) * kBlockN * kLdQkv);
  static constexpr size_t kS = kV + Align(sizeof(__nv_bfloat16) * kBlockN * kLdQkv);
  static constexpr size_t kP = kS + Align(sizeof(float) * kBlockM * kLdS);
  static constexpr size_t kO = kP + Align(sizeof(__nv_bfloat16) * kBlockM * kLdP);
  static constexpr size_t kBytes = kO + Align(sizeof(float) * kBlockM * kLdO);
};

// KvT: the pool's element, __nv_bfloat16 or __nv_fp8_e4m3 (widened to bf16 as the tiles are
// staged; the K scale joins the score scale, the V scale the output: kernels/kv_element.cuh).
template <int kHeadDim, typename KvT>
__global__ void __launch_bounds__(kThreads)
    PrefillAttentionKernel(const PrefillAttentionLaunchArgs args, const int num_q_tiles) {
  using L = Smem<kHeadDim>;
  constexpr int kVectorsPerRow = kHeadDim / kBf16PerVector;
  constexpr int kDimFrags = kHeadDim / kFrag;
  constexpr int kKeyFrags = kBlockN / kFrag;

  const int item = blockIdx.x / num_q_tiles;
  // Later query tiles see more keys: start them first.
  const int q_tile = num_q_tiles - 1 - static_cast<int>(blockIdx.x % num_q_tiles);
  const int head = blockIdx.y;
  const int q_len = args.q_lens[item];
  const int q0 = q_tile * kBlockM;
  if (q0 >= q_len) return;
  const int rows = min(kBlockM, q_len - q0);
  const int start = args.start_positions[item];
  const int64_t first_row = int64_t{args.q_starts[item]} + q0;
  const int64_t row_stride = int64_t{args.num_heads} * kHeadDim;
  const int kv_head = head / (args.num_heads / args.num_kv_heads);
  const int32_t* block_table = args.block_tables + int64_t{item} * args.max_blocks_per_seq;
  const KvT* k_head = static_cast<const KvT*>(args.k_layer) + kv_head * args.head_stride;
  const KvT* v_head = static_cast<const KvT*>(args.v_layer) + kv_head * args.head_stride;
  const float k_scale = args.k_scales != nullptr ? args.k_scales[kv_head] : 1.0f;
  const float v_scale = args.v_scales != nullptr ? args.v_scales[kv_head] : 1.0f;

  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* q_s = reinterpret_cast<__nv_bfloat16*>(smem + L::kQ);
  __nv_bfloat16* k_s = reinterpret_cast<__nv_bfloat16*>(smem + L::kK);
  __nv_bfloat16* v_s = reinterpret_cast<__nv_bfloat16*>(smem + L::kV);

  // Q tile (zero rows past q_len) and O = 0.
  for (int i = threadIdx.x; i < kBlockM * kVectorsPerRow; i += kThreads) {
    const int r = i / kVectorsPerRow;
    const int c = (i % kVectorsPerRow) * kBf16PerVector;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < rows) {
      value = *reinterpret_cast<const uint4*>(args.q + (first_row + r) * row_stride +
                                              head * kHeadDim + c);
    }
    *reinterpret_cast<uint4*>(q_s + r * L::kLdQkv + c) = value;
  }
  float* o_all = reinterpret_cast<float*>(smem + L::kO);
  for (int i = threadIdx.x; i < kBlockM * L::kLdO; i += kThreads) o_all[i] = 0.0f;
  __syncthreads();

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int warp_row0 = warp * kRowsPerWarp;  // first tile row of this warp
  float* s_w = reinterpret_cast<float*>(smem + L::kS) + warp_row0 * L::kLdS;
  __nv_bfloat16* p_w = reinterpret_cast<__nv_bfloat16*>(smem + L::kP) + warp_row0 * L::kLdP;
  float* o_w = o_all + warp_row0 * L::kLdO;

  wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major>
      q_frag[kDimFrags];
#pragma unroll
  for (int k = 0; k < kDimFrags; ++k) {
    wmma::load_matrix_sync(q_frag[k], q_s + warp_row0 * L::kLdQkv + k * kFrag, L::kLdQkv);
  }

  // Each lane owns one row of the warp's strip (lane % 16) and half of its key columns / output
  // dims (lane / 16); the two lanes of a row keep identical copies of its max and sum.
  const int my_row = lane % kRowsPerWarp;
  const int half = lane / kRowsPerWarp;
  const bool row_valid = warp_row0 + my_row < rows;
  const int row_pos = start + q0 + warp_row0 + my_row;
  const int row_first = FirstVisible(row_pos, args.sliding_window);
  const float scale_log2 = args.scale * kLog2e * k_scale;
  float row_max = -INFINITY;  // running max of the scaled scores (log2 units)
  float row_sum = 0.0f;       // running sum of exp2(score - row_max)

  // Positions any row of this warp / block sees.
  const bool warp_has_rows = warp_row0 < rows;
  const int warp_last = start + q0 + min(warp_row0 + kRowsPerWarp, rows) - 1;
  const int warp_first = FirstVisible(start + q0 + warp_row0, args.sliding_window);
  const int key_begin = FirstVisible(start + q0, args.sliding_window);
  const int key_end = start + q0 + rows;  // exclusive

  for (int n0 = key_begin / kBlockN * kBlockN; n0 < key_end; n0 += kBlockN) {
    __syncthreads();  // every warp is done with the previous K/V tile
    for (int i = threadIdx.x; i < kBlockN * kVectorsPerRow; i += kThreads) {
      const int r = i / kVectorsPerRow;
      const int c = (i % kVectorsPerRow) * kBf16PerVector;
      const int pos = n0 + r;
      uint4 k_value = make_uint4(0, 0, 0, 0);
      uint4 v_value = make_uint4(0, 0, 0, 0);
      if (pos >= key_begin && pos < key_end) {
        const int64_t offset = block_table[pos / args.block_size] * args.block_stride +
                               int64_t{pos % args.block_size} * kHeadDim + c;
        k_value = LoadKvAsBf16x8(k_head + offset);
        v_value = LoadKvAsBf16x8(v_head + offset);
      }
      *reinterpret_cast<uint4*>(k_s + r * L::kLdQkv + c) = k_value;
      *reinterpret_cast<uint4*>(v_s + r * L::kLdQkv + c) = v_value;
    }
    __syncthreads();
    // A warp whose rows see none of this tile leaves its state as it is. The others compute
    // S = Q·K^T for their 16 rows (the K tile read as a column-major K^T).
    if (!warp_has_rows || n0 > warp_last || n0 + kBlockN - 1 < warp_first) continue;
#pragma unroll
    for (int j = 0; j < kKeyFrags; ++j) {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> s_frag;
      wmma::fill_fragment(s_frag, 0.0f);
#pragma unroll
      for (int k = 0; k < kDimFrags; ++k) {
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::col_major> k_frag;
        wmma::load_matrix_sync(k_frag, k_s + j * kFrag * L::kLdQkv + k * kFrag, L::kLdQkv);
        wmma::mma_sync(s_frag, q_frag[k], k_frag, s_frag);
      }
      wmma::store_matrix_sync(s_w + j * kFrag, s_frag, L::kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax over this lane's half of its row.
    const float* s_row = s_w + my_row * L::kLdS;
    __nv_bfloat16* p_row = p_w + my_row * L::kLdP;
    const int col0 = half * (kBlockN / 2);
    float tile_max = -INFINITY;
#pragma unroll 8
    for (int c = col0; c < col0 + kBlockN / 2; ++c) {
      const int pos = n0 + c;
      if (row_valid && pos >= row_first && pos <= row_pos) {
        tile_max = fmaxf(tile_max, s_row[c] * scale_log2);
      }
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, kRowsPerWarp));
    const float new_max = fmaxf(row_max, tile_max);
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // no visible key yet
    const float alpha = exp2f(row_max - base);                 // 0 while row_max is -inf
    float tile_sum = 0.0f;
#pragma unroll 8
    for (int c = col0; c < col0 + kBlockN / 2; ++c) {
      const int pos = n0 + c;
      float p = 0.0f;
      if (row_valid && pos >= row_first && pos <= row_pos) p = exp2f(s_row[c] * scale_log2 - base);
      const __nv_bfloat16 p_bf16 = __float2bfloat16(p);
      p_row[c] = p_bf16;
      tile_sum += __bfloat162float(p_bf16);  // the weights P·V uses
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, kRowsPerWarp);
    row_sum = row_sum * alpha + tile_sum;
    row_max = new_max;
    float* o_row = o_w + my_row * L::kLdO;
#pragma unroll 8
    for (int d = half * (kHeadDim / 2); d < (half + 1) * (kHeadDim / 2); ++d) o_row[d] *= alpha;
    __syncwarp();

    // O += P·V.
#pragma unroll
    for (int j = 0; j < kDimFrags; ++j) {
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> o_frag;
      wmma::load_matrix_sync(o_frag, o_w + j * kFrag, L::kLdO, wmma::mem_row_major);
#pragma unroll
      for (int k = 0; k < kKeyFrags; ++k) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> p_frag;
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __nv_bfloat16, wmma::row_major> v_frag;
        wmma::load_matrix_sync(p_frag, p_w + k * kFrag, L::kLdP);
        wmma::load_matrix_sync(v_frag, v_s + k * kFrag * L::kLdQkv + j * kFrag, L::kLdQkv);
        wmma::mma_sync(o_frag, p_frag, v_frag, o_frag);
      }
      wmma::store_matrix_sync(o_w + j * kFrag, o_frag, L::kLdO, wmma::mem_row_major);
    }
    __syncwarp();
  }
  __syncwarp();

  // out = O / l for the valid rows; each lane writes its half of its row.
  if (!row_valid) return;
  const float inv_sum = row_sum > 0.0f ? v_scale / row_sum : 0.0f;
  const float* o_row = o_w + my_row * L::kLdO;
  __nv_bfloat16* out_row =
      args.out + (first_row + warp_row0 + my_row) * row_stride + head * kHeadDim;
#pragma unroll
  for (int d = half * (kHeadDim / 2); d < (half + 1) * (kHeadDim / 2); d += kBf16PerVector) {
    float values[kBf16PerVector];
#pragma unroll
    for (int e = 0; e < kBf16PerVector; ++e) values[e] = o_row[d + e] * inv_sum;
    StoreBf16x8(out_row + d, values);
  }
}

template <int kHeadDim, typename KvT>
cudaError_t Launch(const PrefillAttentionLaunchArgs& args, cudaStream_t stream) {
  constexpr size_t kSmemBytes = Smem<kHeadDim>::kBytes;
  const cudaError_t attribute = cudaFuncSetAttribute(PrefillAttentionKernel<kHeadDim, KvT>,
                                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     static_cast<int>(kSmemBytes));
  if (attribute != cudaSuccess) return attribute;
  const int num_q_tiles = (args.max_q_len + kBlockM - 1) / kBlockM;
  const dim3 grid(static_cast<unsigned>(num_q_tiles) * static_cast<unsigned>(args.num_items),
                  static_cast<unsigned>(args.num_heads));
  PrefillAttentionKernel<kHeadDim, KvT><<<grid, kThreads, kSmemBytes, stream>>>(args, num_q_tiles);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchPrefillAttention(const PrefillAttentionLaunchArgs& args, cudaStream_t stream) {
  switch (args.head_dim) {
    case 64:
      return args.kv_fp8 ? Launch<64, __nv_fp8_e4m3>(args, stream)
                         : Launch<64, __nv_bfloat16>(args, stream);
    case 128:
      return args.kv_fp8 ? Launch<128, __nv_fp8_e4m3>(args, stream)
                         : Launch<128, __nv_bfloat16>(args, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace tandem::kernels::internal
