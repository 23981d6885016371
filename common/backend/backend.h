// The compute interface the engine drives: one forward pass over a batch of sequences whose KV
// lives in a paged pool the backend owns. Implementations: cpu (reference), cuda, sim.
#ifndef TANDEM_COMMON_BACKEND_BACKEND_H_
#define TANDEM_COMMON_BACKEND_BACKEND_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "common/kv/kv_layout.h"
#include "common/model/model_config.h"
#include "common/types/dtype.h"

namespace tandem {

// One sequence's slice of a forward pass: `tokens` are new tokens at positions
// [start_pos, start_pos + tokens.size()); positions before start_pos are already in the KV cache.
// `block_table[i]` is the pool block holding positions [i*block_size, (i+1)*block_size); it covers
// at least start_pos + tokens.size() positions.
struct ForwardItem {
  std::span<const TokenId> tokens;
  int32_t start_pos = 0;
  std::span<const int32_t> block_table;
  bool want_logits = false;  // logits of the last token in `tokens`
};

struct ForwardBatch {
  std::span<const ForwardItem> items;
};

// Logits of the items with want_logits, in item order: row r is logits[r*vocab, (r+1)*vocab).
struct LogitsOutput {
  std::span<float> logits;  // caller-owned; at least (#want_logits) * vocab floats
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual const KvLayout& kv_layout() const = 0;
  // Runs the batch: writes each item's K/V into its blocks and the requested logits.
  virtual absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_BACKEND_H_
