// The prefix cache's index: which pool block holds the block named `hash` (block_hash.h).
//
// A map from names to blocks that costs one cache line per lookup, insertion or removal, because
// at the scale of a cluster (tandem-sim: 125 nodes x 83,000 blocks) every one of them is a cache
// miss. Open addressing with linear probing over 8-byte slots: a slot holds the name's high bits
// (the name with its low `index_bits` cleared) and the block + 1 in those low bits; 0 is empty.
// The home slot of a name comes from its high bits, so a slot alone says where it belongs and a
// removal shifts the entries after it back (no tombstones, no rehashing). The table has at least
// 3 slots per block, and holds at most one name per block, so it is at most a third full.
//
// The slot keeps only part of the name: a lookup that finds matching high bits confirms the
// whole name with `name_of(block)` (the caller's record of what the block is named). Names are
// unique: Insert refuses a name that is already there.
//
// Deterministic (the contents depend only on the sequence of calls); not thread-safe.
#ifndef TANDEM_COMMON_KV_BLOCK_NAME_INDEX_H_
#define TANDEM_COMMON_KV_BLOCK_NAME_INDEX_H_

#include <cstddef>
#include <cstdint>

#include "common/util/lazy_zero_array.h"

namespace tandem {

class BlockNameIndex {
 public:
  // Blocks are 0 .. num_blocks - 1; `num_blocks` >= 1 (programmer invariant).
  explicit BlockNameIndex(int32_t num_blocks);

  int32_t size() const { return size_; }

  // The block named `hash`, or -1. `name_of(block)` returns the full name of a block in the
  // index.
  template <typename NameOf>
  int32_t Find(uint64_t hash, const NameOf& name_of) const {
    const uint64_t high = hash & ~index_mask_;
    for (size_t i = Home(hash);; i = (i + 1) & slot_mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) return -1;
      if ((slot & ~index_mask_) == high) {
        const int32_t block = BlockOf(slot);
        if (name_of(block) == hash) return block;
      }
    }
  }

  // Names `block` `hash` unless some block already has that name (false, nothing changed).
  // `block` must not be in the index under another name.
  template <typename NameOf>
  bool Insert(uint64_t hash, int32_t block, const NameOf& name_of) {
    const uint64_t high = hash & ~index_mask_;
    for (size_t i = Home(hash);; i = (i + 1) & slot_mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) {
        slots_[i] = high | (static_cast<uint64_t>(block) + 1);
        ++size_;
        return true;
      }
      if ((slot & ~index_mask_) == high && name_of(BlockOf(slot)) == hash) return false;
    }
  }

  // Removes `block`, inserted as `hash`, from the index; a no-op if it is not in under that name
  // (only the name's high bits are compared: pass the name it was inserted with).
  void Erase(uint64_t hash, int32_t block);

  // Starts fetching the slot where a lookup of `hash` begins.
  void Prefetch(uint64_t hash) const { __builtin_prefetch(&slots_[Home(hash)]); }

 private:
  size_t Home(uint64_t hash) const { return static_cast<size_t>(hash >> index_bits_) & slot_mask_; }
  int32_t BlockOf(uint64_t slot) const { return static_cast<int32_t>(slot & index_mask_) - 1; }

  int index_bits_;       // bits for block + 1
  uint64_t index_mask_;  // (1 << index_bits_) - 1
  uint64_t slot_mask_;   // slots_.size() - 1 (a power of two)
  LazyZeroArray<uint64_t> slots_;
  int32_t size_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_KV_BLOCK_NAME_INDEX_H_
