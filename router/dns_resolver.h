// Name resolution for node discovery: "NAME:PORT" → every "IP:PORT" the name has (a Kubernetes
// headless service answers with one address per ready pod). An interface so tests can inject
// names.
#ifndef TANDEM_ROUTER_DNS_RESOLVER_H_
#define TANDEM_ROUTER_DNS_RESOLVER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {

class DnsResolver {
 public:
  virtual ~DnsResolver() = default;
  // `name_port` is "NAME:PORT". Returns "IP:PORT" strings (IPv6 as "[IP]:PORT"), sorted and
  // without duplicates. NotFound when the name has no addresses; InvalidArgument for a malformed
  // `name_port`.
  virtual absl::StatusOr<std::vector<std::string>> Resolve(const std::string& name_port) = 0;
};

// getaddrinfo(3), TCP addresses of any family.
class GetAddrInfoResolver : public DnsResolver {
 public:
  absl::StatusOr<std::vector<std::string>> Resolve(const std::string& name_port) override;
};

// Splits "HOST:PORT" / "[V6]:PORT"; InvalidArgument unless the port is 1..65535 and the host is
// non-empty. The brackets are removed from the host.
absl::Status SplitHostPort(const std::string& host_port, std::string* host, int* port);

}  // namespace tandem

#endif  // TANDEM_ROUTER_DNS_RESOLVER_H_
