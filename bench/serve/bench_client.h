// How tandem-bench talks to a server: the OpenAI-compatible HTTP API (POST /v1/completions with
// "stream": true and "stream_options": {"include_usage": true}, read as server-sent events) or
// the router's gRPC API (tandem.v1.Generation/Generate, server streaming). Every request asks for
// exactly output_len tokens (max_tokens + ignore_eos) at temperature 0 unless told otherwise.
#ifndef TANDEM_BENCH_SERVE_BENCH_CLIENT_H_
#define TANDEM_BENCH_SERVE_BENCH_CLIENT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/serve/bench_request.h"

namespace tandem::bench {

struct ClientOptions {
  std::string api = "http";  // "http" | "grpc"
  std::string address;       // HOST:PORT (HTTP: the router's --http-listen; gRPC: --listen)
  std::string model;         // "": the server's (gRPC: empty; HTTP: asked from GET /v1/models)
  std::string api_key;       // HTTP: "Authorization: Bearer KEY" when not empty
  std::optional<float> temperature = 0.0f;      // unset: the server's default
  absl::Duration timeout = absl::Seconds(600);  // per request
  // gRPC: keep each request's token ids and finish_reason in its RequestResult.
  bool record_tokens = false;
};

class BenchClient {
 public:
  virtual ~BenchClient() = default;
  // Sends one request and reads its whole stream, on the calling thread (thread-safe: many
  // threads call it at once). Times are measured from the call; start_s is left for the caller.
  // Never throws; a failure is a result with success = false and the reason in `error`.
  virtual RequestResult Send(const BenchRequest& request) = 0;
};

// Checks the options and, for HTTP without a model name, asks GET /v1/models for it.
absl::StatusOr<std::unique_ptr<BenchClient>> CreateBenchClient(const ClientOptions& options);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_BENCH_CLIENT_H_
