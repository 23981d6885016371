#include "common/backend/device_forward_plan.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

// Every array starts on a 16-byte boundary (vector loads, int64 slots).
size_t Align16(size_t n) { return (n + 15) / 16 * 16; }

int BlocksFor(int64_t positions, int block_size) {
  return static_cast<int>((positions + block_size - 1) / block_size);
}

}  // namespace

bool IsDecodeOnly(const ForwardBatch& batch) {
  for (const ForwardItem& item : batch.items) {
    if (item.tokens.size() != 1 || LogitsRows(item) != 1) return false;
  }
  return !batch.items.empty();
}

absl::Status BuildDeviceForwardPlan(const ForwardBatch& batch, int block_size,
                                    const PlanPadding* padding, DeviceForwardPlan* plan) {
  if (block_size <= 0) return absl::InvalidArgumentError("block_size must be positive");
  DeviceForwardPlan& p = *plan;
  p = DeviceForwardPlan();
  for (const ForwardItem& item : batch.items) {
    const int n = static_cast<int>(item.tokens.size());
    const int width = BlocksFor(int64_t{item.start_pos} + n, block_size);
    p.num_tokens += n;
    p.num_logit_rows += LogitsRows(item);
    if (n > 1) {
      ++p.num_prefill;
      p.prefill_table_width = std::max(p.prefill_table_width, width);
      p.prefill_max_q_len = std::max(p.prefill_max_q_len, n);
    } else {
      ++p.num_decode;
      p.decode_table_width = std::max(p.decode_table_width, width);
      p.decode_max_context = std::max(p.decode_max_context, item.start_pos + 1);
    }
  }
  if (padding != nullptr) {
    if (!IsDecodeOnly(batch)) {
      return absl::InvalidArgumentError(
          "a padded plan needs a decode-only batch (one new token per item, logits for each)");
    }
    if (padding->decode_seqs < p.num_decode || padding->table_width < p.decode_table_width) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch of ", p.num_decode, " sequences with block tables ",
                       p.decode_table_width, " wide does not fit the padding (",
                       padding->decode_seqs, " sequences, ", padding->table_width, " blocks)"));
    }
    p.num_decode = padding->decode_seqs;
    p.num_tokens = padding->decode_seqs;
    p.num_logit_rows = padding->decode_seqs;
    p.decode_table_width = padding->table_width;
  }

  // Layout: a pure function of the shape.
  size_t at = 0;
  auto place = [&](size_t bytes) {
    const size_t offset = at;
    at = Align16(at + bytes);
    return offset;
  };
  const size_t i32 = sizeof(int32_t);
  p.token_ids = place(i32 * p.num_tokens);
  p.positions = place(i32 * p.num_tokens);
  p.slot_mapping = place(sizeof(int64_t) * p.num_tokens);
  p.logit_rows = place(i32 * p.num_logit_rows);
  p.prefill_q_starts = place(i32 * p.num_prefill);
  p.prefill_q_lens = place(i32 * p.num_prefill);
  p.prefill_start_positions = place(i32 * p.num_prefill);
  p.prefill_block_tables = place(i32 * p.num_prefill * p.prefill_table_width);
  p.decode_token_rows = place(i32 * p.num_decode);
  p.decode_context_lens = place(i32 * p.num_decode);
  p.decode_block_tables = place(i32 * p.num_decode * p.decode_table_width);
  p.bytes.assign(at, 0);

  auto i32_at = [&](size_t offset) { return reinterpret_cast<int32_t*>(p.bytes.data() + offset); };
  int32_t* ids = i32_at(p.token_ids);
  int32_t* positions = i32_at(p.positions);
  auto* slots = reinterpret_cast<int64_t*>(p.bytes.data() + p.slot_mapping);
  int32_t* logit_rows = i32_at(p.logit_rows);
  int row = 0, logit = 0, prefill = 0, decode = 0;
  for (const ForwardItem& item : batch.items) {
    const int n = static_cast<int>(item.tokens.size());
    for (int j = 0; j < n; ++j) {
      const int pos = item.start_pos + j;
      ids[row + j] = item.tokens[j];
      positions[row + j] = pos;
      slots[row + j] = int64_t{item.block_table[pos / block_size]} * block_size + pos % block_size;
    }
    const int width = BlocksFor(int64_t{item.start_pos} + n, block_size);
    if (n > 1) {
      i32_at(p.prefill_q_starts)[prefill] = row;
      i32_at(p.prefill_q_lens)[prefill] = n;
      i32_at(p.prefill_start_positions)[prefill] = item.start_pos;
      std::memcpy(i32_at(p.prefill_block_tables) + int64_t{prefill} * p.prefill_table_width,
                  item.block_table.data(), i32 * width);
      ++prefill;
    } else {
      i32_at(p.decode_token_rows)[decode] = row;
      i32_at(p.decode_context_lens)[decode] = item.start_pos + 1;
      std::memcpy(i32_at(p.decode_block_tables) + int64_t{decode} * p.decode_table_width,
                  item.block_table.data(), i32 * width);
      ++decode;
    }
    row += n;
    for (int r = LogitsRows(item); r >= 1; --r) logit_rows[logit++] = row - r;
  }
  // Padding sequences: token 0 at position 0, no KV write, no context; their logits rows exist
  // (a graph computes them) and are ignored.
  for (; decode < p.num_decode; ++decode, ++row) {
    slots[row] = -1;
    i32_at(p.decode_token_rows)[decode] = row;
    logit_rows[logit++] = row;
  }
  return absl::OkStatus();
}

}  // namespace tandem
