// A test hook of the KV transports: flips one byte of a Write's data on its way to the target, so
// that tests can show the receiver's block checksums (common/handoff/kv_checksum.h) catch a byte
// corrupted in flight. The writer's pool is never touched: the flipped byte is sent from a copy.
//
// Armed by LocalTransport::CorruptNextWrites in unit tests, by UcxTransportOptions::
// test_corrupt_writes, which the nodes set from TANDEM_TEST_CORRUPT_KV_WRITES=N (integration
// tests; nothing else should set it): the next N Write calls each carry one flipped byte.
#ifndef TANDEM_COMMON_TRANSPORT_KV_WRITE_CORRUPTION_H_
#define TANDEM_COMMON_TRANSPORT_KV_WRITE_CORRUPTION_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/transport/kv_transport.h"

namespace tandem {

// Which byte of a Write to flip: byte `offset` of copies[copy], sent XOR kMask.
struct KvByteFlip {
  static constexpr uint8_t kMask = 0x5a;
  size_t copy = 0;
  uint64_t offset = 0;
};

class KvWriteCorruption {
 public:
  // TANDEM_TEST_CORRUPT_KV_WRITES as a count (0 when unset or not a number); logs a warning when
  // it is set.
  static int64_t FromEnvironment();

  // The next `writes` Write calls (that copy at least one byte) get a flipped byte.
  void Arm(int64_t writes) { remaining_.store(writes); }
  // Where to flip a byte of a Write of `copies`, when armed (one use consumed): the middle byte of
  // the first non-empty copy. Thread-safe.
  std::optional<KvByteFlip> Take(const std::vector<KvCopy>& copies);

 private:
  std::atomic<int64_t> remaining_{0};
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_KV_WRITE_CORRUPTION_H_
