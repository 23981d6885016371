#include "bench/serve/bench_client.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "bench/serve/grpc_bench_client.h"
#include "bench/serve/http_bench_client.h"

namespace tandem::bench {

absl::StatusOr<std::unique_ptr<BenchClient>> CreateBenchClient(const ClientOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("no server address given");
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the request timeout must be positive");
  }
  if (options.temperature.has_value() &&
      !(std::isfinite(*options.temperature) && *options.temperature >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be >= 0, got ", *options.temperature));
  }
  if (options.api == "http") return CreateHttpBenchClient(options);
  if (options.api == "grpc") return CreateGrpcBenchClient(options);
  return absl::InvalidArgumentError(
      absl::StrCat("api must be http or grpc, got '", options.api, "'"));
}

}  // namespace tandem::bench
