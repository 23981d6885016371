// The model's weights as the CPU backend computes with them: f32 copies the backend owns (bf16 and
// f16 are widened at load), in one 64-byte aligned arena, with q/k/v and gate/up fused so a layer
// runs two GEMMs where it would run five. Linear weights keep PyTorch's [out, in] layout.
#ifndef TANDEM_COMMON_BACKEND_CPU_WEIGHTS_H_
#define TANDEM_COMMON_BACKEND_CPU_WEIGHTS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/backend/aligned_buffer.h"
#include "common/model/model_weights.h"
#include "common/util/thread_pool.h"

namespace tandem {

struct CpuLayerWeights {
  const float* input_norm = nullptr;  // [hidden]
  const float* wqkv = nullptr;        // [q_size + 2*kv_size, hidden]: q rows, k rows, v rows
  const float* bqkv = nullptr;        // [q_size + 2*kv_size], or null without attention_bias
  const float* q_norm = nullptr;      // [head_dim], or null without qk_norm
  const float* k_norm = nullptr;      // [head_dim], or null without qk_norm
  const float* wo = nullptr;          // [hidden, q_size]
  const float* bo = nullptr;          // [hidden], or null (attention_bias outside Qwen2 only)
  const float* post_norm = nullptr;   // [hidden]
  const float* w_gate_up = nullptr;   // [2*intermediate, hidden]: gate rows, then up rows
  const float* w_down = nullptr;      // [hidden, intermediate]
};

struct CpuWeights {
  const float* embed = nullptr;       // [vocab, hidden]
  const float* final_norm = nullptr;  // [hidden]
  const float* lm_head = nullptr;     // [vocab, hidden]; == embed when tied
  std::vector<CpuLayerWeights> layers;
  AlignedFloats arena;  // owns everything above

  size_t bytes() const { return arena.size() * sizeof(float); }
};

// Checks every tensor's presence, dtype, shape and byte size against `weights.config`, then
// converts them to f32 (threads from `pool`). Errors name the tensor.
absl::StatusOr<CpuWeights> PackCpuWeights(const ModelWeights& weights, ThreadPool& pool);

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_CPU_WEIGHTS_H_
