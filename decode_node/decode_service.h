// tandem-decode's gRPC service (tandem.v1.DecodeNode): reserves KV blocks for prompts another node
// prefills, admits them when the KV transport delivers their completion, and streams tokens.
//
// Each streaming call runs on its own gRPC thread and only posts to the engine and reads the
// request's events; a client that goes away (or a call deadline) cancels the request in the
// engine, which frees (or quarantines, while a writer may still write) its blocks. GetLoad, the
// router's liveness probe, is a callback-API method: it takes no sync-pool thread, reads the
// engine's published stats and answers at once, however many streams hold the pool.
//
// A Reserve call: refuse what this node does not take -> StartReserve (submit, bind the router's
// id) -> AwaitReservation (AwaitOrCancel: blocks, the client going away or reserve_wait_timeout
// cancels once) -> ReservationFailed, or RespondReserve (the signed handoff, then the stream). Each
// ends as a ReserveEnd: the metrics' ReservationOutcome and the status.
//
// Owns: the router-id table of this node's calls, the count of reservations waiting for blocks.
// Touches: the engine (Reserve, Submit, Cancel, imports, load), the KV transport's notices (it
// installs the handler) and identity, the handoff authenticator and the metrics it is given.
#ifndef TANDEM_DECODE_NODE_DECODE_SERVICE_H_
#define TANDEM_DECODE_NODE_DECODE_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "common/engine/request_stream.h"
#include "common/serving/await_or_cancel.h"
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

class DecodeService final
    : public v1::DecodeNode::WithCallbackMethod_GetLoad<v1::DecodeNode::Service> {
 public:
  // `engine` and `transport` are borrowed. Installs the transport's notice handler.
  DecodeService(Engine* engine, KvTransport* transport, DecodeServiceOptions options);

  grpc::Status Reserve(grpc::ServerContext* context, const v1::ReserveRequest* request,
                       grpc::ServerWriter<v1::DecodeEvent>* writer) override;
  grpc::Status Generate(grpc::ServerContext* context, const v1::NodeGenerateRequest* request,
                        grpc::ServerWriter<v1::DecodeEvent>* writer) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context,
                                    const v1::LoadRequest* request,
                                    v1::NodeLoad* response) override;
  grpc::Status ConnectKv(grpc::ServerContext* context, const v1::ConnectKvRequest* request,
                         v1::ConnectKvResponse* response) override;

  // A KvCompletion from a prefill node (transport thread).
  void OnNotice(std::string_view payload);

 private:
  // How a Reserve call ended: the outcome the metrics count and the status its caller gets.
  using ReserveEnd = CallEnd<ReservationOutcome>;
  // Where the engine thread leaves Reserve's answer (decode_service.cc).
  struct ReservationSlot;
  // A submitted reservation: StartReserve's answer.
  struct StartedReservation {
    RequestId id = 0;
    bool with_logprobs = false;
    std::shared_ptr<RequestStream> stream;  // the request's events
    std::shared_ptr<ReservationSlot> slot;
  };
  // AwaitReservation's answer: the engine's, and whether this call gave up waiting.
  struct AwaitedReservation {
    absl::StatusOr<KvReservation> reservation;
    CancelReason cancelled = CancelReason::kNone;
  };
  // What StreamEvents saw: the call's status, whether a token arrived, the request's final event.
  struct StreamSummary {
    absl::Status status;
    bool got_token = false;
    FinishReason finish_reason = FinishReason::kNone;
    absl::Status final_status;
  };

  // One Reserve call without the metrics' count of started and ended ones: refuse what this node
  // does not take, StartReserve, AwaitReservation, then ReservationFailed or RespondReserve.
  ReserveEnd RunReserve(grpc::ServerContext* context, const v1::ReserveRequest& request,
                        grpc::ServerWriter<v1::DecodeEvent>* writer);
  // Submits the reservation to the engine and binds the router's id to it.
  absl::StatusOr<StartedReservation> StartReserve(const v1::ReserveRequest& request,
                                                  absl::Duration lease);
  // Waits for blocks (FIFO behind other reservations); cancels the request once when the client
  // goes away or reserve_wait_timeout passes, and waits on for the engine's answer.
  AwaitedReservation AwaitReservation(grpc::ServerContext* context,
                                      const StartedReservation& started);
  // The end of a call whose reservation failed: RESOURCE_EXHAUSTED when it gave up waiting,
  // CANCELLED when the client went away, the engine's status otherwise.
  ReserveEnd ReservationFailed(grpc::ServerContext* context, const v1::ReserveRequest& request,
                               const StartedReservation& started,
                               const AwaitedReservation& awaited);
  // Sends the signed handoff, then streams the request's events; the outcome from what it saw.
  ReserveEnd RespondReserve(grpc::ServerContext* context, const StartedReservation& started,
                            const KvReservation& reservation,
                            grpc::ServerWriter<v1::DecodeEvent>* writer);
  // The outcome of a reservation whose handoff was sent, from its stream.
  static ReservationOutcome OutcomeOf(const StreamSummary& summary);
  // Streams `stream`'s events to `writer` until the final one; cancels the request (once) when the
  // client goes away or a write fails.
  StreamSummary StreamEvents(grpc::ServerContext* context, RequestId id, bool with_logprobs,
                             DecodePath path, RequestStream* stream,
                             grpc::ServerWriter<v1::DecodeEvent>* writer);

  Engine* const engine_;
  KvTransport* const transport_;
  const DecodeServiceOptions options_;
  RouterRequestIds router_ids_;
  std::atomic<int64_t> waiting_reservations_{0};
};

}  // namespace tandem

#endif  // TANDEM_DECODE_NODE_DECODE_SERVICE_H_
