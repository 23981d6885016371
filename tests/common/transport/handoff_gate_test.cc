#include "common/transport/handoff_gate.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

class HandoffGateTest : public ::testing::Test {
 protected:
  v1::KvHandoff Handoff(uint64_t request_id, int64_t issued = kNow, int64_t lease_ms = 30000) {
    v1::KvHandoff h;
    h.set_request_id(request_id);
    h.set_decode_incarnation(0xabc);
    h.set_transport_address("worker");
    h.set_remote_key("rkey");
    h.set_remote_base(0x1000);
    h.mutable_layout()->set_num_blocks(64);
    h.add_block_ids(1);
    h.set_lease_remaining_ms(lease_ms);
    h.set_issued_unix_ms(issued);
    auth_->Sign(&h);
    return h;
  }

  std::shared_ptr<const HandoffAuthenticator> auth_ =
      *HandoffAuthenticator::FromSecret(std::string(32, 'g'));
  HandoffGate gate_{auth_};
};

TEST_F(HandoffGateTest, AdmitsAFreshSignedHandoffOnce) {
  const v1::KvHandoff h = Handoff(1);
  EXPECT_TRUE(gate_.Admit(h, kNow + 5).ok());
  const absl::Status again = gate_.Admit(h, kNow + 10);
  EXPECT_TRUE(absl::IsPermissionDenied(again));
  EXPECT_NE(again.message().find("already used"), std::string_view::npos) << again;
  EXPECT_EQ(gate_.refused(HandoffRefusal::kReplayed), 1);
}

TEST_F(HandoffGateTest, RefusesForgedAndUnsignedHandoffs) {
  v1::KvHandoff h = Handoff(2);
  h.set_remote_base(0xdead0000);  // altered after signing
  EXPECT_TRUE(absl::IsPermissionDenied(gate_.Admit(h, kNow)));
  h.clear_mac();
  EXPECT_TRUE(absl::IsPermissionDenied(gate_.Admit(h, kNow)));
  EXPECT_EQ(gate_.refused(HandoffRefusal::kBadMac), 2);
  // Refused handoffs do not count as used: the genuine one still goes through.
  EXPECT_TRUE(gate_.Admit(Handoff(2), kNow).ok());
}

TEST_F(HandoffGateTest, RefusesExpiredHandoffsAfterTheSkewAllowance) {
  const int64_t skew = absl::ToInt64Milliseconds(HandoffGate::kClockSkew);
  EXPECT_TRUE(gate_.Admit(Handoff(3, kNow, 1000), kNow + 1000 + skew).ok());
  const absl::Status late = gate_.Admit(Handoff(4, kNow, 1000), kNow + 1000 + skew + 1);
  EXPECT_TRUE(absl::IsPermissionDenied(late));
  EXPECT_NE(late.message().find("expired"), std::string_view::npos) << late;
  EXPECT_TRUE(absl::IsPermissionDenied(gate_.Admit(Handoff(5, kNow, -1), kNow)));
  EXPECT_EQ(gate_.refused(HandoffRefusal::kExpired), 2);
}

TEST_F(HandoffGateTest, AnIncarnationsPoolExtentNeverChanges) {
  EXPECT_TRUE(gate_.Admit(Handoff(6), kNow).ok());
  v1::KvHandoff moved = Handoff(7);
  moved.mutable_layout()->set_num_blocks(1 << 30);
  auth_->Sign(&moved);  // even when signed (a bug, or a stolen secret)
  EXPECT_TRUE(absl::IsPermissionDenied(gate_.Admit(moved, kNow)));
  EXPECT_EQ(gate_.refused(HandoffRefusal::kExtentChanged), 1);
  // Another incarnation (a restarted decode node) has its own extent.
  v1::KvHandoff restarted = Handoff(7);
  restarted.set_decode_incarnation(0xdef);
  restarted.mutable_layout()->set_num_blocks(1 << 30);
  auth_->Sign(&restarted);
  EXPECT_TRUE(gate_.Admit(restarted, kNow).ok());
}

TEST_F(HandoffGateTest, ReplayMemoryEndsWithTheLease) {
  const v1::KvHandoff h = Handoff(8, kNow, 1000);
  EXPECT_TRUE(gate_.Admit(h, kNow).ok());
  // Past its lease (and the skew) the handoff is refused as expired, not remembered forever.
  const int64_t later = kNow + 1000 + absl::ToInt64Milliseconds(HandoffGate::kClockSkew) + 1;
  EXPECT_TRUE(absl::IsPermissionDenied(gate_.Admit(h, later)));
  EXPECT_EQ(gate_.refused(HandoffRefusal::kExpired), 1);
}

TEST(HandoffGateNoAuthTest, WithoutASecretTheOtherChecksStillRun) {
  HandoffGate gate(nullptr);
  EXPECT_FALSE(gate.authenticates());
  v1::KvHandoff h;
  h.set_request_id(1);
  h.set_lease_remaining_ms(1000);
  h.set_issued_unix_ms(kNow);
  EXPECT_TRUE(gate.Admit(h, kNow).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(gate.Admit(h, kNow)));  // replay
}

// Found by tests/fuzz/handoff_fuzzer.cc: issued_unix_ms + lease_remaining_ms overflowed int64
// (undefined behaviour; in practice a wrapped, negative expiry) for times near int64's ends.
TEST(HandoffGateNoAuthTest, TimesAtInt64sEndsAreRefusedWithoutOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  HandoffGate gate(nullptr);
  v1::KvHandoff h;
  h.set_request_id(1);
  // Issued at the end of time: not a lease that started, whatever its length.
  h.set_issued_unix_ms(kMax);
  h.set_lease_remaining_ms(kMax);
  absl::Status s = gate.Admit(h, kNow);
  EXPECT_TRUE(absl::IsPermissionDenied(s));
  EXPECT_NE(s.message().find("in the future"), std::string_view::npos) << s;
  // Issued at the beginning of time: long expired, by a number of ms that does not wrap.
  h.set_request_id(2);
  h.set_issued_unix_ms(kMin);
  h.set_lease_remaining_ms(1000);
  s = gate.Admit(h, kNow);
  EXPECT_TRUE(absl::IsPermissionDenied(s));
  EXPECT_NE(s.message().find("expired " + std::to_string(kMax) + " ms ago"), std::string_view::npos)
      << s;
  // A lease to the end of time from now is a long lease, not an expired one.
  h.set_request_id(3);
  h.set_issued_unix_ms(kNow);
  h.set_lease_remaining_ms(kMax);
  EXPECT_TRUE(gate.Admit(h, kNow).ok());
  EXPECT_EQ(gate.refused(HandoffRefusal::kExpired), 2);
}

TEST(HandoffRefusalTest, Names) {
  EXPECT_STREQ(HandoffRefusalName(HandoffRefusal::kBadMac), "bad_mac");
  EXPECT_STREQ(HandoffRefusalName(HandoffRefusal::kExtentChanged), "extent_changed");
}

}  // namespace
}  // namespace tandem
