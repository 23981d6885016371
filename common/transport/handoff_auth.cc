#include "common/transport/handoff_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

// Length-prefixed, little-endian fields: no two different messages encode alike.
class Encoder {
 public:
  explicit Encoder(const char* domain) { Bytes(domain); }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Bytes(const std::string& s) {
    U64(s.size());
    out_ += s;
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string HandoffMessage(const tandem::v1::KvHandoff& h) {
  Encoder e("tandem.v1.KvHandoff/2");
  e.U64(h.request_id());
  e.U64(h.decode_incarnation());
  e.Bytes(h.transport());
  e.Bytes(h.transport_address());
  e.Bytes(h.remote_key());
  e.U64(h.remote_base());
  const tandem::v1::KvLayoutDescriptor& l = h.layout();
  e.Bytes(l.dtype());
  e.I64(l.num_layers());
  e.I64(l.num_kv_heads());
  e.I64(l.head_dim());
  e.I64(l.block_size());
  e.I64(l.num_blocks());
  e.U64(static_cast<uint64_t>(h.block_ids_size()));
  for (int32_t id : h.block_ids()) e.I64(id);
  e.I64(h.num_cached_tokens());
  e.I64(h.lease_remaining_ms());
  e.I64(h.issued_unix_ms());
  e.U64(h.epoch());
  e.Bytes(h.checksum_key());
  return e.Take();
}

std::string CompletionMessage(const tandem::v1::KvCompletion& c) {
  Encoder e("tandem.v1.KvCompletion/2");
  e.U64(c.request_id());
  e.U64(c.decode_incarnation());
  e.U64(c.prefill_incarnation());
  e.U64(c.ok() ? 1 : 0);
  e.Bytes(c.error());
  const tandem::v1::Token& t = c.first_token();
  e.I64(t.id());
  // The float's bits, not its text.
  uint32_t bits = 0;
  const float lp = t.logprob();
  static_assert(sizeof(bits) == sizeof(lp));
  std::memcpy(&bits, &lp, sizeof(bits));
  e.U64(bits);
  e.U64(static_cast<uint64_t>(t.top_logprobs_size()));
  for (const tandem::v1::TokenLogprob& top : t.top_logprobs()) {
    e.I64(top.token_id());
    const float v = top.logprob();
    std::memcpy(&bits, &v, sizeof(bits));
    e.U64(bits);
  }
  e.U64(c.rng_counter());
  e.U64(c.epoch());
  e.U64(static_cast<uint64_t>(c.block_checksums_size()));
  for (uint64_t sum : c.block_checksums()) e.U64(sum);
  return e.Take();
}

absl::Status CheckMac(const std::string& expected, const std::string& got, const char* what) {
  if (got.empty()) {
    return absl::PermissionDeniedError(absl::StrCat("the ", what, " carries no MAC"));
  }
  if (got.size() != expected.size() ||
      CRYPTO_memcmp(got.data(), expected.data(), expected.size()) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("the ", what,
                     "'s MAC does not verify: it was not issued by a node of this "
                     "cluster, or was altered"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const HandoffAuthenticator>> HandoffAuthenticator::FromSecretFile(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the cluster secret file ", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  std::string secret = bytes.str();
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (secret.size() < kMinSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the cluster secret file ", path, " holds ", secret.size(), " bytes; it needs at least ",
        kMinSecretBytes, " random bytes (e.g. `openssl rand -hex 32 > ", path, "`)"));
  }
  return FromSecret(std::move(secret));
}

absl::StatusOr<std::shared_ptr<const HandoffAuthenticator>> HandoffAuthenticator::FromSecret(
    std::string secret) {
  if (secret.size() < kMinSecretBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a cluster secret needs at least ", kMinSecretBytes, " bytes"));
  }
  return std::shared_ptr<const HandoffAuthenticator>(new HandoffAuthenticator(std::move(secret)));
}

std::string HandoffAuthenticator::Mac(const std::string& message) const {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

void HandoffAuthenticator::Sign(tandem::v1::KvHandoff* handoff) const {
  handoff->set_mac(Mac(HandoffMessage(*handoff)));
}

void HandoffAuthenticator::Sign(tandem::v1::KvCompletion* completion) const {
  completion->set_mac(Mac(CompletionMessage(*completion)));
}

absl::Status HandoffAuthenticator::Verify(const tandem::v1::KvHandoff& handoff) const {
  return CheckMac(Mac(HandoffMessage(handoff)), handoff.mac(), "KV handoff");
}

absl::Status HandoffAuthenticator::Verify(const tandem::v1::KvCompletion& completion) const {
  return CheckMac(Mac(CompletionMessage(completion)), completion.mac(), "KV completion");
}

}  // namespace tandem
