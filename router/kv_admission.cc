#include "router/kv_admission.h"

#include <algorithm>

namespace tandem {

KvRoom DecodeKvRoom(const std::vector<v1::NodeLoad>& decode_loads, int64_t prompt_tokens) {
  if (decode_loads.empty()) return KvRoom::kFits;  // placement reports that no node is up
  bool fits_some_pool = false;
  for (const v1::NodeLoad& load : decode_loads) {
    if (load.num_kv_blocks() <= 0 || load.block_size() <= 0) return KvRoom::kFits;  // unknown
    const int64_t needed = (prompt_tokens + load.block_size() - 1) / load.block_size();
    if (needed <= load.num_free_kv_blocks()) return KvRoom::kFits;
    fits_some_pool |= needed <= load.num_kv_blocks();
  }
  return fits_some_pool ? KvRoom::kFull : KvRoom::kNeverFits;
}

bool KvExhausted(const v1::NodeLoad& load) {
  if (load.num_kv_blocks() <= 0) return false;
  const int64_t threshold = std::max<int64_t>(1, load.num_kv_blocks() / 100);
  return load.num_free_kv_blocks() < threshold;
}

}  // namespace tandem
