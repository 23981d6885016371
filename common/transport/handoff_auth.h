// Authentication of KV handoffs and completions between the nodes of one cluster.
//
// A KvHandoff tells a prefill node where in a decode node's memory to write (remote address,
// remote key, block ids, layout). It travels decode node → router → prefill node, so a prefill
// node must not believe one unless the decode node vouched for it: the decode node signs each
// handoff with HMAC-SHA256 under a secret every decode and prefill node of the cluster shares
// (--cluster-secret-file), and the prefill node verifies the MAC before it touches the target.
// Completions (prefill → decode over the KV transport) are signed the same way, so no other
// transport peer can complete or abort a reservation.
//
// Why a shared secret and not the mTLS identities: the handoff reaches the prefill node through
// the router, not over a connection with the decode node, so a TLS identity does not authenticate
// it; a signature with the decode node's certificate key would need every prefill node to hold and
// check every decode node's certificate chain per handoff. An HMAC is a microsecond, needs one
// Secret in Kubernetes mounted only into node pods (the router never holds it, so a compromised
// router can replay a handoff it saw but not forge a new one), and rotates with a rolling restart.
//
// The MAC covers a fixed, length-prefixed encoding of every field but the MAC itself (not the
// protobuf bytes, whose encoding is not canonical), under a per-message-type domain tag. Version 2
// of the tags covers the KV integrity fields: the handoff's epoch and checksum key, the
// completion's epoch and block checksums (common/handoff/kv_checksum.h), so nobody on the way can
// change the checksums a decode node checks the landed KV against.
#ifndef TANDEM_COMMON_TRANSPORT_HANDOFF_AUTH_H_
#define TANDEM_COMMON_TRANSPORT_HANDOFF_AUTH_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

class HandoffAuthenticator {
 public:
  static constexpr size_t kMinSecretBytes = 32;

  // The secret is the file's bytes (a trailing newline is dropped); at least kMinSecretBytes.
  static absl::StatusOr<std::shared_ptr<const HandoffAuthenticator>> FromSecretFile(
      const std::string& path);
  static absl::StatusOr<std::shared_ptr<const HandoffAuthenticator>> FromSecret(std::string secret);

  void Sign(tandem::v1::KvHandoff* handoff) const;
  void Sign(tandem::v1::KvCompletion* completion) const;
  // PermissionDenied when the MAC is missing or does not match.
  absl::Status Verify(const tandem::v1::KvHandoff& handoff) const;
  absl::Status Verify(const tandem::v1::KvCompletion& completion) const;

 private:
  explicit HandoffAuthenticator(std::string secret) : secret_(std::move(secret)) {}
  std::string Mac(const std::string& message) const;

  const std::string secret_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_HANDOFF_AUTH_H_
