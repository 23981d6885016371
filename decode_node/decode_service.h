// tandem-decode's gRPC service (tandem.v1.DecodeNode): reserves KV blocks for prompts another node
// prefills, admits them when the KV transport delivers their completion, and streams tokens.
//
// Each streaming call runs on its own gRPC thread and only posts to the engine and reads the
// request's events; a client that goes away (or a call deadline) cancels the request in the
// engine, which frees (or quarantines, while a writer may still write) its blocks.
#ifndef TANDEM_DECODE_NODE_DECODE_SERVICE_H_
#define TANDEM_DECODE_NODE_DECODE_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "common/engine/request_stream.h"
#include "common/serving/node_requests.h"
#include "common/transport/handoff_auth.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"
#include "decode_node/decode_metrics.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

struct DecodeServiceOptions {
  std::string model_name;
  absl::Duration default_lease = absl::Seconds(30);
  absl::Duration max_lease = absl::Minutes(1);
  // A reservation waiting for free blocks longer than this is refused with RESOURCE_EXHAUSTED;
  // beyond max_waiting_reservations waiting at once, new ones are refused at once.
  absl::Duration reserve_wait_timeout = absl::Seconds(10);
  int64_t max_waiting_reservations = 1024;
  // Signs handoffs and verifies completions (common/transport/handoff_auth.h); null: neither
  // (--insecure-no-handoff-auth).
  std::shared_ptr<const HandoffAuthenticator> handoff_auth;
  // False (no cluster secret and not --insecure-no-handoff-auth): Reserve answers
  // FAILED_PRECONDITION; the node serves colocated requests only.
  bool accept_reservations = true;
  // Where reservations, their outcomes and queue times are counted; borrowed; may be null.
  DecodeMetrics* metrics = nullptr;
  // ConnectKv (the nccl KV transport): starts this node's side of a communicator with a prefill
  // node, e.g. NcclKvTransport::AcceptConnection. Unset: ConnectKv answers UNIMPLEMENTED.
  std::function<absl::Status(std::string_view nccl_unique_id, uint64_t prefill_incarnation)>
      accept_kv_connection;
  // Deadlines, waits and the handoff's issue time are read on it (borrowed). The node gives its
  // engine the same clock, so leases (engine nanos) and deadlines agree.
  Clock* clock = Clock::Real();
};

class DecodeService final : public v1::DecodeNode::Service {
 public:
  // `engine` and `transport` are borrowed. Installs the transport's notice handler.
  DecodeService(Engine* engine, KvTransport* transport, DecodeServiceOptions options);

  grpc::Status Reserve(grpc::ServerContext* context, const v1::ReserveRequest* request,
                       grpc::ServerWriter<v1::DecodeEvent>* writer) override;
  grpc::Status Generate(grpc::ServerContext* context, const v1::NodeGenerateRequest* request,
                        grpc::ServerWriter<v1::DecodeEvent>* writer) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status GetLoad(grpc::ServerContext* context, const v1::LoadRequest* request,
                       v1::NodeLoad* response) override;
  grpc::Status ConnectKv(grpc::ServerContext* context, const v1::ConnectKvRequest* request,
                         v1::ConnectKvResponse* response) override;

  // A KvCompletion from a prefill node (transport thread).
  void OnNotice(std::string_view payload);

 private:
  // What StreamEvents saw: whether a token arrived, and the request's final event.
  struct StreamSummary {
    bool got_token = false;
    bool finished = false;
    FinishReason finish_reason = FinishReason::kNone;
    absl::Status status;
  };

  // Reserve without the metrics' outcome count.
  grpc::Status RunReserve(grpc::ServerContext* context, const v1::ReserveRequest* request,
                          grpc::ServerWriter<v1::DecodeEvent>* writer, ReservationOutcome* outcome);
  // Streams `stream`'s events to `writer` until the final one; cancels the request when the client
  // goes away. Returns the call's status; fills `summary`.
  grpc::Status StreamEvents(grpc::ServerContext* context, RequestId id, bool with_logprobs,
                            DecodePath path, RequestStream* stream,
                            grpc::ServerWriter<v1::DecodeEvent>* writer, StreamSummary* summary);

  Engine* const engine_;
  KvTransport* const transport_;
  const DecodeServiceOptions options_;
  RouterRequestIds router_ids_;
  std::atomic<int64_t> waiting_reservations_{0};
};

}  // namespace tandem

#endif  // TANDEM_DECODE_NODE_DECODE_SERVICE_H_
