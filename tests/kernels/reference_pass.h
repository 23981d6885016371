// The cuda backend's forward pass (CudaBackend::EnqueuePass) step for step on the host, with each
// kernel replaced by its CPU reference: bf16 weights and KV pool, f32 residual stream, the same
// DeviceForwardPlan. Checked against the cpu backend, it shows the kernels' definitions compose
// into the model on any machine; on a GPU, the cuda backend is checked against it.
#ifndef TANDEM_TESTS_KERNELS_REFERENCE_PASS_H_
#define TANDEM_TESTS_KERNELS_REFERENCE_PASS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend/backend.h"
#include "common/kv/kv_layout.h"
#include "common/model/model_weights.h"
#include "kernels/bf16_reference.h"

namespace tandem::kernels::testing {

class ReferencePass {
 public:
  static absl::StatusOr<ReferencePass> Create(const ModelWeights& weights, int block_size,
                                              int num_blocks);
  // Runs the batch; returns the logits rows of items that want them, [rows * vocab].
  absl::StatusOr<std::vector<float>> Forward(const ForwardBatch& batch);
  const KvLayout& layout() const { return layout_; }

 private:
  ModelConfig config_;
  KvLayout layout_;
  std::vector<Bf16Bits> arena_;
  size_t embed_ = 0, final_norm_ = 0, lm_head_ = 0;
  struct Layer {
    size_t input_norm, wqkv, bqkv, q_norm, k_norm, wo, bo, post_norm, w_gate_up, w_down;
    bool has_bias, has_o_bias, has_qk_norm;
  };
  std::vector<Layer> layers_;
  std::vector<Bf16Bits> pool_;
  std::vector<float> inv_freq_;
};

}  // namespace tandem::kernels::testing

#endif  // TANDEM_TESTS_KERNELS_REFERENCE_PASS_H_
