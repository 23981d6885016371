// DecodeService::ConnectKv: hands the NCCL unique id to the hook the node wired (the nccl KV
// transport's AcceptConnection), and answers UNIMPLEMENTED on nodes without one.
#include <gtest/gtest.h>

#include <string>

#include "common/transport/local_transport.h"
#include "decode_node/decode_service.h"

namespace tandem {
namespace {

TEST(DecodeServiceConnectKvTest, WithoutAHookIsUnimplemented) {
  LocalTransport transport;
  DecodeService service(/*engine=*/nullptr, &transport, DecodeServiceOptions{});
  v1::ConnectKvRequest request;
  request.set_nccl_unique_id(std::string(128, 'x'));
  v1::ConnectKvResponse response;
  grpc::Status s = service.ConnectKv(nullptr, &request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(s.error_message().find("local"), std::string::npos) << s.error_message();
}

TEST(DecodeServiceConnectKvTest, PassesTheIdToTheHookAndItsOutcomeBack) {
  LocalTransport transport;
  std::string got_id;
  uint64_t got_incarnation = 0;
  DecodeServiceOptions options;
  options.accept_kv_connection = [&](std::string_view id, uint64_t incarnation) {
    got_id = std::string(id);
    got_incarnation = incarnation;
    return id.size() == 128 ? absl::OkStatus() : absl::InvalidArgumentError("bad id size");
  };
  DecodeService service(/*engine=*/nullptr, &transport, options);
  v1::ConnectKvRequest request;
  request.set_nccl_unique_id(std::string("\x00\x01", 2) + std::string(126, 'z'));
  request.set_prefill_incarnation(0xabcdef);
  v1::ConnectKvResponse response;
  EXPECT_TRUE(service.ConnectKv(nullptr, &request, &response).ok());
  EXPECT_EQ(got_id, request.nccl_unique_id());
  EXPECT_EQ(got_incarnation, 0xabcdefu);
  request.set_nccl_unique_id("short");
  grpc::Status s = service.ConnectKv(nullptr, &request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("bad id size"), std::string::npos);
}

}  // namespace
}  // namespace tandem
