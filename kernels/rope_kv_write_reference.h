// CPU reference of kernels/rope_kv_write.h on host memory (bf16 as its bits).
#ifndef TANDEM_KERNELS_ROPE_KV_WRITE_REFERENCE_H_
#define TANDEM_KERNELS_ROPE_KV_WRITE_REFERENCE_H_

#include <cstdint>

#include "common/kv/kv_layout.h"
#include "kernels/bf16_reference.h"

namespace tandem::kernels {

struct RopeKvWriteReferenceArgs {
  const float* qkv = nullptr;
  const Bf16Bits* qkv_bias = nullptr;
  const Bf16Bits* q_norm = nullptr;
  const Bf16Bits* k_norm = nullptr;
  float eps = 1e-6f;
  const float* inv_freq = nullptr;
  const int32_t* positions = nullptr;
  const int64_t* slot_mapping = nullptr;
  int n = 0;
  int num_heads = 0;
  KvLayout layout;  // dtype kBF16 (Bf16Bits elements) or kFP8E4M3 (uint8_t codes)
  int layer = 0;
  void* kv_pool = nullptr;
  const float* kv_scales = nullptr;  // kFP8E4M3: [num_layers][2][num_kv_heads]
  Bf16Bits* q_out = nullptr;
};

void RopeKvWriteReference(const RopeKvWriteReferenceArgs& args);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_ROPE_KV_WRITE_REFERENCE_H_
