// For node service tests: the router's liveness probe of one node as a blocking call, each RPC
// with its own deadline, over the node's channel: grpc.health.v1.Health/Check on the whole server
// (raw bytes, as router/node_probe.cc sends and parses them) and the node's GetLoad; and the
// checks of a node whose sync thread pool the test has spent.
#ifndef TANDEM_TESTS_COMMON_SERVING_LIVENESS_PROBE_H_
#define TANDEM_TESTS_COMMON_SERVING_LIVENESS_PROBE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "tandem/v1/node.pb.h"

namespace tandem::testing {

// grpc.health.v1.HealthCheckResponse.ServingStatus values.
inline constexpr int kHealthServing = 1;
inline constexpr int kHealthNotServing = 2;

struct LivenessAnswer {
  grpc::Status health_status;
  // The response's ServingStatus; -1 when the call failed or the bytes are not one.
  int serving_status = -1;
  grpc::Status load_status;
  v1::NodeLoad load;
};

inline grpc::ClientContext* WithDeadline(grpc::ClientContext* context, absl::Duration deadline) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  return context;
}

// HealthCheckResponse{status: s}: no bytes for UNKNOWN (0), else 0x08 then s (one varint byte).
inline int ServingStatusOf(const grpc::ByteBuffer& response) {
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  if (bytes.empty()) return 0;
  if (bytes.size() != 2 || bytes[0] != 0x08 || (bytes[1] & 0x80) != 0) return -1;
  return bytes[1];
}

// Health/Check, then GetLoad, each with `deadline`. NodeStub: v1::DecodeNode::Stub or
// v1::PrefillNode::Stub, on `channel`.
template <typename NodeStub>
LivenessAnswer ProbeLiveness(const std::shared_ptr<grpc::Channel>& channel, NodeStub& stub,
                             absl::Duration deadline) {
  LivenessAnswer answer;
  grpc::GenericStub generic(channel);
  grpc::ClientContext health_context;
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  absl::Notification done;
  generic.UnaryCall(WithDeadline(&health_context, deadline), "/grpc.health.v1.Health/Check",
                    grpc::StubOptions(), &request, &response, [&](grpc::Status status) {
                      answer.health_status = std::move(status);
                      done.Notify();
                    });
  done.WaitForNotification();
  if (answer.health_status.ok()) answer.serving_status = ServingStatusOf(response);
  grpc::ClientContext load_context;
  answer.load_status =
      stub.GetLoad(WithDeadline(&load_context, deadline), v1::LoadRequest(), &answer.load);
  return answer;
}

// A sync-API call that needs one of the node's sync threads: Cancel of an id the node never saw
// (OK, found = false, when a thread takes it).
template <typename NodeStub>
grpc::Status SyncCall(NodeStub& stub, absl::Duration deadline) {
  grpc::ClientContext context;
  v1::CancelRequest request;
  request.set_request_id("liveness-probe-unknown-id");
  v1::CancelResponse response;
  return stub.Cancel(WithDeadline(&context, deadline), request, &response);
}

// For a node whose every sync thread the test holds: expects a sync call to be refused
// (RESOURCE_EXHAUSTED), then 10 probes 20 ms apart each to answer within the router's default
// 500 ms deadline, SERVING with a load of `role`; then tells the health service NOT_SERVING (as
// DrainGrpcServer does) and expects a probe to say so. Returns the last SERVING probe's answer.
template <typename NodeStub>
LivenessAnswer ExpectLiveWithoutSyncThreads(grpc::Server& server,
                                            const std::shared_ptr<grpc::Channel>& channel,
                                            NodeStub& stub, std::string_view role) {
  constexpr absl::Duration kDeadline = absl::Milliseconds(500);  // router --health-interval-ms
  EXPECT_EQ(SyncCall(stub, kDeadline).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << "the sync pool still had a thread: the probes prove nothing";
  LivenessAnswer serving;
  for (int round = 0; round < 10; ++round) {
    serving = ProbeLiveness(channel, stub, kDeadline);
    EXPECT_TRUE(serving.health_status.ok())
        << round << ": " << serving.health_status.error_message();
    EXPECT_EQ(serving.serving_status, kHealthServing) << round;
    EXPECT_TRUE(serving.load_status.ok()) << round << ": " << serving.load_status.error_message();
    EXPECT_EQ(serving.load.role(), role) << round;
    absl::SleepFor(absl::Milliseconds(20));
  }
  server.GetHealthCheckService()->SetServingStatus(false);
  const LivenessAnswer draining = ProbeLiveness(channel, stub, kDeadline);
  EXPECT_TRUE(draining.health_status.ok()) << draining.health_status.error_message();
  EXPECT_EQ(draining.serving_status, kHealthNotServing);
  EXPECT_TRUE(draining.load_status.ok()) << draining.load_status.error_message();
  return serving;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_SERVING_LIVENESS_PROBE_H_
