// What a client is told when its request failed on a node. Node statuses carry node addresses,
// UCX peer names and the nodes' own wording; those go to the router's log, under the request's
// id. The client gets the status code, the stage that failed, and the request id to find the log
// entry: never an internal address or another component's message.
#ifndef TANDEM_ROUTER_CLIENT_ERRORS_H_
#define TANDEM_ROUTER_CLIENT_ERRORS_H_

#include <string>
#include <string_view>

#include "grpcpp/support/status.h"
#include "router/router_counters.h"

namespace tandem {

// The stage that failed, in a client's words ("prefill failed", ...).
const char* ClientStageText(RetryReason stage);

// The client's words for a node failure: the stage and the code; a node's INVALID_ARGUMENT or
// OUT_OF_RANGE message (its verdict on the request) is kept.
std::string ClientNodeErrorText(const grpc::Status& node_status, RetryReason stage, int attempts);

// `node_status` is what the node (or the router's call to it) reported; only its code is kept.
// `attempts` > 1 says the request was retried that many times in all.
grpc::Status ClientNodeError(const grpc::Status& node_status, RetryReason stage, int attempts,
                             std::string_view request_id);

// `message` + " (request id ID)".
std::string WithRequestId(std::string_view message, std::string_view request_id);

}  // namespace tandem

#endif  // TANDEM_ROUTER_CLIENT_ERRORS_H_
