// The OpenAI error JSON and the HTTP status of every failure: gRPC codes from the request runner
// (400 / 404 / 429 / 503 / 504, never 500 for bad input) and the HTTP layer's own errors.
#include "router/http/openai_error.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ordered_json = nlohmann::ordered_json;
using ::testing::HasSubstr;

TEST(OpenAiErrorTest, JsonHasMessageTypeParamAndCode) {
  EXPECT_EQ(BadRequestError("temperature must be >= 0", "temperature").ToJson(),
            ordered_json::parse(R"({"error": {"message": "temperature must be >= 0",
                "type": "invalid_request_error", "param": "temperature", "code": null}})"));
  const ordered_json no_param = BadRequestError("bad").ToJson();
  EXPECT_TRUE(no_param["error"]["param"].is_null());
}

TEST(OpenAiErrorTest, GrpcCodesMapToHttpStatuses) {
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::OK), 200);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::INVALID_ARGUMENT), 400);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::OUT_OF_RANGE), 400);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::UNAUTHENTICATED), 401);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::PERMISSION_DENIED), 403);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::NOT_FOUND), 404);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::RESOURCE_EXHAUSTED), 429);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::CANCELLED), 499);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::UNIMPLEMENTED), 501);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::UNAVAILABLE), 503);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::ABORTED), 503);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::DEADLINE_EXCEEDED), 504);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::INTERNAL), 500);
  EXPECT_EQ(HttpStatusForGrpcCode(grpc::StatusCode::UNKNOWN), 500);
}

TEST(OpenAiErrorTest, RunnerErrors) {
  OpenAiError too_long = ErrorFromGrpcStatus(
      grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the prompt has 9000 tokens"));
  EXPECT_EQ(too_long.http_status, 400);
  EXPECT_EQ(too_long.type, "invalid_request_error");
  EXPECT_EQ(too_long.message, "the prompt has 9000 tokens");
  EXPECT_FALSE(too_long.retry_later());

  OpenAiError model = ErrorFromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "no model"));
  EXPECT_EQ(model.http_status, 404);
  EXPECT_EQ(model.code, "model_not_found");

  OpenAiError busy =
      ErrorFromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "too many"));
  EXPECT_EQ(busy.http_status, 429);
  EXPECT_TRUE(busy.retry_later());

  OpenAiError down = ErrorFromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "no node"));
  EXPECT_EQ(down.http_status, 503);
  EXPECT_EQ(down.type, "server_error");
  EXPECT_TRUE(down.retry_later());

  OpenAiError slow = ErrorFromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, ""));
  EXPECT_EQ(slow.http_status, 504);
  EXPECT_FALSE(slow.message.empty());
  EXPECT_FALSE(slow.retry_later());
}

TEST(OpenAiErrorTest, ParamRidesOnTheStatus) {
  absl::Status s = InvalidParam("top_p", "top_p must be in (0, 1]");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParamOf(s), "top_p");
  OpenAiError e = ErrorFromParseStatus(s);
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(e.param, "top_p");
  EXPECT_EQ(e.code, "");
  OpenAiError u = ErrorFromParseStatus(UnsupportedParam("n", "n > 1 is not supported"));
  EXPECT_EQ(u.param, "n");
  EXPECT_EQ(u.code, "unsupported_parameter");
  EXPECT_EQ(ParamOf(absl::InvalidArgumentError("x")), "");
}

TEST(OpenAiErrorTest, HttpLayerErrors) {
  EXPECT_EQ(UnauthorizedError().http_status, 401);
  EXPECT_EQ(UnauthorizedError().code, "invalid_api_key");
  EXPECT_EQ(NotFoundError("GET", "/v2/x").http_status, 404);
  EXPECT_THAT(NotFoundError("GET", "/v2/x").message, HasSubstr("/v2/x"));
  OpenAiError method = MethodNotAllowedError("GET", "/v1/completions", "POST");
  EXPECT_EQ(method.http_status, 405);
  EXPECT_THAT(method.message, HasSubstr("POST"));
  EXPECT_EQ(BodyTooLargeError(100).http_status, 413);
  EXPECT_THAT(BodyTooLargeError(100).message, HasSubstr("100 bytes"));
  EXPECT_EQ(ShuttingDownError().http_status, 503);
  EXPECT_TRUE(ShuttingDownError().retry_later());
}

}  // namespace
}  // namespace tandem
