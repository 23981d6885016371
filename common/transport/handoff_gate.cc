#include "common/transport/handoff_gate.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

// Decode incarnations remembered at most (a restart makes a new one): past it, all are forgotten.
constexpr size_t kMaxExtents = 4096;

// a + b and a - b, clamped to int64's range: the times come from the wire (any int64 when
// handoffs are not authenticated), where plain arithmetic would overflow.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? INT64_MAX : INT64_MIN;
  return sum;
}

int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t difference;
  if (__builtin_sub_overflow(a, b, &difference)) return b < 0 ? INT64_MAX : INT64_MIN;
  return difference;
}

}  // namespace

const char* HandoffRefusalName(HandoffRefusal refusal) {
  switch (refusal) {
    case HandoffRefusal::kBadMac:
      return "bad_mac";
    case HandoffRefusal::kExpired:
      return "expired";
    case HandoffRefusal::kReplayed:
      return "replayed";
    case HandoffRefusal::kExtentChanged:
      return "extent_changed";
  }
  return "?";
}

absl::Status HandoffGate::Refuse(HandoffRefusal why, std::string message) {
  ++refused_[static_cast<int>(why)];
  return absl::PermissionDeniedError(std::move(message));
}

void HandoffGate::ForgetExpired(int64_t now_unix_ms) {
  while (!admitted_by_expiry_.empty() && admitted_by_expiry_.front().first < now_unix_ms) {
    admitted_.erase(admitted_by_expiry_.front().second);
    admitted_by_expiry_.pop_front();
  }
}

absl::Status HandoffGate::Admit(const tandem::v1::KvHandoff& handoff, int64_t now_unix_ms) {
  // 1. The MAC.
  if (auth_ != nullptr) {
    if (absl::Status s = auth_->Verify(handoff); !s.ok()) {
      return Refuse(HandoffRefusal::kBadMac, std::string(s.message()));
    }
  }
  // 2. Not expired.
  const int64_t skew_ms = absl::ToInt64Milliseconds(kClockSkew);
  const int64_t valid_until = SaturatingAdd(handoff.issued_unix_ms(), handoff.lease_remaining_ms());
  const int64_t admit_until = SaturatingAdd(valid_until, skew_ms);
  if (handoff.issued_unix_ms() > SaturatingAdd(now_unix_ms, skew_ms)) {
    // No decode node's clock is that far ahead: a lease that would start in the future (and be
    // remembered for as long) is not one.
    return Refuse(HandoffRefusal::kExpired,
                  absl::StrCat("the KV handoff was issued ",
                               SaturatingSub(handoff.issued_unix_ms(), now_unix_ms),
                               " ms in the future, past the clock skew allowance"));
  }
  if (handoff.lease_remaining_ms() < 0 || admit_until < now_unix_ms) {
    return Refuse(HandoffRefusal::kExpired,
                  absl::StrCat("the KV handoff expired ", SaturatingSub(now_unix_ms, valid_until),
                               " ms ago (its lease ended)"));
  }
  const Key key{handoff.decode_incarnation(), handoff.request_id()};
  const Extent extent{handoff.remote_base(), handoff.remote_key(), handoff.transport_address(),
                      handoff.layout().num_blocks()};
  absl::MutexLock lock(&mu_);
  ForgetExpired(now_unix_ms);
  // 3. Not a replay.
  if (admitted_.contains(key)) {
    return Refuse(HandoffRefusal::kReplayed,
                  absl::StrCat("the KV handoff for decode request ", handoff.request_id(),
                               " was already used"));
  }
  // 4. The incarnation's pool extent.
  auto it = extents_.find(handoff.decode_incarnation());
  if (it != extents_.end() && !(it->second == extent)) {
    return Refuse(HandoffRefusal::kExtentChanged,
                  absl::StrCat("the KV handoff names a pool extent other than the one decode "
                               "incarnation ",
                               handoff.decode_incarnation(), " advertised before"));
  }
  if (it == extents_.end()) {
    if (extents_.size() >= kMaxExtents) extents_.clear();
    extents_.emplace(handoff.decode_incarnation(), extent);
  }
  admitted_.insert(key);
  admitted_by_expiry_.emplace_back(admit_until, key);
  return absl::OkStatus();
}

}  // namespace tandem
