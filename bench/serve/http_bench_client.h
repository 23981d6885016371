// tandem-bench's HTTP client: POST /v1/completions with "stream": true, read as server-sent
// events (completion_stream.h), over Boost.Beast. Connections are kept alive and reused by later
// requests (an idle pool shared by the sending threads, like an HTTP client library's); a request
// whose reused connection turns out to be closed by the server is retried once on a new one.
#ifndef TANDEM_BENCH_SERVE_HTTP_BENCH_CLIENT_H_
#define TANDEM_BENCH_SERVE_HTTP_BENCH_CLIENT_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "bench/serve/bench_client.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {

// The JSON body of `request` for POST /v1/completions (exposed for tests).
nlohmann::json CompletionsRequestBody(const BenchRequest& request, const std::string& model,
                                      const std::optional<float>& temperature);

// Resolves the address, and asks GET /v1/models for the model when options.model is empty
// (fails when the server lists none).
absl::StatusOr<std::unique_ptr<BenchClient>> CreateHttpBenchClient(const ClientOptions& options);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_HTTP_BENCH_CLIENT_H_
