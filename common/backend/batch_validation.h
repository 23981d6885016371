// Checks a ForwardBatch against the model and the KV pool before any memory is touched, so bad
// input from the engine or the wire becomes InvalidArgument, never an out-of-bounds access.
#ifndef TANDEM_COMMON_BACKEND_BATCH_VALIDATION_H_
#define TANDEM_COMMON_BACKEND_BATCH_VALIDATION_H_

#include <cstddef>

#include "absl/status/status.h"
#include "common/backend/backend.h"
#include "common/kv/kv_layout.h"
#include "common/model/model_config.h"

namespace tandem {

// Every item has tokens, all ids are inside the vocabulary, positions start at >= 0 and stay
// below max_position_embeddings (when set), the block table covers every position the item
// touches with block ids inside the pool, and `out` has room for the requested logits rows.
absl::Status ValidateForwardBatch(const ForwardBatch& batch, const LogitsOutput& out,
                                  const ModelConfig& config, const KvLayout& layout);
// The same with room for `logits_capacity` floats of logits (a backend that samples on the device
// and returns no logits passes exactly what the batch wants).
absl::Status ValidateForwardBatch(const ForwardBatch& batch, size_t logits_capacity,
                                  const ModelConfig& config, const KvLayout& layout);

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_BATCH_VALIDATION_H_
