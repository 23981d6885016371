// The reference Backend: f32 math on the CPU over a paged KV pool it owns, whose elements are
// f32 (the default), bf16 or fp8 E4M3 with a scale per (layer, K|V, kv head) calibrated at load
// (common/kv/kv_scales.h); attention widens them to f32 as it reads them. Every linear layer
// runs as one GEMM over all tokens of the batch (prefill chunks and decode steps flattened into
// one [tokens, hidden] matrix), attention runs per token over the item's block table, and each
// token's result does not depend on what else is in the batch: the same sequence gives bit-equal
// logits alone, batched, chunked, or with its blocks anywhere in the pool.
#ifndef TANDEM_COMMON_BACKEND_CPU_BACKEND_H_
#define TANDEM_COMMON_BACKEND_CPU_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/backend/aligned_buffer.h"
#include "common/backend/backend.h"
#include "common/backend/cpu_weights.h"
#include "common/kv/kv_scales.h"
#include "common/model/model_weights.h"
#include "common/util/thread_pool.h"

namespace tandem {

struct CpuBackendOptions {
  int num_threads = 0;  // threads for every parallel loop, the caller included; 0: all cores
  int block_size = 16;  // tokens per KV block
  // What the pool stores: kF32, kBF16 or kFP8E4M3 (kF16 is refused).
  DType kv_dtype = DType::kF32;
  // KV pool size: num_kv_blocks when > 0, else as many blocks as fit in kv_cache_bytes.
  int num_kv_blocks = 0;
  size_t kv_cache_bytes = 0;
  // Scratch is sized for this many tokens per Forward; a bigger batch grows it (one allocation).
  int max_batch_tokens = 512;
  // Where the KV pool lives. Unset: the backend allocates it. Set: called once with the pool's size
  // in bytes; must return zeroed, 64-byte aligned memory that outlives the backend (a KV transport
  // that registers the memory it allocates, so that peers can write into it directly).
  std::function<absl::StatusOr<void*>(size_t bytes)> kv_pool_allocator;
};

class CpuBackend : public Backend {
 public:
  // Converts the weights to f32 (they may be released afterwards) and allocates the zeroed pool.
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(const ModelWeights& weights,
                                                            const CpuBackendOptions& options);

  std::string_view name() const override { return "cpu"; }
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return layout_; }
  // Not reentrant: one caller (the engine thread) at a time.
  absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) override;

  // The whole pool of an f32 backend, indexed as kv_layout() describes (for tests); empty when
  // the pool stores another dtype.
  std::span<float> kv_pool() { return {f32_pool(), f32_pool() ? kv_elements_ : 0}; }
  std::span<const float> kv_pool() const { return {f32_pool(), f32_pool() ? kv_elements_ : 0}; }
  // The whole pool's bytes, whatever its dtype.
  std::span<const uint8_t> kv_pool_bytes() const {
    return {static_cast<const uint8_t*>(kv_data_), kv_elements_ * DTypeSize(layout_.dtype)};
  }
  // An fp8 pool's scales (empty for f32 and bf16); kv_layout().scale_fingerprint names them.
  const KvScales& kv_scales() const { return kv_scales_; }
  // Copies block `src`'s K and V of every layer into block `dst` (copy-on-write).
  absl::Status CopyBlock(int32_t src, int32_t dst);

  int num_threads() const { return threads_->num_threads(); }
  size_t weight_bytes() const { return weights_.bytes(); }

 private:
  // Buffers of one Forward, sized for `capacity` tokens; reused across calls.
  struct Scratch {
    int capacity = 0;
    AlignedFloats x, h, qkv, attn, gate_up, act, rope_cos, rope_sin;
    std::vector<int32_t> token_item, token_pos, all_rows, logit_rows;
    int num_logit_rows = 0;
    std::vector<AlignedFloats> scores;  // per thread: attention scores
    // bf16/fp8 pools: the f32 values of the KV a prefill chunk reads, widened once per layer
    // (WidenChunkKv) instead of once per query row. Per item: its one-layer f32 layout over
    // wide_kv at wide_offset (num_blocks 0: the item reads the pool directly).
    AlignedFloats wide_kv;
    std::vector<KvLayout> wide_layout;
    std::vector<int64_t> wide_offset;
    std::vector<int32_t> wide_table;  // 0, 1, 2, ...: the widened copy's block table
    std::vector<int32_t> wide_rows;   // per item: its query rows in the layer
    std::vector<std::pair<int32_t, int32_t>> wide_units;  // (item, kv * blocks + block) to widen
  };

  CpuBackend(const ModelConfig& config, CpuWeights weights, const KvLayout& layout,
             std::unique_ptr<ThreadPool> threads);

  // Grows the scratch for `tokens` token rows and attention over `max_context` positions.
  absl::Status EnsureCapacity(int tokens, int64_t max_context);
  // Flattens the batch into per-token rows (item, position) and lists the logits rows.
  void PlanTokens(const ForwardBatch& batch);
  void EmbedAndRope(const ForwardBatch& batch, int tokens);
  // Layer `l` over the token rows; `rows` are the rows that continue past the KV write (all
  // rows, or in the last layer only those that want logits), compacted to the front of x.
  absl::Status RunLayer(int l, const ForwardBatch& batch, int tokens,
                        std::span<const int32_t> rows);
  void QkvPostprocess(int l, const ForwardBatch& batch, int tokens);
  void Attention(int l, const ForwardBatch& batch, std::span<const int32_t> rows);
  // bf16/fp8 pools: widens layer l's K/V of each item with several query rows in `rows` into
  // scratch_.wide_kv (the same values Attention would widen row by row, so the same results).
  absl::Status WidenChunkKv(int l, const ForwardBatch& batch, std::span<const int32_t> rows);
  void NormRows(const float* w, const float* in, float* out, int rows);
  // Writes row t's K and V (after RoPE) into its slot of layer l, in the pool's dtype.
  void WriteKv(int l, const ForwardBatch& batch, int64_t t, const float* k, const float* v);
  // fp8: runs the calibration prefill (kv_scales.h) over a temporary f32 pool and sets
  // kv_scales_ and layout_.scale_fingerprint.
  absl::Status CalibrateFp8Scales();
  float* f32_pool() const {
    return layout_.dtype == DType::kF32 ? static_cast<float*>(kv_data_) : nullptr;
  }

  ModelConfig config_;
  CpuWeights weights_;
  KvLayout layout_;
  std::unique_ptr<ThreadPool> threads_;
  AlignedFloats kv_;  // the pool (rounded up to whole floats), unless an allocator provided it
  void* kv_data_ = nullptr;
  size_t kv_elements_ = 0;  // of layout_.dtype
  KvScales kv_scales_;
  std::vector<float> kv_inv_scales_;  // 1 / kv_scales_, same indexing
  std::vector<float> inv_freq_;
  Scratch scratch_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_CPU_BACKEND_H_
