#include "router/client_errors.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

// "UNAVAILABLE", "RESOURCE_EXHAUSTED", ...: gRPC's codes are absl's.
std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

}  // namespace

const char* ClientStageText(RetryReason stage) {
  switch (stage) {
    case RetryReason::kReserveFailed:
      return "reserving KV cache on a decode node failed";
    case RetryReason::kBadHandoff:
      return "a decode node answered its reservation without a handoff";
    case RetryReason::kPrefillFailed:
      return "prefill failed";
    case RetryReason::kDecodeFailed:
      return "decoding failed";
    case RetryReason::kFirstTokenTimeout:
      return "no first token arrived in time";
  }
  return "the request failed";
}

std::string WithRequestId(std::string_view message, std::string_view request_id) {
  std::string out(message);
  out.append(" (request id ").append(request_id).append(")");
  return out;
}

std::string ClientNodeErrorText(const grpc::Status& node_status, RetryReason stage, int attempts) {
  const grpc::StatusCode code = node_status.error_code();
  std::string message = absl::StrCat(ClientStageText(stage), " (", CodeName(code), ")");
  // A node's INVALID_ARGUMENT / OUT_OF_RANGE is its verdict on the request itself (its own
  // validation), worded for the request's sender: the client needs it.
  if (code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::OUT_OF_RANGE) {
    message = absl::StrCat("a node refused the request: ", node_status.error_message());
  }
  if (attempts > 1) absl::StrAppend(&message, " after ", attempts, " attempts");
  return message;
}

grpc::Status ClientNodeError(const grpc::Status& node_status, RetryReason stage, int attempts,
                             std::string_view request_id) {
  grpc::StatusCode code = node_status.error_code();
  // A node's ALREADY_EXISTS or PERMISSION_DENIED is about the router's call to it, not the
  // client's request: to the client it is the server failing.
  if (code == grpc::StatusCode::ALREADY_EXISTS || code == grpc::StatusCode::PERMISSION_DENIED ||
      code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::OK) {
    code = grpc::StatusCode::INTERNAL;
  }
  return grpc::Status(code,
                      WithRequestId(ClientNodeErrorText(node_status, stage, attempts), request_id));
}

}  // namespace tandem
