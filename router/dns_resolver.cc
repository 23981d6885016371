#include "router/dns_resolver.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>

#include "absl/strings/str_cat.h"

namespace tandem {

absl::Status SplitHostPort(const std::string& host_port, std::string* host, int* port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("'", host_port, "' is not HOST:PORT"));
  }
  std::string h = host_port.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  const std::string p = host_port.substr(colon + 1);
  int value = 0;
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (h.empty() || p.empty() || ec != std::errc() || ptr != p.data() + p.size() || value < 1 ||
      value > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", host_port, "' is not HOST:PORT with a port in 1..65535"));
  }
  *host = std::move(h);
  *port = value;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> GetAddrInfoResolver::Resolve(
    const std::string& name_port) {
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(name_port, &host, &port); !s.ok()) return s;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    return absl::NotFoundError(absl::StrCat("resolving ", host, ": ", gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (ai->ai_family == AF_INET) {
      auto* sa = reinterpret_cast<sockaddr_in*>(ai->ai_addr);
      if (inet_ntop(AF_INET, &sa->sin_addr, buf, sizeof(buf)) == nullptr) continue;
      out.push_back(absl::StrCat(buf, ":", port));
    } else if (ai->ai_family == AF_INET6) {
      auto* sa = reinterpret_cast<sockaddr_in6*>(ai->ai_addr);
      if (inet_ntop(AF_INET6, &sa->sin6_addr, buf, sizeof(buf)) == nullptr) continue;
      out.push_back(absl::StrCat("[", buf, "]:", port));
    }
  }
  freeaddrinfo(result);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.empty()) return absl::NotFoundError(absl::StrCat("resolving ", host, ": no addresses"));
  return out;
}

}  // namespace tandem
