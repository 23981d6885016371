#include "common/metrics/metrics_server.h"

#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen expects HOST:PORT, got '", listen, "'"));
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    // Two threads: Prometheus scrapes rarely; a second one keeps a slow scraper from blocking.
    server->exposer_ = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  server->port_ = ports.front();
  std::string host = listen.substr(0, colon);
  if (host == "0.0.0.0" || host == "[::]" || host == "::" || host == "localhost") {
    host = "127.0.0.1";
  }
  server->address_ = absl::StrCat(host, ":", server->port_);
  return server;
}

MetricsServer::~MetricsServer() = default;

void MetricsServer::Register(const std::weak_ptr<prometheus::Collectable>& collectable) {
  exposer_->RegisterCollectable(collectable);
}

}  // namespace tandem
