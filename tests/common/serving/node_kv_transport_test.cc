#include "common/serving/node_kv_transport.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(NodeKvTransportTest, AutoOnTheCpuBackendIsUcx) {
  NodeEngineOptions engine;
  NodeKvTransportOptions options;
  options.name = "test";
  auto transport = CreateNodeKvTransport(engine, options);
  ASSERT_TRUE(transport.ok()) << transport.status();
  EXPECT_EQ((*transport)->name(), "ucx");
  EXPECT_EQ(NcclAcceptor(transport->get()), nullptr);
}

TEST(NodeKvTransportTest, UnknownOrMismatchedTransportsAreClearErrors) {
  NodeEngineOptions engine;
  NodeKvTransportOptions options;
  options.kind = "rdma";
  auto bogus = CreateNodeKvTransport(engine, options);
  EXPECT_EQ(bogus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bogus.status().message().find("auto, ucx, cuda or nccl"), std::string::npos);
  for (const char* kind : {"cuda", "nccl"}) {
    options.kind = kind;
    auto mismatch = CreateNodeKvTransport(engine, options);
    EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument) << kind;
    EXPECT_NE(mismatch.status().message().find("--backend cpu"), std::string::npos) << kind;
  }
  engine.backend = BackendKind::kCuda;
  options.kind = "ucx";
  EXPECT_EQ(CreateNodeKvTransport(engine, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem
