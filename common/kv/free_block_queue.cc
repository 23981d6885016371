#include "common/kv/free_block_queue.h"

#include <bit>
#include <cassert>

namespace tandem {

FreeBlockQueue::FreeBlockQueue(int32_t num_blocks)
    : slot_of_(static_cast<size_t>(num_blocks), kAbsent),
      ring_(std::bit_ceil(static_cast<uint32_t>(num_blocks) / 2 * 3 + 2)),
      mask_(static_cast<uint32_t>(ring_.size()) - 1) {
  assert(num_blocks >= 1 && num_blocks < (1 << 30));
}

void FreeBlockQueue::PushBack(int32_t block) {
  assert(!contains(block));
  if (num_entries_ == ring_.size()) Compact();
  const uint32_t slot = (head_ + num_entries_) & mask_;
  ring_[slot] = block;
  slot_of_[block] = slot;
  ++num_entries_;
  ++size_;
}

void FreeBlockQueue::Remove(int32_t block) {
  assert(contains(block));
  slot_of_[block] = kAbsent;  // its entry is skipped when it comes up
  --size_;
}

int32_t FreeBlockQueue::PopFront() {
  assert(size_ > 0);
  // The check of an entry a few places on (a cache miss at a pool's scale) is fetched ahead: the
  // slot may lie past the entries, then it holds some block id all the same.
  __builtin_prefetch(&slot_of_[ring_[(head_ + kLookahead) & mask_]]);
  while (true) {
    const uint32_t slot = head_;
    const int32_t block = ring_[slot];
    head_ = (head_ + 1) & mask_;
    --num_entries_;
    if (slot_of_[block] == slot) {
      slot_of_[block] = kAbsent;
      --size_;
      return block;
    }
  }
}

void FreeBlockQueue::Compact() {
  // At most num_blocks entries are live, in a ring of more than 1.5 times that: a third goes.
  uint32_t kept = 0;
  for (uint32_t i = 0; i < num_entries_; ++i) {
    const uint32_t slot = (head_ + i) & mask_;
    const int32_t block = ring_[slot];
    if (slot_of_[block] != slot) continue;
    const uint32_t to = (head_ + kept++) & mask_;
    ring_[to] = block;
    slot_of_[block] = to;
  }
  num_entries_ = kept;
}

}  // namespace tandem
