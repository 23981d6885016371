// The router process minus its command line: loads the served model, starts the node pool and
// the gRPC server (Generation + the standard health service), writes the ready file, and drains
// on Shutdown. Tests run it in-process; main.cc runs it until SIGINT/SIGTERM.
#ifndef TANDEM_ROUTER_ROUTER_SERVER_H_
#define TANDEM_ROUTER_ROUTER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "router/dns_resolver.h"
#include "router/generate_service.h"
#include "router/node_pool.h"
#include "router/router_counters.h"
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

  // Reports NOT_SERVING to health checks, stops accepting calls, gives in-flight streams up to
  // `drain` to finish, cancels the rest, then stops the node pool. Idempotent.
  void Shutdown(absl::Duration drain);

  const RouterCounters& counters() const { return counters_; }
  NodePool& pool() { return *pool_; }
  const ServedModel& model() const { return *model_; }

 private:
  RouterServer() = default;

  RouterCounters counters_;
  std::shared_ptr<const ServedModel> model_;
  std::unique_ptr<NodePool> pool_;
  std::unique_ptr<GenerateService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
  bool shut_down_ = false;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_ROUTER_SERVER_H_
