// OpenAI-style errors for the HTTP API: the JSON body ({"error": {"message", "type", "param",
// "code"}}), the HTTP status of each failure, and the mapping from the request runner's gRPC
// codes. Request validation reports the offending parameter through InvalidParam, which rides on
// an absl::Status so parsing code can use the usual Status plumbing.
#ifndef TANDEM_ROUTER_HTTP_OPENAI_ERROR_H_
#define TANDEM_ROUTER_HTTP_OPENAI_ERROR_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"
#include "nlohmann/json.hpp"

namespace tandem {

struct OpenAiError {
  int http_status = 500;
  std::string message;
  std::string type;   // "invalid_request_error", "server_error", ...
  std::string param;  // the offending request parameter; "" → null
  std::string code;   // a machine-readable reason; "" → null

  // {"error": {"message", "type", "param", "code"}}.
  nlohmann::ordered_json ToJson() const;
  // 429 and 503 tell the client to come back later (Retry-After).
  bool retry_later() const { return http_status == 429 || http_status == 503; }
};

// A bad request parameter: InvalidArgument whose payload names `param`.
absl::Status InvalidParam(std::string_view param, std::string_view message);
// A parameter this server does not implement: InvalidArgument naming `param`, with the code
// "unsupported_parameter".
absl::Status UnsupportedParam(std::string_view param, std::string_view message);
// The parameter named by InvalidParam / UnsupportedParam; "" when none.
std::string ParamOf(const absl::Status& status);

// 400 for a status from request parsing (InvalidParam, UnsupportedParam).
OpenAiError ErrorFromParseStatus(const absl::Status& status);
// The request runner's answer: INVALID_ARGUMENT / OUT_OF_RANGE 400, NOT_FOUND 404,
// RESOURCE_EXHAUSTED 429, UNAVAILABLE / ABORTED 503, DEADLINE_EXCEEDED 504, CANCELLED 499
// (the client went away), UNAUTHENTICATED 401, PERMISSION_DENIED 403, UNIMPLEMENTED 501, others
// 500.
OpenAiError ErrorFromGrpcStatus(const grpc::Status& status);
int HttpStatusForGrpcCode(grpc::StatusCode code);

// Errors of the HTTP layer itself.
OpenAiError BadRequestError(std::string message, std::string param = "");
OpenAiError UnauthorizedError();
OpenAiError NotFoundError(std::string_view method, std::string_view target);
OpenAiError MethodNotAllowedError(std::string_view method, std::string_view target,
                                  std::string_view allowed);
OpenAiError BodyTooLargeError(int64_t limit);
OpenAiError ShuttingDownError();

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_OPENAI_ERROR_H_
