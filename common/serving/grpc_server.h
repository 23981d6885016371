// Starting a process's gRPC server (with the standard health service), announcing it through a
// ready file, and waiting for SIGINT/SIGTERM: what tandem-router, -prefill and -decode share.
//
// Threads: a sync-API method (Cancel, ConnectKv, a node's WatchKvEvents, one stream per router)
// holds one thread of gRPC's sync pool for the whole call. Callback-API methods never take one:
// gRPC's default health service (grpc.health.v1.Health: Check and Watch are callback methods
// in the gRPC this builds against, 1.51), the nodes' GetLoad, and their Reserve, Generate and
// Prefill calls (state machines on a few worker threads per service). So a node's threads do not
// grow with its streams, and liveness answers however many sync threads are held.
#ifndef TANDEM_COMMON_SERVING_GRPC_SERVER_H_
#define TANDEM_COMMON_SERVING_GRPC_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls/grpc_tls.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

struct GrpcServerOptions {
  // At most this many threads serve sync-API calls at once (gRPC's ResourceQuota thread cap: one
  // of them keeps polling, so this many - 1 calls run); a sync call beyond that is refused with
  // RESOURCE_EXHAUSTED. 0: no cap (gRPC's default, a thread per call).
  int max_sync_threads = 0;
};

struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  std::string address;  // host:port actually bound (port 0 resolved)
};

// Binds `listen` ("HOST:PORT", port 0 = any free port), registers `services` and the standard
// grpc.health.v1 service (reporting SERVING), and starts serving; over TLS (mTLS with a client
// CA) when `tls` names a certificate.
absl::StatusOr<RunningServer> StartGrpcServer(const std::string& listen,
                                              const std::vector<grpc::Service*>& services,
                                              const TlsServerFiles& tls = {},
                                              const GrpcServerOptions& options = {});

// Blocks SIGINT and SIGTERM in the calling thread (call first thing in main, so that every
// thread started later inherits the mask).
void BlockTerminationSignals();
// Waits for SIGINT or SIGTERM (blocked by BlockTerminationSignals) and returns its number.
int WaitForTerminationSignal();

// A node's graceful drain: the health service turns NOT_SERVING (so routers and Kubernetes
// readiness stop sending new work), new RPCs are refused, and RPCs in flight (a decode node's
// token streams, a prefill node's prefills) get until `drain` from now to finish. Those still
// running then are ended by `cut` when given (a decode node ends its streams with ABORTED, which
// the router reads as "migrate this stream", not as a dead node), and cancelled by gRPC after a
// further grace (or at `drain` without `cut`). Returns once the server has stopped.
void DrainGrpcServer(grpc::Server& server, absl::Duration drain,
                     absl::AnyInvocable<void()> cut = nullptr);

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_GRPC_SERVER_H_
