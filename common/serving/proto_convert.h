// Conversions between tandem's plain structs and the tandem.v1 wire messages, for services.
#ifndef TANDEM_COMMON_SERVING_PROTO_CONVERT_H_
#define TANDEM_COMMON_SERVING_PROTO_CONVERT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/engine/request.h"
#include "common/sampling/sampling_params.h"
#include "grpcpp/support/status.h"
#include "tandem/v1/generate.pb.h"
#include "tandem/v1/node.pb.h"
#include "tandem/v1/sampling.pb.h"

namespace tandem {

// Unset optional fields take tandem's defaults (sampling_params.h). Not validated here.
SamplingParams SamplingFromProto(const v1::SamplingParams& proto);
void SamplingToProto(const SamplingParams& params, v1::SamplingParams* proto);

// The event's token (with logprobs when `with_logprobs`) as a v1::Token.
void TokenToProto(const GenerationEvent& event, bool with_logprobs, v1::Token* proto);
void UsageToProto(const Usage& usage, v1::Usage* proto);

// absl → gRPC status codes (they share numbering), message kept.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_PROTO_CONVERT_H_
