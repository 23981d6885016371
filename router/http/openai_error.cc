#include "router/http/openai_error.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

// absl::Status payload keys.
constexpr char kParamPayload[] = "tandem.http/openai-param";
constexpr char kCodePayload[] = "tandem.http/openai-code";

absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string PayloadOf(const absl::Status& status, const char* key) {
  auto payload = status.GetPayload(key);  // absl::optional in this Abseil
  return payload.has_value() ? std::string(*payload) : std::string();
}

nlohmann::ordered_json NullIfEmpty(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
}

}  // namespace

nlohmann::ordered_json OpenAiError::ToJson() const {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", NullIfEmpty(param)},
            {"code", NullIfEmpty(code)}}}};
}

absl::Status InvalidParam(std::string_view param, std::string_view message) {
  absl::Status status = absl::InvalidArgumentError(AbslView(message));
  status.SetPayload(kParamPayload, absl::Cord(AbslView(param)));
  return status;
}

absl::Status UnsupportedParam(std::string_view param, std::string_view message) {
  absl::Status status = InvalidParam(param, message);
  status.SetPayload(kCodePayload, absl::Cord("unsupported_parameter"));
  return status;
}

std::string ParamOf(const absl::Status& status) { return PayloadOf(status, kParamPayload); }

OpenAiError ErrorFromParseStatus(const absl::Status& status) {
  OpenAiError e = BadRequestError(std::string(status.message()), ParamOf(status));
  e.code = PayloadOf(status, kCodePayload);
  return e;
}

int HttpStatusForGrpcCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::CANCELLED:
      return 499;  // nginx's "client closed request": nobody reads it
    case grpc::StatusCode::UNIMPLEMENTED:
      return 501;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::ABORTED:
      return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

OpenAiError ErrorFromGrpcStatus(const grpc::Status& status) {
  OpenAiError e;
  e.http_status = HttpStatusForGrpcCode(status.error_code());
  e.message = status.error_message();
  switch (e.http_status) {
    case 400:
      e.type = "invalid_request_error";
      break;
    case 404:
      e.type = "invalid_request_error";
      e.code = "model_not_found";
      e.param = "model";
      break;
    case 429:
      e.type = "rate_limit_error";
      e.code = "too_many_requests";
      break;
    case 503:
      e.type = "server_error";
      e.code = "service_unavailable";
      break;
    case 504:
      e.type = "server_error";
      e.code = "timeout";
      break;
    case 499:
      e.type = "invalid_request_error";
      e.code = "client_closed_request";
      break;
    default:
      e.type = e.http_status < 500 ? "invalid_request_error" : "server_error";
      break;
  }
  if (e.message.empty()) e.message = absl::StrCat("request failed (HTTP ", e.http_status, ")");
  return e;
}

OpenAiError BadRequestError(std::string message, std::string param) {
  return OpenAiError{.http_status = 400,
                     .message = std::move(message),
                     .type = "invalid_request_error",
                     .param = std::move(param)};
}

OpenAiError UnauthorizedError() {
  return OpenAiError{.http_status = 401,
                     .message = "Incorrect or missing API key; send \"Authorization: Bearer KEY\"",
                     .type = "invalid_request_error",
                     .code = "invalid_api_key"};
}

OpenAiError NotFoundError(std::string_view method, std::string_view target) {
  return OpenAiError{
      .http_status = 404,
      .message = absl::StrCat("no such endpoint: ", AbslView(method), " ", AbslView(target)),
      .type = "invalid_request_error",
      .code = "unknown_url"};
}

OpenAiError MethodNotAllowedError(std::string_view method, std::string_view target,
                                  std::string_view allowed) {
  return OpenAiError{.http_status = 405,
                     .message = absl::StrCat(AbslView(target), " does not allow ", AbslView(method),
                                             "; use ", AbslView(allowed)),
                     .type = "invalid_request_error",
                     .code = "method_not_allowed"};
}

OpenAiError BodyTooLargeError(int64_t limit) {
  return OpenAiError{.http_status = 413,
                     .message = absl::StrCat("the request body is larger than ", limit, " bytes"),
                     .type = "invalid_request_error",
                     .code = "request_too_large"};
}

OpenAiError ShuttingDownError() {
  return OpenAiError{.http_status = 503,
                     .message = "the router is shutting down",
                     .type = "server_error",
                     .code = "service_unavailable"};
}

}  // namespace tandem
