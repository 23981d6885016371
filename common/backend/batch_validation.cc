#include "common/backend/batch_validation.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

absl::Status ValidateItem(const ForwardItem& item, size_t index, const ModelConfig& config,
                          const KvLayout& layout) {
  if (item.tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("forward item ", index, " has no tokens"));
  }
  if (item.start_pos < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward item ", index, " has negative start_pos ", item.start_pos));
  }
  const int64_t end = int64_t{item.start_pos} + static_cast<int64_t>(item.tokens.size());
  const int64_t limit = config.max_position_embeddings > 0 ? config.max_position_embeddings
                                                           : std::numeric_limits<int32_t>::max();
  if (end > limit) {
    return absl::InvalidArgumentError(absl::StrCat("forward item ", index, " reaches position ",
                                                   end - 1, ", beyond max_position_embeddings ",
                                                   limit));
  }
  if (item.want_logits &&
      (item.num_logits < 1 || static_cast<size_t>(item.num_logits) > item.tokens.size())) {
    return absl::InvalidArgumentError(absl::StrCat("forward item ", index, " asks for ",
                                                   item.num_logits, " logits rows of its ",
                                                   item.tokens.size(), " tokens"));
  }
  for (size_t i = 0; i < item.tokens.size(); ++i) {
    const TokenId t = item.tokens[i];
    if (t < 0 || t >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("forward item ", index, " token ", i, " is ",
                                                     t, ", outside the vocabulary of ",
                                                     config.vocab_size));
    }
  }
  const int64_t blocks_needed = (end + layout.block_size - 1) / layout.block_size;
  if (static_cast<int64_t>(item.block_table.size()) < blocks_needed) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward item ", index, " needs ", blocks_needed, " KV blocks for ", end,
                     " positions but its block table has ", item.block_table.size()));
  }
  for (int64_t b = 0; b < blocks_needed; ++b) {
    const int32_t id = item.block_table[b];
    if (id < 0 || id >= layout.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat("forward item ", index, " block table entry ",
                                                     b, " is ", id, ", outside the pool of ",
                                                     layout.num_blocks, " blocks"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateForwardBatch(const ForwardBatch& batch, const LogitsOutput& out,
                                  const ModelConfig& config, const KvLayout& layout) {
  return ValidateForwardBatch(batch, out.logits.size(), config, layout);
}

absl::Status ValidateForwardBatch(const ForwardBatch& batch, size_t logits_capacity,
                                  const ModelConfig& config, const KvLayout& layout) {
  int64_t total_tokens = 0;
  size_t logits_rows = 0;
  for (size_t i = 0; i < batch.items.size(); ++i) {
    const ForwardItem& item = batch.items[i];
    if (absl::Status s = ValidateItem(item, i, config, layout); !s.ok()) return s;
    total_tokens += static_cast<int64_t>(item.tokens.size());
    logits_rows += static_cast<size_t>(LogitsRows(item));
  }
  if (total_tokens > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward batch has ", total_tokens, " tokens, too many for one pass"));
  }
  const size_t needed = logits_rows * static_cast<size_t>(config.vocab_size);
  if (logits_capacity < needed) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward batch wants ", logits_rows, " logits rows (", needed,
                     " floats) but the output holds ", logits_capacity));
  }
  return absl::OkStatus();
}

}  // namespace tandem
