// The router's OpenAI-compatible HTTP API: POST /v1/completions and /v1/chat/completions
// (streaming over server-sent events, or one JSON body), GET /v1/models, /health and /ready.
// Boost.Beast on an io_context with a few threads: connections, idle keep-alive ones included,
// cost no thread, and neither does a generation request: it is started on the RequestRunner
// (RequestRunner::Start) and writes through an HttpResponseSink (running_requests tracks them).
#ifndef TANDEM_ROUTER_HTTP_HTTP_SERVER_H_
#define TANDEM_ROUTER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls/grpc_tls.h"
#include "router/api_keys.h"
#include "router/http/http_routes.h"
#include "router/request_runner.h"

namespace tandem {

struct HttpServerOptions {
  std::string listen;  // HOST:PORT, port 0 = any free port
  int io_threads = 2;
  int64_t max_body_bytes = 8 << 20;
  // Keys /v1/* requests must present; null or empty: no authentication.
  std::shared_ptr<const ApiKeys> api_keys;
  // HTTPS when it names a certificate (client certificates required with a client CA).
  TlsServerFiles tls;
  int retry_after_seconds = 1;  // Retry-After on 429/503
};

class HttpServer {
 public:
  // `runner` must outlive the server. `ready` answers GET /ready: OK, or why not.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           RequestRunner* runner,
                                                           std::function<Readiness()> ready);
  ~HttpServer();  // Shutdown(0)
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  const std::string& address() const;  // HOST:PORT to dial (127.0.0.1 for 0.0.0.0)

  // Stops accepting; in-flight requests get up to `drain` to finish, then their sinks are
  // aborted; then the io threads stop. Idempotent.
  void Shutdown(absl::Duration drain);

  // Re-reads the TLS certificate files for new connections (SIGHUP); no-op over plain HTTP. On
  // error the old ones stay.
  absl::Status ReloadTls();

  // Generation requests running now.
  int64_t requests_in_flight() const;

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_HTTP_SERVER_H_
