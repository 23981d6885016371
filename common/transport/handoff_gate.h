// What a prefill node checks of a KvHandoff before it writes a byte for it, or sends its decode
// node anything (the handoff names where in the decode node's memory the writes land, so a forged
// one would let its sender choose where another process is written):
//
//   1. The MAC (handoff_auth.h): the handoff was issued by a decode node of this cluster and not
//      altered on the way.
//   2. It has not expired: issued_unix_ms + lease_remaining_ms, with kClockSkew of slack between
//      the two hosts' clocks, is not in the past; nor was it issued more than kClockSkew in the
//      future. (The times are added without overflow, whatever the wire says.)
//   3. It is not a replay: the same (decode incarnation, request id) was not admitted before while
//      its lease ran.
//   4. The pool extent (remote base, remote key, transport address, block count) is the one the
//      same decode incarnation advertised in the handoffs admitted before: an incarnation's pool
//      never moves or grows.
//
// Refusals are PermissionDenied naming the check, and counted by reason. Without an
// authenticator (a node started with --insecure-no-handoff-auth) check 1 is skipped; the others
// still run. Thread-safe.
#ifndef TANDEM_COMMON_TRANSPORT_HANDOFF_GATE_H_
#define TANDEM_COMMON_TRANSPORT_HANDOFF_GATE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/transport/handoff_auth.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

enum class HandoffRefusal { kBadMac, kExpired, kReplayed, kExtentChanged };
inline constexpr int kNumHandoffRefusals = 4;
// "bad_mac", "expired", "replayed", "extent_changed".
const char* HandoffRefusalName(HandoffRefusal refusal);

class HandoffGate {
 public:
  static constexpr absl::Duration kClockSkew = absl::Seconds(10);

  // `auth` null: MACs are not checked.
  explicit HandoffGate(std::shared_ptr<const HandoffAuthenticator> auth) : auth_(std::move(auth)) {}

  // OK, or PermissionDenied with the check that failed. `now_unix_ms`: this host's wall clock.
  absl::Status Admit(const tandem::v1::KvHandoff& handoff, int64_t now_unix_ms);

  bool authenticates() const { return auth_ != nullptr; }
  int64_t refused(HandoffRefusal r) const { return refused_[static_cast<int>(r)].load(); }

 private:
  struct Extent {
    uint64_t remote_base = 0;
    std::string remote_key;
    std::string transport_address;
    int32_t num_blocks = 0;
    bool operator==(const Extent&) const = default;
  };
  using Key = std::pair<uint64_t, uint64_t>;  // (decode incarnation, request id)

  absl::Status Refuse(HandoffRefusal why, std::string message);
  void ForgetExpired(int64_t now_unix_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<const HandoffAuthenticator> auth_;
  std::array<std::atomic<int64_t>, kNumHandoffRefusals> refused_{};
  absl::Mutex mu_;
  absl::flat_hash_set<Key> admitted_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<int64_t, Key>> admitted_by_expiry_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Extent> extents_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_HANDOFF_GATE_H_
