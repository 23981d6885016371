// The compute interface the engine drives: one forward pass over a batch of sequences whose KV
// lives in a paged pool the backend owns. Implementations: cpu (reference), cuda, sim.
#ifndef TANDEM_COMMON_BACKEND_BACKEND_H_
#define TANDEM_COMMON_BACKEND_BACKEND_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
  // With want_logits: the logits of the last num_logits tokens, in order (speculative decoding
  // verifies several drafts in one pass). 1 <= num_logits <= tokens.size().
  int32_t num_logits = 1;
};

// The logits rows `item` asks for.
inline int32_t LogitsRows(const ForwardItem& item) {
  return item.want_logits ? item.num_logits : 0;
}

struct ForwardBatch {
  std::span<const ForwardItem> items;
};

// Logits of the items with want_logits, in item order (an item's rows in token order): row r is
// logits[r*vocab, (r+1)*vocab).
struct LogitsOutput {
  std::span<float> logits;  // caller-owned; at least (Σ LogitsRows) * vocab floats
};

// How one logits row is sampled on the device (Backend::ForwardAndSample): temperature, top-k and
// top-p as the cpu sampler applies them; the draw is a pure function of (seed, counter).
struct DeviceSampling {
  float temperature = 0.0f;  // <= 0: greedy (lowest token id on ties)
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;
  uint64_t seed = 0;
  uint64_t counter = 0;  // the request's draw index
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual const ModelConfig& config() const = 0;
  virtual const KvLayout& kv_layout() const = 0;
  // Runs the batch: writes each item's K/V into its blocks and the requested logits.
  virtual absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) = 0;

  // Backends that can sample where the logits are (cuda) run the batch and write one token per
  // logits row (`rows[r]` says how) without handing the logits back. Others return Unimplemented.
  virtual bool CanSampleOnDevice() const { return false; }
  virtual absl::Status ForwardAndSample(const ForwardBatch& batch,
                                        std::span<const DeviceSampling> rows,
                                        std::span<TokenId> tokens);
};

inline absl::Status Backend::ForwardAndSample(const ForwardBatch& batch,
                                              std::span<const DeviceSampling> rows,
                                              std::span<TokenId> tokens) {
  return absl::UnimplementedError(
      absl::StrCat("the ", std::string(name()), " backend does not sample on the device"));
}

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_BACKEND_H_
