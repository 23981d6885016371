#include "router/client_errors.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Issue 14 row 7: clients saw node addresses and UCX peer names.
TEST(ClientErrorsTest, NodeMessagesAndAddressesStayOut) {
  const grpc::Status node(grpc::StatusCode::UNAVAILABLE,
                          "prefill node 10.0.0.7:50071: ucx write to ucx-peer-3f2a ran past its "
                          "deadline");
  const grpc::Status client =
      ClientNodeError(node, RetryReason::kPrefillFailed, 3, "req-00000000000000aa");
  EXPECT_EQ(client.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(client.error_message(),
            "prefill failed (UNAVAILABLE) after 3 attempts (request id req-00000000000000aa)");
  EXPECT_THAT(client.error_message(), Not(HasSubstr("10.0.0.7")));
  EXPECT_THAT(client.error_message(), Not(HasSubstr("ucx")));
}

TEST(ClientErrorsTest, ANodesVerdictOnTheRequestIsKept) {
  const grpc::Status node(grpc::StatusCode::INVALID_ARGUMENT, "the prompt is longer than 4096");
  const grpc::Status client = ClientNodeError(node, RetryReason::kReserveFailed, 1, "req-1");
  EXPECT_EQ(client.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(client.error_message(),
            "a node refused the request: the prompt is longer than 4096 (request id req-1)");
}

TEST(ClientErrorsTest, CallerSideCodesBecomeInternal) {
  for (grpc::StatusCode code :
       {grpc::StatusCode::ALREADY_EXISTS, grpc::StatusCode::PERMISSION_DENIED,
        grpc::StatusCode::UNAUTHENTICATED}) {
    const grpc::Status client =
        ClientNodeError(grpc::Status(code, "x"), RetryReason::kDecodeFailed, 1, "req-2");
    EXPECT_EQ(client.error_code(), grpc::StatusCode::INTERNAL);
    EXPECT_THAT(client.error_message(), HasSubstr("decoding failed"));
  }
}

}  // namespace
}  // namespace tandem
