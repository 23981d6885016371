// The benchmarked model (Llama-3-8B's shapes) and what its work costs: the HBM bytes a decode step
// must move and the FLOPs a prefill must do. Pure C++ (no CUDA): these numbers are the floors the
// GPU benchmark compares its measurements against.
#ifndef TANDEM_BENCH_GPU_MODEL_COSTS_H_
#define TANDEM_BENCH_GPU_MODEL_COSTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"

namespace tandem::bench {

// Meta-Llama-3-8B: hidden 4096, intermediate 14336, 32 layers, 32 heads, 8 KV heads, head_dim 128,
// vocab 128256, rope_theta 500000, max_position_embeddings 8192, bf16, untied LM head.
ModelConfig Llama3_8BConfig();

// KV bytes one token occupies across all layers (K and V) in a bf16 pool.
size_t KvBytesPerToken(const ModelConfig& config);

// Elements of the linear layers' weights over all layers (q/k/v/o, gate/up/down); no embedding,
// no LM head, no norms.
int64_t LinearWeightElements(const ModelConfig& config);

// HBM bytes one decode step moves at `batch` sequences of `context` positions each (the new
// token's included), with bf16 weights and KV. Activations between layers are left out (a few MB
// at batch <= 128).
struct DecodeTraffic {
  size_t weight_bytes = 0;     // linear layers + norms + LM head, each read once
  size_t embedding_bytes = 0;  // the batch's embedding rows (a gather, not the whole table)
  size_t kv_read_bytes = 0;    // every position's K and V in every layer
  size_t kv_write_bytes = 0;   // the new token's K and V
  size_t logits_bytes = 0;     // f32 logits written
  size_t total() const {
    return weight_bytes + embedding_bytes + kv_read_bytes + kv_write_bytes + logits_bytes;
  }
};
DecodeTraffic DecodeStepTraffic(const ModelConfig& config, int batch, int context);

// FLOPs of one prefill of `tokens` new tokens from position 0, logits for the last token only.
struct PrefillFlops {
  double linear = 0;     // 2 * LinearWeightElements * tokens
  double attention = 0;  // causal: QK^T and PV, 2 * 2 * layers * heads * head_dim * tokens^2 / 2
  double lm_head = 0;    // 2 * hidden * vocab (one row)
  double total() const { return linear + attention + lm_head; }
  // The looser "2 * all parameters * tokens + attention" count (embedding and every row's LM head
  // included), reported beside the real count so the two conventions can be compared.
  double two_params_tokens_convention = 0;
};
PrefillFlops PrefillFlopCount(const ModelConfig& config, int tokens);

// `num_seqs` block tables of `blocks_per_seq` pool blocks each, no block used twice, drawn from a
// seeded shuffle of the pool's `pool_blocks` ids (a pool that has been in use is not contiguous).
// FailedPrecondition when the pool is too small.
absl::StatusOr<std::vector<std::vector<int32_t>>> DistinctBlockTables(int num_seqs,
                                                                      int blocks_per_seq,
                                                                      int pool_blocks,
                                                                      uint64_t seed);

// `n` token ids in [0, vocab), deterministic in `seed`.
std::vector<int32_t> RandomTokenIds(int n, int vocab, uint64_t seed);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_MODEL_COSTS_H_
