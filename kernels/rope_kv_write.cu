// Bias + per-head q/k RMSNorm + rotate_half RoPE + paged K/V write (kernels/rope_kv_write.h).
// Grid: x = token, y = groups of kWarps heads (looping when the heads outnumber the grid). Each
// block first puts the token's cos/sin (precise sincosf of f32(position) * inv_freq[i]) in shared
// memory; then one warp handles one head: lanes walk the head's dimension pairs (i, i + half), a
// warp reduction gives the head's RMS when the head is normalized. The order of operations is the
// CPU backend's (common/backend/cpu_forward.cc QkvPostprocess).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/block_reduce.cuh"
#include "kernels/kv_element.cuh"
#include "kernels/rope_kv_write_launch.h"

namespace tandem::kernels::internal {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxGridY = 65535;

// KvT: the pool's element, __nv_bfloat16 or __nv_fp8_e4m3 (kernels/kv_element.cuh).
template <typename KvT>
__global__ void RopeKvWriteKernel(const RopeKvWriteLaunchArgs args) {
  extern __shared__ float trig[];  // cos[half], then sin[half]
  const int t = blockIdx.x;
  const int head_dim = args.head_dim;
  const int half = head_dim / 2;
  float* cos_table = trig;
  float* sin_table = trig + half;
  const float position = static_cast<float>(args.positions[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float s;
    float c;
    sincosf(position * args.inv_freq[i], &s, &c);
    cos_table[i] = c;
    sin_table[i] = s;
  }
  __syncthreads();

  const int64_t slot = args.slot_mapping[t];
  const bool write_kv = slot >= 0 && slot < args.pool_slots;
  const int64_t block = write_kv ? slot / args.block_size : 0;
  const int64_t slot_in_block = write_kv ? slot % args.block_size : 0;
  const int total_heads = args.num_heads + 2 * args.num_kv_heads;
  const float* row = args.qkv + int64_t{t} * total_heads * head_dim;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;

  // h depends only on the warp, so every branch below is uniform across the warp.
  for (int h = blockIdx.y * warps + warp; h < total_heads; h += gridDim.y * warps) {
    const bool is_q = h < args.num_heads;
    const bool is_k = !is_q && h < args.num_heads + args.num_kv_heads;
    if (!is_q && !write_kv) continue;
    const float* src = row + int64_t{h} * head_dim;
    const __nv_bfloat16* bias =
        args.qkv_bias != nullptr ? args.qkv_bias + int64_t{h} * head_dim : nullptr;
    __nv_bfloat16* q_dst = nullptr;
    KvT* kv_dst = nullptr;
    float inv_scale = 1.0f;  // fp8: 1 / scale, exact for the powers of two the scales are
    if (is_q) {
      q_dst = args.q_out + (int64_t{t} * args.num_heads + h) * head_dim;
    } else {
      const int kv = is_k ? 0 : 1;
      const int kv_head = h - args.num_heads - kv * args.num_kv_heads;
      kv_dst = static_cast<KvT*>(args.kv_pool) + args.layer_offset + kv * args.kv_stride +
               block * args.block_stride + kv_head * args.head_stride + slot_in_block * head_dim;
      if (args.layer_scales != nullptr) {
        inv_scale = 1.0f / args.layer_scales[kv * args.num_kv_heads + kv_head];
      }
    }
    // Element i of the head, rotated or not, to wherever it goes.
    auto store = [&](int i, float value) {
      if (is_q) {
        q_dst[i] = __float2bfloat16_rn(value);
      } else {
        StoreKv(kv_dst + i, value, inv_scale);
      }
    };

    if (!is_q && !is_k) {  // V: bias only
      for (int i = lane; i < head_dim; i += 32) {
        float v = src[i];
        if (bias != nullptr) v += __bfloat162float(bias[i]);
        store(i, v);
      }
      continue;
    }

    const __nv_bfloat16* norm = is_q ? args.q_norm : args.k_norm;
    float inv_rms = 1.0f;
    if (norm != nullptr) {
      float sum_squares = 0.0f;
      for (int i = lane; i < head_dim; i += 32) {
        float v = src[i];
        if (bias != nullptr) v += __bfloat162float(bias[i]);
        sum_squares += v * v;
      }
      sum_squares = WarpSum(sum_squares);
      inv_rms = 1.0f / sqrtf(sum_squares / static_cast<float>(head_dim) + args.eps);
    }
    for (int i = lane; i < half; i += 32) {
      float a = src[i];
      float b = src[i + half];
      if (bias != nullptr) {
        a += __bfloat162float(bias[i]);
        b += __bfloat162float(bias[i + half]);
      }
      if (norm != nullptr) {
        a = __bfloat162float(norm[i]) * (a * inv_rms);
        b = __bfloat162float(norm[i + half]) * (b * inv_rms);
      }
      const float c = cos_table[i];
      const float s = sin_table[i];
      store(i, a * c - b * s);
      store(i + half, b * c + a * s);
    }
  }
}

}  // namespace

cudaError_t LaunchRopeKvWrite(const RopeKvWriteLaunchArgs& args, cudaStream_t stream) {
  const int total_heads = args.num_heads + 2 * args.num_kv_heads;
  int groups = (total_heads + kWarps - 1) / kWarps;
  if (groups > kMaxGridY) groups = kMaxGridY;
  const dim3 grid(static_cast<unsigned>(args.n), static_cast<unsigned>(groups));
  const size_t shared_bytes = sizeof(float) * static_cast<size_t>(args.head_dim);
  if (args.kv_fp8) {
    RopeKvWriteKernel<__nv_fp8_e4m3><<<grid, kWarps * 32, shared_bytes, stream>>>(args);
  } else {
    RopeKvWriteKernel<__nv_bfloat16><<<grid, kWarps * 32, shared_bytes, stream>>>(args);
  }
  return cudaGetLastError();
}

}  // namespace tandem::kernels::internal
