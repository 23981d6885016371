// Every tandem process serves Prometheus' text format on GET /metrics from its own port
// (prometheus-cpp's pull exposer). Processes build their metric families on a registry (see
// router/router_metrics.h, prefill_node/prefill_metrics.h, decode_node/decode_metrics.h) and hand
// it to the server; families collected at scrape time implement prometheus::Collectable.
#ifndef TANDEM_COMMON_METRICS_METRICS_SERVER_H_
#define TANDEM_COMMON_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace tandem {

class MetricsServer {
 public:
  // Listens on `listen` ("HOST:PORT"; port 0 picks a free one). InvalidArgument for a malformed
  // address, Unavailable when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen);
  ~MetricsServer();

  // Adds a registry (or any collectable) to what /metrics serves; it must stay alive while the
  // server does (the server keeps a weak reference).
  void Register(const std::weak_ptr<prometheus::Collectable>& collectable);

  int port() const { return port_; }
  // HOST:PORT a client on this machine dials (127.0.0.1 for wildcard listen addresses).
  const std::string& address() const { return address_; }

 private:
  MetricsServer() = default;

  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
  std::string address_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_METRICS_METRICS_SERVER_H_
