#include "kernels/rope_kv_write_reference.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/util/fp8.h"

namespace tandem::kernels {
namespace {

// y = w * (x * rsqrt(mean(x^2) + eps)) over one head, in place (common/backend/row_ops.h RmsNorm).
void NormalizeHead(float* x, const Bf16Bits* weight, int head_dim, float eps) {
  float sum_squares = 0.0f;
  for (int i = 0; i < head_dim; ++i) sum_squares += x[i] * x[i];
  const float inv_rms = 1.0f / std::sqrt(sum_squares / static_cast<float>(head_dim) + eps);
  for (int i = 0; i < head_dim; ++i) x[i] = Bf16ToFloat(weight[i]) * (x[i] * inv_rms);
}

// rotate_half: dimension i pairs with i + half (common/backend/rope.h ApplyRope).
void RotateHead(float* x, const float* cos, const float* sin, int half) {
  for (int i = 0; i < half; ++i) {
    const float a = x[i];
    const float b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i] + a * sin[i];
  }
}

}  // namespace

void RopeKvWriteReference(const RopeKvWriteReferenceArgs& args) {
  const KvLayout& layout = args.layout;
  const int head_dim = layout.head_dim;
  const int half = head_dim / 2;
  const int kv_heads = layout.num_kv_heads;
  const int total_heads = args.num_heads + 2 * kv_heads;
  const int64_t row_width = int64_t{total_heads} * head_dim;
  const int64_t pool_slots = int64_t{layout.num_blocks} * layout.block_size;
  std::vector<float> cos(half);
  std::vector<float> sin(half);
  std::vector<float> head(head_dim);
  for (int t = 0; t < args.n; ++t) {
    const float position = static_cast<float>(args.positions[t]);
    for (int i = 0; i < half; ++i) {
      const float angle = position * args.inv_freq[i];
      cos[i] = std::cos(angle);
      sin[i] = std::sin(angle);
    }
    const int64_t slot = args.slot_mapping[t];
    const bool write_kv = slot >= 0 && slot < pool_slots;
    const int block = write_kv ? static_cast<int>(slot / layout.block_size) : 0;
    const int slot_in_block = write_kv ? static_cast<int>(slot % layout.block_size) : 0;
    for (int h = 0; h < total_heads; ++h) {
      const bool is_q = h < args.num_heads;
      const bool is_k = !is_q && h < args.num_heads + kv_heads;
      if (!is_q && !write_kv) continue;
      const float* src = args.qkv + t * row_width + int64_t{h} * head_dim;
      for (int i = 0; i < head_dim; ++i) {
        head[i] = src[i];
        if (args.qkv_bias != nullptr) head[i] += Bf16ToFloat(args.qkv_bias[h * head_dim + i]);
      }
      if (is_q || is_k) {
        const Bf16Bits* norm = is_q ? args.q_norm : args.k_norm;
        if (norm != nullptr) NormalizeHead(head.data(), norm, head_dim, args.eps);
        RotateHead(head.data(), cos.data(), sin.data(), half);
      }
      if (is_q) {
        Bf16Bits* dst = args.q_out + (int64_t{t} * args.num_heads + h) * head_dim;
        for (int i = 0; i < head_dim; ++i) dst[i] = FloatToBf16(head[i]);
        continue;
      }
      const int kv = is_k ? 0 : 1;
      const int kv_head = h - args.num_heads - kv * kv_heads;
      const int64_t offset = layout.Offset(args.layer, kv, block, kv_head, slot_in_block);
      if (layout.dtype == DType::kFP8E4M3) {
        const float scale = args.kv_scales[(args.layer * 2 + kv) * kv_heads + kv_head];
        uint8_t* dst = static_cast<uint8_t*>(args.kv_pool) + offset;
        for (int i = 0; i < head_dim; ++i) dst[i] = F32ToFp8E4M3(head[i] / scale);
      } else {
        Bf16Bits* dst = static_cast<Bf16Bits*>(args.kv_pool) + offset;
        for (int i = 0; i < head_dim; ++i) dst[i] = FloatToBf16(head[i]);
      }
    }
  }
}

}  // namespace tandem::kernels
