// Keyed checksums of KV blocks: how a decode node knows that the KV which landed in its pool is the
// KV the prefill node computed, before it admits the request.
//
// What is hashed: for each written block of the prompt (in prompt order, cached blocks skipped),
// the block's 2 * num_layers slices of block_stride() elements (layer 0 K, layer 0 V, layer 1 K,
// ...), as they lie in a pool: the writer hashes its own pool's copy right after the engine hands
// the block over (the bytes it puts on the wire), the decode node hashes its pool's copy once the
// completion arrived (the bytes that landed). One XXH3-64 per block: a receiver recomputes it from
// the handoff alone, whatever runs the writer coalesced its puts into, and a mismatch names the
// block.
//
// The key: each reservation gets 32 random bytes (NewKvChecksumKey) and an epoch; both travel in
// the KvHandoff (gRPC, under the cluster HMAC), never on the KV transport. The XXH3 secret is
// derived from them: HMAC-SHA256(key, "tandem.kv-checksum/1" || epoch || i) for i = 0..5, 192 bytes
// (XXH3's default secret size). Binding the epoch means a block checksum made for one reservation
// never verifies bytes of another, even under the same key.
//
// What that buys against a party on the data plane that can write into the pool (a rogue UCX
// peer, a stray late write) but does not know the key: to get wrong KV admitted it must produce
// bytes whose keyed XXH3 equals the checksum in the completion, and it cannot change that
// checksum (the completion's HMAC covers it). Without the secret, XXH3's output for altered bytes
// is not predictable: a forgery passes with probability about 2^-64 per block, and every
// reservation has a fresh key, so nothing learned carries over. What it does not buy: XXH3 is not a
// cryptographic MAC. A party that can also read the data plane sees KV bytes and (in the
// completion, which is signed but not encrypted) their checksums; no key-recovery attack on
// XXH3-with-secret is published, but none is ruled out by analysis either. Against such an
// attacker the data plane itself must be private (an encrypted link); the checksum is integrity,
// not confidentiality. Accidental corruption (a flipped bit, a misdirected or late write, a torn
// transfer) is caught like a forgery.
#ifndef TANDEM_COMMON_HANDOFF_KV_CHECKSUM_H_
#define TANDEM_COMMON_HANDOFF_KV_CHECKSUM_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/kv/kv_layout.h"

namespace tandem {

inline constexpr size_t kKvChecksumKeyBytes = 32;

// kKvChecksumKeyBytes from the OS's cryptographic random source.
std::string NewKvChecksumKey();

// Hashes blocks of a pool with the secret derived from (key, epoch). Immutable: share freely.
class KvBlockHasher {
 public:
  // InvalidArgument when `key` is not kKvChecksumKeyBytes long.
  static absl::StatusOr<KvBlockHasher> Create(std::string_view key, uint64_t epoch);

  // The checksum of `block` of `pool`, laid out as `layout` says. OutOfRange when the block is
  // not inside the layout or the layout is larger than `pool`.
  absl::StatusOr<uint64_t> HashBlock(std::span<const uint8_t> pool, const KvLayout& layout,
                                     int32_t block) const;
  // HashBlock of each of `blocks`, in order.
  absl::StatusOr<std::vector<uint64_t>> HashBlocks(std::span<const uint8_t> pool,
                                                   const KvLayout& layout,
                                                   std::span<const int32_t> blocks) const;

 private:
  static constexpr size_t kSecretBytes = 192;
  KvBlockHasher() = default;
  std::array<uint8_t, kSecretBytes> secret_{};
};

// The decode node's check before admission: hashes block_ids[first + i] of its `pool` and compares
// with expected[i], for every i. DataLoss naming the first block that differs; OutOfRange as
// HashBlock.
absl::Status VerifyKvBlocks(std::span<const uint8_t> pool, const KvLayout& layout,
                            std::span<const int32_t> block_ids, const KvBlockHasher& hasher,
                            std::span<const uint64_t> expected);

// Test hook for integration tests on real processes; nothing else sets it.
// TANDEM_TEST_STALE_KV_EPOCH=N: the first N block writers this process creates send the
// reservation's epoch minus one in their ok notice, with checksums keyed for that epoch: what a
// writer of the blocks' previous reservation would send. True for one of them.
bool TakeTestStaleKvEpoch();

}  // namespace tandem

#endif  // TANDEM_COMMON_HANDOFF_KV_CHECKSUM_H_
