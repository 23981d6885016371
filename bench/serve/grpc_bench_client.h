// tandem-bench's gRPC client: tandem.v1.Generation/Generate (server streaming) on one channel
// shared by every sending thread (HTTP/2 multiplexes the calls).
#ifndef TANDEM_BENCH_SERVE_GRPC_BENCH_CLIENT_H_
#define TANDEM_BENCH_SERVE_GRPC_BENCH_CLIENT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "bench/serve/bench_client.h"
#include "tandem/v1/generate.pb.h"

namespace tandem::bench {

// The GenerateRequest for `request` (exposed for tests).
v1::GenerateRequest GrpcGenerateRequest(const BenchRequest& request, const ClientOptions& options);

absl::StatusOr<std::unique_ptr<BenchClient>> CreateGrpcBenchClient(const ClientOptions& options);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_GRPC_BENCH_CLIENT_H_
