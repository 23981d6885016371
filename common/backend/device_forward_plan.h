// The metadata of one forward pass as the GPU kernels read it, packed into one byte buffer so a
// step costs one host-to-device copy: token ids, positions and KV slots per token; the items that
// run prefill attention (more than one new token) and those that run decode attention (one new
// token) with their block tables; the rows that want logits.
//
// The layout is a pure function of the plan's shape (token count, item counts, table widths), so a
// CUDA graph captured for one shape finds every array at the same offset on every replay; padded
// shapes (PlanPadding) let many batches share one graph. Pure C++: the cuda backend uploads it,
// tests check it on any machine.
#ifndef TANDEM_COMMON_BACKEND_DEVICE_FORWARD_PLAN_H_
#define TANDEM_COMMON_BACKEND_DEVICE_FORWARD_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "common/backend/backend.h"

namespace tandem {

// Pads a decode-only batch to a captured graph's shape: `decode_seqs` sequences (extra ones have
// token 0, no KV slot, context length 0) and block tables `table_width` wide.
struct PlanPadding {
  int decode_seqs = 0;
  int table_width = 0;
};

struct DeviceForwardPlan {
  // Shape.
  int num_tokens = 0;
  int num_prefill = 0;  // items with more than one new token
  int num_decode = 0;   // items with exactly one new token (padding included)
  int prefill_table_width = 0;
  int decode_table_width = 0;
  int prefill_max_q_len = 0;
  int decode_max_context = 0;  // the longest real context; padding sequences have 0
  int num_logit_rows = 0;

  // Byte offsets of each array in `bytes` (int32 arrays unless named).
  size_t token_ids = 0;     // [num_tokens]
  size_t positions = 0;     // [num_tokens]
  size_t slot_mapping = 0;  // int64 [num_tokens]: block * block_size + slot, -1: no write
  size_t logit_rows = 0;    // [num_logit_rows]: token rows whose logits are wanted, in item order
  size_t prefill_q_starts = 0;         // [num_prefill]
  size_t prefill_q_lens = 0;           // [num_prefill]
  size_t prefill_start_positions = 0;  // [num_prefill]
  size_t prefill_block_tables = 0;     // [num_prefill, prefill_table_width]
  size_t decode_token_rows = 0;        // [num_decode]
  size_t decode_context_lens = 0;      // [num_decode]
  size_t decode_block_tables = 0;      // [num_decode, decode_table_width]

  std::vector<uint8_t> bytes;

  template <typename T>
  const T* at(size_t offset) const {
    return reinterpret_cast<const T*>(bytes.data() + offset);
  }
};

// Builds the plan of a validated batch (ValidateForwardBatch). Tokens keep batch order: item i's
// tokens are rows [sum of earlier items' tokens, ...). With `padding`, the batch must be
// decode-only, fit the padding and want logits for every item (InvalidArgument otherwise).
absl::Status BuildDeviceForwardPlan(const ForwardBatch& batch, int block_size,
                                    const PlanPadding* padding, DeviceForwardPlan* plan);

// Whether a batch can run as a captured decode graph: every item has one new token and wants
// logits.
bool IsDecodeOnly(const ForwardBatch& batch);

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_DEVICE_FORWARD_PLAN_H_
