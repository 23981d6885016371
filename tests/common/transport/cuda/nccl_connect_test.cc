// GrpcNcclConnectHook against a DecodeNode service on loopback: the id and incarnation arrive,
// the service's answer comes back, and an unreachable owner fails by the deadline.
#include "common/transport/cuda/nccl_connect.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {
namespace {

class ConnectKvOnly final : public v1::DecodeNode::Service {
 public:
  grpc::Status ConnectKv(grpc::ServerContext*, const v1::ConnectKvRequest* request,
                         v1::ConnectKvResponse*) override {
    absl::MutexLock lock(&mu_);
    id_ = request->nccl_unique_id();
    incarnation_ = request->prefill_incarnation();
    if (id_.size() != 128) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "id size");
    return grpc::Status::OK;
  }
  std::string id() {
    absl::MutexLock lock(&mu_);
    return id_;
  }
  uint64_t incarnation() {
    absl::MutexLock lock(&mu_);
    return incarnation_;
  }

 private:
  absl::Mutex mu_;
  std::string id_;
  uint64_t incarnation_ = 0;
};

TEST(GrpcNcclConnectHookTest, DeliversTheIdAndReturnsTheAnswer) {
  ConnectKvOnly service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  NcclConnectHook hook =
      GrpcNcclConnectHook(grpc::InsecureChannelCredentials(), grpc::ChannelArguments());
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 7);
  absl::Status s = hook(address, id, 0x1234, absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(service.id(), id);
  EXPECT_EQ(service.incarnation(), 0x1234u);
  s = hook(address, "short", 1, absl::Now() + absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("id size"), std::string::npos) << s;
  server->Shutdown();
}

TEST(GrpcNcclConnectHookTest, UnreachableOwnerFailsByTheDeadline) {
  // A port nothing listens on: bind one, then close it.
  int port = 0;
  {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    ConnectKvOnly service;
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    server->Shutdown();
  }
  const absl::Time start = absl::Now();
  absl::Status s =
      GrpcNcclConnectHook(grpc::InsecureChannelCredentials(), grpc::ChannelArguments())(
          absl::StrCat("127.0.0.1:", port), std::string(128, 'x'), 1, start + absl::Seconds(2));
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable ||
              s.code() == absl::StatusCode::kDeadlineExceeded)
      << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace tandem
