// The router process minus its command line: loads the served model, starts the node pool, the
// gRPC server (Generation + the standard health service), the OpenAI-compatible HTTP server and
// the Prometheus /metrics endpoint, writes the ready file, and drains on Shutdown. Tests run it
// in-process; main.cc runs it until SIGINT/SIGTERM.
#ifndef TANDEM_ROUTER_ROUTER_SERVER_H_
#define TANDEM_ROUTER_ROUTER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/metrics_server.h"
#include "grpcpp/server.h"
#include "router/api_keys.h"
#include "router/dns_resolver.h"
#include "router/generate_service.h"
#include "router/http/http_routes.h"
#include "router/http/http_server.h"
#include "router/node_pool.h"
#include "router/request_runner.h"
#include "router/router_counters.h"
#include "router/router_metrics.h"
#include "router/router_options.h"
#include "router/served_model.h"

namespace tandem {

class RouterServer {
 public:
  // `resolver` null: getaddrinfo.
  static absl::StatusOr<std::unique_ptr<RouterServer>> Start(
      const RouterOptions& options, std::shared_ptr<DnsResolver> resolver = nullptr);
  ~RouterServer();  // Shutdown(0) if not done

  int port() const { return port_; }
  // HOST:PORT a client on this machine dials (127.0.0.1 for wildcard listen addresses).
  const std::string& address() const { return address_; }
  // The HTTP API's and /metrics' HOST:PORT ("" when off).
  std::string http_address() const { return http_ ? http_->address() : ""; }
  std::string metrics_address() const { return metrics_server_ ? metrics_server_->address() : ""; }

  // Reports NOT_SERVING to health checks, stops accepting calls (gRPC and HTTP), gives in-flight
  // streams up to `drain` to finish, cancels the rest, then stops the node pool. Idempotent.
  void Shutdown(absl::Duration drain);

  const RouterCounters& counters() const { return counters_; }
  NodePool& pool() { return *pool_; }
  const ServedModel& model() const { return *model_; }

  // SIGHUP: re-reads what may be rotated without a restart (the API key file, the HTTPS
  // certificate; gRPC's TLS files are watched by gRPC itself). Errors are returned and the old
  // settings stay.
  absl::Status Reload();

 private:
  RouterServer() = default;

  // Whether GET /ready answers OK: a decode node and a prefill-capable node are up.
  Readiness Ready() const;

  RouterCounters counters_;
  PlacementOptions placement_;
  std::shared_ptr<const ServedModel> model_;
  std::unique_ptr<NodePool> pool_;
  std::unique_ptr<RouterMetrics> metrics_;
  std::shared_ptr<ApiKeys> api_keys_;
  std::unique_ptr<RequestRunner> runner_;
  std::unique_ptr<GenerateService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<MetricsServer> metrics_server_;
  int port_ = 0;
  std::string address_;
  bool shut_down_ = false;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_ROUTER_SERVER_H_
