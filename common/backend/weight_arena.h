// Where each weight of a model lands in one flat arena, as the backends compute with it: q/k/v and
// gate/up fused into one matrix each (a layer runs two GEMMs where it would run five), every tensor
// starting on a 64-byte boundary, linear weights in PyTorch's [out, in] layout. Checking every
// tensor's presence, shape and byte size happens here once; the cpu backend fills the arena in f32,
// the cuda backend in bf16.
#ifndef TANDEM_COMMON_BACKEND_WEIGHT_ARENA_H_
#define TANDEM_COMMON_BACKEND_WEIGHT_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_weights.h"
#include "common/util/thread_pool.h"

namespace tandem {

// Element offsets of one layer's tensors in the arena.
struct LayerArenaOffsets {
  size_t input_norm = 0;
  size_t wqkv = 0;                // [q_size + 2*kv_size, hidden]: q rows, k rows, v rows
  size_t bqkv = 0;                // valid when has_bias
  size_t q_norm = 0, k_norm = 0;  // valid when has_qk_norm
  size_t wo = 0;
  size_t bo = 0;  // valid when has_o_bias
  size_t post_norm = 0;
  size_t w_gate_up = 0;  // [2*intermediate, hidden]: gate rows, then up rows
  size_t w_down = 0;
  bool has_bias = false;
  bool has_o_bias = false;
  bool has_qk_norm = false;
};

class WeightArenaPlan {
 public:
  // Checks the config and every tensor against it (errors name the tensor) and places them.
  static absl::StatusOr<WeightArenaPlan> Create(const ModelWeights& weights);

  size_t elements() const { return size_; }
  size_t embed() const { return embed_; }
  size_t final_norm() const { return final_norm_; }
  size_t lm_head() const { return lm_head_; }  // == embed() when tied
  const std::vector<LayerArenaOffsets>& layers() const { return layers_; }

  // Converts every tensor into its place (threads from `pool`); `arena` holds elements() values.
  void FillF32(float* arena, ThreadPool& pool) const;
  // The same as bf16 bits (round to nearest even; bf16 sources are copied as they are).
  void FillBf16(uint16_t* arena, ThreadPool& pool) const;

 private:
  struct Part {
    const TensorView* tensor;
    size_t offset;
  };
  // Appends tensors back to back (one fused matrix); returns the offset of the first.
  size_t AddContiguous(std::initializer_list<const TensorView*> tensors);
  size_t Add(const TensorView& t) { return AddContiguous({&t}); }
  absl::StatusOr<LayerArenaOffsets> PlanLayer(const ModelConfig& c, const LayerWeights& w,
                                              int index);

  std::vector<Part> parts_;
  size_t size_ = 0;
  size_t embed_ = 0, final_norm_ = 0, lm_head_ = 0;
  std::vector<LayerArenaOffsets> layers_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_WEIGHT_ARENA_H_
