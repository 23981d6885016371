// TLS for tandem's gRPC listeners and channels, from PEM files.
//
// A server with a certificate and key serves TLS; with a client CA as well it requires every
// client to present a certificate that CA signed (mTLS: the router and prefill nodes towards the
// nodes). A channel with a CA verifies its server against it; with a certificate and key it
// presents them. Nodes are dialled by IP (DNS of a headless service), so the name checked against
// the node's certificate is a fixed one (`server_name`, "tandem-node" by default) that node
// certificates carry as a DNS SAN.
//
// The files are re-read while the process runs (gRPC's file watcher, every kReloadInterval):
// replace them in place (or let Kubernetes update the mounted Secret) and new handshakes use the
// new ones. Each file is checked once at start (readable, PEM, key matching the certificate), so a
// mistake fails the process with a message naming the file instead of failing every handshake.
#ifndef TANDEM_COMMON_TLS_GRPC_TLS_H_
#define TANDEM_COMMON_TLS_GRPC_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

inline constexpr absl::Duration kTlsReloadInterval = absl::Seconds(5);
inline constexpr char kDefaultNodeServerName[] = "tandem-node";

// --tls-cert / --tls-key / --tls-client-ca. All empty: plaintext.
struct TlsServerFiles {
  std::string cert;
  std::string key;
  std::string client_ca;  // "": clients are not asked for certificates
  bool enabled() const { return !cert.empty(); }
};

// --node-tls-ca / --node-tls-cert / --node-tls-key / --node-tls-server-name. ca empty: plaintext.
struct TlsClientFiles {
  std::string ca;
  std::string cert;  // with key: presented to the server (mTLS)
  std::string key;
  std::string server_name = kDefaultNodeServerName;
  bool enabled() const { return !ca.empty(); }
};

// InvalidArgument naming the flag and file: a key without a certificate (or the other way), a
// client CA without a certificate, an unreadable or non-PEM file, a key that does not match its
// certificate.
absl::Status CheckTlsServerFiles(const TlsServerFiles& files);
absl::Status CheckTlsClientFiles(const TlsClientFiles& files);

// Insecure credentials when !files.enabled().
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const TlsServerFiles& files);
// Adds the target-name override to `args` when TLS is on.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> GrpcChannelCredentials(
    const TlsClientFiles& files, grpc::ChannelArguments* args);

}  // namespace tandem

#endif  // TANDEM_COMMON_TLS_GRPC_TLS_H_
