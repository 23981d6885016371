// The sim backend's roofline: how long one engine step of a model takes on a GPU (or a
// tensor-parallel group of them). Each step is priced as two kernel classes plus communication:
//
//   t_gemm = max(gemm_flops / (tp * peak * gemm_eff),      weight_bytes / (tp * hbm * bw_eff))
//   t_attn = max(attn_flops / (tp * peak * attn_eff),  (kv_read + kv_write) / (tp * hbm * bw_eff))
//   t_comm = (tp > 1) * 2 * layers * (allreduce_latency + 2 (tp-1)/tp * tokens * hidden * 2 B /
//   ar_bw) t_step = t_gemm + t_attn + t_comm + step_overhead
//
// with, over the step's items (new tokens n at positions c .. c+n-1, window W or none):
//   gemm_flops   = 2 * tokens * layers * P_layer + 2 * logits_rows * vocab * hidden
//   weight_bytes = 2 B * (layers * P_layer + (logits_rows > 0) * vocab * hidden)
//   attn_flops   = 4 * layers * heads * head_dim * sum_items sum_{k=c+1}^{c+n} min(k, W)
//   kv_read      = kv_bytes_per_token * sum_items min(c + n, W + n - 1)
//   kv_write     = kv_bytes_per_token * tokens
//   P_layer      = hidden * (q + 2 kv) + q * hidden + 3 * hidden * intermediate   (linear weights)
//   kv_bytes_per_token = 2 (K, V) * layers * kv_heads * head_dim * kv_dtype bytes (bf16: 2 B,
//                        fp8: 1 B, f32: 4 B; --kv-cache-dtype)
// A prefill is compute-bound in both terms, a decode step memory-bound in both: the formula is
// the roofline of each kernel class, so mixed (chunked-prefill) steps are priced consistently.
// README.md beside this file derives the constants.
#ifndef TANDEM_COMMON_BACKEND_SIM_STEP_TIME_MODEL_H_
#define TANDEM_COMMON_BACKEND_SIM_STEP_TIME_MODEL_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "common/backend/sim/gpu_spec.h"
#include "common/model/model_config.h"
#include "common/types/dtype.h"

namespace tandem {

// One sequence's part of a step: `new_tokens` at positions [context_before, +new_tokens).
struct SimStepItem {
  int64_t new_tokens = 0;
  int64_t context_before = 0;
  bool wants_logits = false;
  // Logits rows when wants_logits: 1, or 1 + drafts for a speculative verification.
  int32_t num_logits = 1;
};

// What a step's price depends on, summed over its items: Cost and Time are functions of these
// alone, so a caller that keeps the sums (tandem-sim over a run of decode steps) prices a step in
// O(1) and gets the same doubles as from the items (each sum is of whole numbers below 2^53).
struct StepTotals {
  int64_t tokens = 0;
  int64_t logits_rows = 0;
  double attended_keys = 0;   // sum over items and new tokens of the keys each attends to
  double kv_tokens_read = 0;  // sum over items of the cached tokens read
};

// What one step does: its FLOPs and bytes moved, which StepTime prices.
struct StepWork {
  double gemm_flops = 0;
  double attention_flops = 0;
  double weight_bytes = 0;
  double kv_read_bytes = 0;
  double kv_write_bytes = 0;
  double allreduce_bytes = 0;  // per call
  int allreduce_calls = 0;
  int64_t tokens = 0;
  int64_t logits_rows = 0;
};

struct StepTime {
  double gemm_s = 0;
  double attention_s = 0;
  double allreduce_s = 0;
  double overhead_s = 0;
  double total_s() const { return gemm_s + attention_s + allreduce_s + overhead_s; }
};

class StepTimeModel {
 public:
  // InvalidArgument when the shape is incomplete, tensor_parallel < 1, or the KV heads do not
  // split evenly over the tensor-parallel GPUs.
  // `kv_dtype`: what the KV cache stores (bf16, or fp8 / f32 under --kv-cache-dtype); weights
  // and activations stay bf16.
  static absl::StatusOr<StepTimeModel> Create(const GpuSpec& gpu, const ModelConfig& model,
                                              int tensor_parallel, DType kv_dtype = DType::kBF16);

  StepTotals Totals(std::span<const SimStepItem> items) const;
  StepWork Cost(std::span<const SimStepItem> items) const { return CostFromTotals(Totals(items)); }
  StepTime Time(std::span<const SimStepItem> items) const { return TimeFromTotals(Totals(items)); }
  StepWork CostFromTotals(const StepTotals& totals) const;
  StepTime TimeFromTotals(const StepTotals& totals) const;

  // Linear weights of one layer (P_layer above), in parameters.
  int64_t LayerLinearParameters() const;
  // Whole model in bf16 (embeddings and LM head included), across the tensor-parallel group.
  int64_t WeightBytes() const;
  // K and V of one token, all layers, in kv_dtype.
  int64_t KvBytesPerToken() const;
  // What the group's memory holds for the KV cache when each GPU gives the serving process
  // `memory_utilization` of its memory: tp * (memory * utilization - reserved) - weights.
  // FailedPrecondition when the weights do not fit.
  absl::StatusOr<int64_t> KvCacheBytes(double memory_utilization) const;

  const GpuSpec& gpu() const { return gpu_; }
  const ModelConfig& model() const { return model_; }
  int tensor_parallel() const { return tp_; }
  DType kv_dtype() const { return kv_dtype_; }

 private:
  StepTimeModel(const GpuSpec& gpu, const ModelConfig& model, int tp, DType kv_dtype)
      : gpu_(gpu), model_(model), tp_(tp), kv_dtype_(kv_dtype) {}
  GpuSpec gpu_;
  ModelConfig model_;
  int tp_ = 1;
  DType kv_dtype_ = DType::kBF16;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_SIM_STEP_TIME_MODEL_H_
