// For node service tests: the router's liveness probe of one node as a blocking call, each RPC
// with its own deadline, over the node's channel: grpc.health.v1.Health/Check on the whole server
// (raw bytes, as router/node_probe.cc sends and parses them) and the node's GetLoad. Also a sync
// call (Cancel of an unknown id) that shows whether the node's sync thread pool has a thread.
#ifndef TANDEM_TESTS_COMMON_SERVING_LIVENESS_PROBE_H_
#define TANDEM_TESTS_COMMON_SERVING_LIVENESS_PROBE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/byte_buffer.h"
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

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_SERVING_LIVENESS_PROBE_H_
