#include "common/kv/block_name_index.h"

#include <bit>
#include <cassert>

namespace tandem {

BlockNameIndex::BlockNameIndex(int32_t num_blocks) {
  assert(num_blocks >= 1);
  // block + 1 <= num_blocks fits in index_bits_; at least 3 slots per block.
  index_bits_ = std::bit_width(static_cast<uint32_t>(num_blocks));
  index_mask_ = (uint64_t{1} << index_bits_) - 1;
  const uint64_t num_slots = std::bit_ceil(static_cast<uint64_t>(num_blocks) * 3);
  assert(std::countr_zero(num_slots) <= 64 - index_bits_);  // a home needs that many high bits
  slot_mask_ = num_slots - 1;
  slots_ = LazyZeroArray<uint64_t>(num_slots);
}

void BlockNameIndex::Erase(uint64_t hash, int32_t block) {
  const uint64_t entry = (hash & ~index_mask_) | (static_cast<uint64_t>(block) + 1);
  size_t i = Home(hash);
  while (slots_[i] != entry) {
    if (slots_[i] == 0) return;
    i = (i + 1) & slot_mask_;
  }
  --size_;
  // Backward shift: an entry after the hole moves into it unless its home lies (cyclically) in
  // (hole, its slot], where a lookup would no longer pass the hole to reach it.
  for (size_t j = i;;) {
    j = (j + 1) & slot_mask_;
    const uint64_t slot = slots_[j];
    if (slot == 0) break;
    const size_t home = static_cast<size_t>(slot >> index_bits_) & slot_mask_;
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    slots_[i] = slot;
    i = j;
  }
  slots_[i] = 0;
}

}  // namespace tandem
