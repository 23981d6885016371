#include "common/transport/handoff_auth.h"

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

std::shared_ptr<const HandoffAuthenticator> Auth(char fill = 'k') {
  return *HandoffAuthenticator::FromSecret(std::string(32, fill));
}

v1::KvHandoff Handoff() {
  v1::KvHandoff h;
  h.set_request_id(7);
  h.set_decode_incarnation(0xabc);
  h.set_transport("ucx");
  h.set_transport_address("worker-address");
  h.set_remote_key("rkey");
  h.set_remote_base(0x7f0000000000);
  h.mutable_layout()->set_dtype("bf16");
  h.mutable_layout()->set_num_layers(2);
  h.mutable_layout()->set_num_kv_heads(2);
  h.mutable_layout()->set_head_dim(8);
  h.mutable_layout()->set_block_size(16);
  h.mutable_layout()->set_num_blocks(64);
  h.add_block_ids(3);
  h.add_block_ids(4);
  h.set_num_cached_tokens(16);
  h.set_lease_remaining_ms(30000);
  h.set_issued_unix_ms(1'700'000'000'000);
  h.set_epoch(5);
  h.set_checksum_key(std::string(32, 'k'));
  return h;
}

TEST(HandoffAuthTest, ASignedHandoffVerifies) {
  auto auth = Auth();
  v1::KvHandoff h = Handoff();
  auth->Sign(&h);
  EXPECT_EQ(h.mac().size(), 32u);  // HMAC-SHA256
  EXPECT_TRUE(auth->Verify(h).ok());
  // Through the wire and back.
  v1::KvHandoff parsed;
  ASSERT_TRUE(parsed.ParseFromString(h.SerializeAsString()));
  EXPECT_TRUE(auth->Verify(parsed).ok());
}

TEST(HandoffAuthTest, EveryAlteredFieldFailsTheMac) {
  auto auth = Auth();
  const std::vector<std::function<void(v1::KvHandoff&)>> alterations = {
      [](v1::KvHandoff& h) { h.set_request_id(8); },
      [](v1::KvHandoff& h) { h.set_decode_incarnation(1); },
      [](v1::KvHandoff& h) { h.set_transport("nccl"); },
      [](v1::KvHandoff& h) { h.set_transport_address("attacker"); },
      [](v1::KvHandoff& h) { h.set_remote_key("other"); },
      [](v1::KvHandoff& h) { h.set_remote_base(0x1000); },
      [](v1::KvHandoff& h) { h.mutable_layout()->set_dtype("f32"); },
      [](v1::KvHandoff& h) { h.mutable_layout()->set_num_layers(3); },
      [](v1::KvHandoff& h) { h.mutable_layout()->set_num_kv_heads(4); },
      [](v1::KvHandoff& h) { h.mutable_layout()->set_head_dim(16); },
      [](v1::KvHandoff& h) { h.mutable_layout()->set_block_size(32); },
      [](v1::KvHandoff& h) { h.mutable_layout()->set_num_blocks(2147483647); },
      [](v1::KvHandoff& h) { h.set_block_ids(0, 2147483646); },
      [](v1::KvHandoff& h) { h.add_block_ids(5); },
      [](v1::KvHandoff& h) { h.set_num_cached_tokens(0); },
      [](v1::KvHandoff& h) { h.set_lease_remaining_ms(300000); },
      [](v1::KvHandoff& h) { h.set_issued_unix_ms(1'800'000'000'000); },
      [](v1::KvHandoff& h) { h.set_epoch(6); },
      [](v1::KvHandoff& h) { h.set_checksum_key(std::string(32, 'j')); },
      [](v1::KvHandoff& h) { h.clear_checksum_key(); },
  };
  for (size_t i = 0; i < alterations.size(); ++i) {
    v1::KvHandoff h = Handoff();
    auth->Sign(&h);
    alterations[i](h);
    const absl::Status s = auth->Verify(h);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << "alteration " << i << ": " << s;
  }
}

TEST(HandoffAuthTest, AnotherSecretOrNoMacIsRefused) {
  v1::KvHandoff h = Handoff();
  Auth('a')->Sign(&h);
  EXPECT_TRUE(absl::IsPermissionDenied(Auth('b')->Verify(h)));
  v1::KvHandoff unsigned_handoff = Handoff();
  const absl::Status s = Auth()->Verify(unsigned_handoff);
  EXPECT_TRUE(absl::IsPermissionDenied(s));
  EXPECT_NE(s.message().find("no MAC"), std::string_view::npos) << s;
  // A truncated MAC.
  v1::KvHandoff truncated = Handoff();
  Auth()->Sign(&truncated);
  truncated.set_mac(truncated.mac().substr(0, 16));
  EXPECT_TRUE(absl::IsPermissionDenied(Auth()->Verify(truncated)));
}

TEST(HandoffAuthTest, CompletionsAreSignedToo) {
  auto auth = Auth();
  v1::KvCompletion c;
  c.set_request_id(7);
  c.set_decode_incarnation(0xabc);
  c.set_prefill_incarnation(0xdef);
  c.set_ok(true);
  c.mutable_first_token()->set_id(42);
  c.mutable_first_token()->set_logprob(-0.5f);
  c.set_rng_counter(3);
  c.set_epoch(9);
  c.add_block_checksums(0x1234);
  c.add_block_checksums(0x5678);
  auth->Sign(&c);
  EXPECT_TRUE(auth->Verify(c).ok());
  v1::KvCompletion forged = c;
  forged.mutable_first_token()->set_id(43);
  EXPECT_TRUE(absl::IsPermissionDenied(auth->Verify(forged)));
  forged = c;
  forged.set_ok(false);
  EXPECT_TRUE(absl::IsPermissionDenied(auth->Verify(forged)));
  forged = c;
  forged.mutable_first_token()->set_logprob(-0.25f);
  EXPECT_TRUE(absl::IsPermissionDenied(auth->Verify(forged)));
  // The integrity fields: nobody on the data plane changes the epoch or the checksums.
  forged = c;
  forged.set_epoch(10);
  EXPECT_TRUE(absl::IsPermissionDenied(auth->Verify(forged)));
  forged = c;
  forged.set_block_checksums(1, 0x5679);
  EXPECT_TRUE(absl::IsPermissionDenied(auth->Verify(forged)));
  forged = c;
  forged.mutable_block_checksums()->RemoveLast();
  EXPECT_TRUE(absl::IsPermissionDenied(auth->Verify(forged)));
  // A handoff's MAC is no completion's MAC (separate domains).
  v1::KvCompletion unsigned_completion = c;
  unsigned_completion.clear_mac();
  EXPECT_TRUE(absl::IsPermissionDenied(auth->Verify(unsigned_completion)));
}

TEST(HandoffAuthTest, SecretFiles) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/secret_good";
  std::ofstream(good) << std::string(64, 'f') << "\n";
  EXPECT_TRUE(HandoffAuthenticator::FromSecretFile(good).ok());
  const std::string short_file = dir + "/secret_short";
  std::ofstream(short_file) << "tooshort\n";
  absl::StatusOr<std::shared_ptr<const HandoffAuthenticator>> s =
      HandoffAuthenticator::FromSecretFile(short_file);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("at least 32"), std::string_view::npos) << s.status();
  EXPECT_FALSE(HandoffAuthenticator::FromSecretFile(dir + "/no_such_secret").ok());
  EXPECT_FALSE(HandoffAuthenticator::FromSecret(std::string(31, 'x')).ok());
}

}  // namespace
}  // namespace tandem
