// The free blocks of a pool in the order they were freed, least recently freed first: the order in
// which BlockManager hands them out (and so evicts their cached content).
//
// A queue of block ids with lazy removal instead of a linked list through the blocks: freeing a
// block appends it, reviving one (taking it out of the middle) only marks it, and taking the
// oldest skips marked entries. So freeing or reviving a block touches no other block's record, and
// the blocks about to be taken are read from one contiguous run rather than by chasing links. Each
// block knows the ring slot of its live entry; an entry in any other slot (its block removed, or
// removed and appended again) is skipped. When the ring fills up, the skipped entries are squeezed
// out (it has room for 1.5 times the blocks, so at least a third of it goes), which keeps every
// operation O(1) amortized.
//
// Deterministic; not thread-safe.
#ifndef TANDEM_COMMON_KV_FREE_BLOCK_QUEUE_H_
#define TANDEM_COMMON_KV_FREE_BLOCK_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/util/lazy_zero_array.h"

namespace tandem {

class FreeBlockQueue {
 public:
  // Blocks are 0 .. num_blocks - 1 (>= 1); the queue starts empty.
  explicit FreeBlockQueue(int32_t num_blocks);

  int32_t size() const { return size_; }
  bool contains(int32_t block) const { return slot_of_[block] != kAbsent; }

  // Appends `block`, which must not be in the queue.
  void PushBack(int32_t block);
  // Takes `block`, which must be in the queue, out of it.
  void Remove(int32_t block);
  // Takes the least recently appended block out; size() must be > 0.
  int32_t PopFront();

 private:
  static constexpr uint32_t kAbsent = ~uint32_t{0};
  static constexpr uint32_t kLookahead = 16;  // entries between a pop and the check it prefetches
  // Drops the entries of blocks no longer in the queue, keeping the order of the others.
  void Compact();

  std::vector<uint32_t> slot_of_;  // per block: the ring_ slot of its entry, or kAbsent
  LazyZeroArray<int32_t> ring_;    // block ids; a power of two > 1.5 * num_blocks slots
  uint32_t mask_ = 0;              // ring_.size() - 1
  uint32_t head_ = 0;              // the slot of the oldest entry
  uint32_t num_entries_ = 0;       // entries in ring_, skipped ones included
  int32_t size_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_KV_FREE_BLOCK_QUEUE_H_
