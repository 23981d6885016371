// GenerateClient against an in-process fake of the Generate API: streaming order, status
// mapping, an unreachable router, and cancellation from another thread.
#include "tools/cli/generate_client.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/fake_generation_service.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

TEST(GenerateClientTest, StreamsEveryResponseInOrder) {
  FakeGenerationServer fake;
  FakeGenerationService::Script script;
  script.responses = {TextResponse("a", 1), TextResponse("b", 2), TextResponse("c", 3)};
  fake.service().SetScript(script);
  GenerateClient client(fake.address());
  ASSERT_TRUE(client.WaitForConnected(absl::Seconds(10)).ok());
  v1::GenerateRequest request;
  request.set_text("x");
  std::string text;
  std::vector<int> ids;
  absl::Status status = client.Generate(request, [&](const v1::GenerateResponse& r) {
    text += r.text();
    ids.push_back(r.tokens(0).id());
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(text, "abc");
  EXPECT_THAT(ids, ::testing::ElementsAre(1, 2, 3));
  ASSERT_EQ(fake.service().requests().size(), 1u);
  EXPECT_EQ(fake.service().requests()[0].text(), "x");
}

TEST(GenerateClientTest, ServerStatusKeepsCodeAndMessage) {
  FakeGenerationServer fake;
  FakeGenerationService::Script script;
  script.status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "text: prompt is empty");
  fake.service().SetScript(script);
  GenerateClient client(fake.address());
  absl::Status status = client.Generate(v1::GenerateRequest(), [](const auto&) {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "text: prompt is empty");
}

TEST(GenerateClientTest, UnreachableRouterIsUnavailableNamingTheAddress) {
  // Port 1 on loopback: nothing listens there (and only root could).
  GenerateClient client("127.0.0.1:1");
  absl::Status status = client.Generate(
      v1::GenerateRequest(), [](const auto&) {}, absl::Seconds(10));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("127.0.0.1:1"));
  EXPECT_EQ(client.WaitForConnected(absl::Milliseconds(200)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(GenerateClientTest, CancelFromAnotherThreadEndsTheCall) {
  FakeGenerationServer fake;
  FakeGenerationService::Script script;
  script.responses = {TextResponse("first", 1)};
  script.wait_for_cancel = true;
  fake.service().SetScript(script);
  GenerateClient client(fake.address());
  absl::Notification got_first;
  std::thread canceller([&] {
    got_first.WaitForNotification();
    client.Cancel();
  });
  absl::Status status = client.Generate(v1::GenerateRequest(), [&](const auto&) {
    if (!got_first.HasBeenNotified()) got_first.Notify();
  });
  canceller.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  // Later calls are refused at once.
  EXPECT_EQ(client.Generate(v1::GenerateRequest(), [](const auto&) {}).code(),
            absl::StatusCode::kCancelled);
}

TEST(GenerateClientTest, DeadlineBoundsTheCall) {
  FakeGenerationServer fake;
  FakeGenerationService::Script script;
  script.wait_for_cancel = true;
  fake.service().SetScript(script);
  GenerateClient client(fake.address());
  absl::Status status = client.Generate(
      v1::GenerateRequest(), [](const auto&) {}, absl::Milliseconds(300));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace tandem
