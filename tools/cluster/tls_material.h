// Throwaway TLS material for a local cluster (tandem-cluster --tls): a CA made for this run, a
// certificate for the router's public API (localhost, 127.0.0.1) and one the nodes share (the
// DNS name tandem-node, which the router and prefill nodes verify, plus localhost and 127.0.0.1),
// usable for both ends of mTLS. EC P-256 keys, valid for `days`; keys written owner-only.
#ifndef TANDEM_TOOLS_CLUSTER_TLS_MATERIAL_H_
#define TANDEM_TOOLS_CLUSTER_TLS_MATERIAL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {

struct TlsMaterial {
  std::string ca_cert;  // PEM files under the directory given to MakeTlsMaterial
  std::string router_cert;
  std::string router_key;
  std::string node_cert;
  std::string node_key;
};

absl::StatusOr<TlsMaterial> MakeTlsMaterial(const std::string& dir, int days = 30);

// One certificate signed by the CA in `ca_cert`/`ca_key` with the given DNS and IP SANs; written
// to `cert_path` / `key_path`. Exposed for tests (a rotated certificate).
absl::Status IssueCertificate(const std::string& ca_cert, const std::string& ca_key,
                              const std::string& common_name, const std::vector<std::string>& dns,
                              const std::vector<std::string>& ips, int days,
                              const std::string& cert_path, const std::string& key_path);

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLUSTER_TLS_MATERIAL_H_
