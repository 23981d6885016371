// tandem-decode's gRPC service (tandem.v1.DecodeNode): reserves KV blocks for prompts another node
// prefills, admits them when the KV transport delivers their completion, and streams tokens.
//
// A stream costs memory, not a thread: Reserve and Generate are callback-API methods, each call a
// DecodeStreamCall (decode_stream_call.h), a state machine driven by the engine's callbacks,
// gRPC's reactions and the service's one CallTicker, its handlers run on the service's few worker
// threads. A client that goes away (or a call deadline)
// cancels the request in the engine, which frees (or quarantines, while a writer may still write)
// its blocks. GetLoad, the router's liveness probe, is a callback-API method too: it reads the
// engine's published stats and answers at once. Cancel and ConnectKv stay on the sync pool, as
// does WatchKvEvents (one long-lived stream per router: the prefix cache's content, shared with the
// prefill node in common/serving/kv_events_publisher.h; the cost policy sends a conversation's next
// turn to the decode node holding the turns before it).
//
// Live KV migration (the router moves a running request to another decode node with its KV):
// PauseForMigration and ResumePaused (sync pool; they only post to the engine) pause a request
// and take the pause back; its stream sends migration_paused and stays open. A Reserve with
// resumed output is the destination's side. ExportKv (callback API, a KvExportCall) writes a
// paused request's KV into that reservation as a prefill node writes a prompt's: the handoff
// checked by a HandoffGate, a KvBlockWriter signed with this node's handoff_auth, the blocks
// given by Engine::ExportPaused. A drain (BeginDrain, decode_drain.h) refuses new requests,
// pauses every running one for the router to move, and ends the KV event streams.
//
// A Reserve call: refuse what this node does not take (ReserveLease, the router id, StartWaiting)
// -> the engine's Reserve (bind the router's id) -> wait for blocks (the client going away or
// reserve_wait_timeout cancels once) -> ReservationFailed, or the signed handoff (HandoffEvent)
// then the stream. Each ends as a ReserveEnd: the metrics' ReservationOutcome and the status.
//
// Owns: the router-id table of this node's calls, the count of reservations waiting for blocks,
// the ticker of its calls' deadlines, the handoff gate ExportKv checks handoffs with, the publisher
// of its KV events. Touches: the engine (Reserve, Submit, Cancel, imports, load; pause, resume and
// export for migration; its prefix cache's content), the KV transport's notices (it installs the
// handler) and identity, the handoff authenticator and the metrics it is given; its
// KvImportVerifier seals each handoff (epoch, checksum key) and judges each completion before the
// engine admits it.
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
#include "common/handoff/kv_block_writer.h"
#include "common/serving/await_or_cancel.h"
#include "common/serving/call_ticker.h"
#include "common/serving/kv_events_publisher.h"
#include "common/serving/node_requests.h"
#include "common/transport/handoff_auth.h"
#include "common/transport/handoff_gate.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"
#include "common/util/worker_pool.h"
#include "decode_node/decode_metrics.h"
#include "decode_node/decode_stream_call.h"
#include "decode_node/kv_export_call.h"
#include "decode_node/kv_import_verifier.h"
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
  // Signs handoffs and verifies completions (common/transport/handoff_auth.h), and (live KV
  // migration) checks the MACs of ExportKv's handoffs and signs its completions; null: none of it
  // (--insecure-no-handoff-auth).
  std::shared_ptr<const HandoffAuthenticator> handoff_auth;
  // False (no cluster secret and not --insecure-no-handoff-auth): Reserve and ExportKv answer
  // FAILED_PRECONDITION; the node serves colocated requests only.
  bool accept_reservations = true;
  // Where reservations, their outcomes and queue times are counted; borrowed; may be null.
  DecodeMetrics* metrics = nullptr;
  // --kv-checksums: handoffs carry a checksum key and imports are admitted only when the landed
  // KV matches the writer's block checksums (kv_import_verifier.h). Epochs are checked always.
  bool kv_checksums = true;
  // ConnectKv (the nccl KV transport): starts this node's side of a communicator with a prefill
  // node, e.g. NcclKvTransport::AcceptConnection. Unset: ConnectKv answers UNIMPLEMENTED.
  std::function<absl::Status(std::string_view nccl_unique_id, uint64_t prefill_incarnation)>
      accept_kv_connection;
  // A node that also serves PrefillNode on this engine (tandem-decode --serve-prefill): Cancel
  // ends that service's Prefill call of the id too (PrefillService::CancelByRouterId; a router
  // that uses every node for both roles sends its Cancels to DecodeNode), and is `found` when
  // either had it. Unset: Cancel reaches this service's requests only.
  std::function<bool(const std::string& router_request_id)> cancel_prefill;
  // Deadlines, waits and the handoff's issue time are read on it (borrowed). The node gives its
  // engine the same clock, so leases (engine nanos) and deadlines agree.
  Clock* clock = Clock::Real();
  // How often (real time) the ticker checks the deadlines of waiting calls.
  absl::Duration tick_interval = kAwaitPollInterval;
  // The threads every call's handlers run on, however many calls are open.
  int worker_threads = 4;
  // How often WatchKvEvents looks for prefix-cache changes.
  absl::Duration kv_events_interval = absl::Milliseconds(100);
};

class DecodeService final
    : public v1::DecodeNode::WithCallbackMethod_Reserve<
          v1::DecodeNode::WithCallbackMethod_Generate<v1::DecodeNode::WithCallbackMethod_GetLoad<
              v1::DecodeNode::WithCallbackMethod_ExportKv<v1::DecodeNode::Service>>>> {
 public:
  // `engine` and `transport` are borrowed. Installs the transport's notice handler.
  DecodeService(Engine* engine, KvTransport* transport, DecodeServiceOptions options);

  grpc::ServerWriteReactor<v1::DecodeEvent>* Reserve(grpc::CallbackServerContext* context,
                                                     const v1::ReserveRequest* request) override;
  grpc::ServerWriteReactor<v1::DecodeEvent>* Generate(
      grpc::CallbackServerContext* context, const v1::NodeGenerateRequest* request) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context,
                                    const v1::LoadRequest* request,
                                    v1::NodeLoad* response) override;
  grpc::Status ConnectKv(grpc::ServerContext* context, const v1::ConnectKvRequest* request,
                         v1::ConnectKvResponse* response) override;
  grpc::Status PauseForMigration(grpc::ServerContext* context, const v1::MigrationRequest* request,
                                 v1::MigrationResponse* response) override;
  grpc::Status ResumePaused(grpc::ServerContext* context, const v1::MigrationRequest* request,
                            v1::MigrationResponse* response) override;
  grpc::ServerUnaryReactor* ExportKv(grpc::CallbackServerContext* context,
                                     const v1::ExportKvRequest* request,
                                     v1::ExportKvResponse* response) override;
  // The prefix cache's content (common/serving/kv_events_publisher.h); UNAVAILABLE once draining.
  grpc::Status WatchKvEvents(grpc::ServerContext* context, const v1::WatchKvEventsRequest* request,
                             grpc::ServerWriter<v1::KvEvents>* writer) override;

  // Thread-safe. Asks the engine to pause every request with a router id (each stream sends
  // migration_paused once its KV is computed), and every one that gets an engine id from now on.
  // Returns how many it asked for now.
  int PauseAllForMigration();
  // Thread-safe. A drain begins (decode_drain.h): from now on Reserve and Generate answer
  // UNAVAILABLE and GetLoad reports draining, WatchKvEvents streams end (so that they do not hold
  // the server's shutdown); with `live_migration`, PauseAllForMigration. Returns how many
  // requests it asked to pause.
  int BeginDrain(bool live_migration);
  // Thread-safe. Reserve, Generate and ExportKv calls not done yet (gRPC's OnDone, after their
  // status was sent).
  int64_t open_calls() const { return open_calls_.load(); }

  // A KvCompletion from a prefill node (transport thread): checked for its MAC and incarnation,
  // then judged by the import verifier (its thread), whose verdict Act carries out.
  void OnNotice(std::string_view payload);

 private:
  friend class DecodeStreamCall;
  friend class KvExportCall;
  // How a Reserve call ended: the outcome the metrics count and the status its caller gets.
  using ReserveEnd = CallEnd<ReservationOutcome>;

  // The decisions a DecodeStreamCall asks for; none blocks.
  //
  // UNAVAILABLE once the node drains: it takes no new requests.
  absl::Status TakesNewRequests() const;
  // The lease of a reservation this node takes, or why it refuses it (kRefused).
  absl::StatusOr<absl::Duration> ReserveLease(const v1::ReserveRequest& request) const;
  // Counts a reservation among those waiting for blocks, or refuses it (RESOURCE_EXHAUSTED) when
  // max_waiting_reservations wait already. StopWaiting undoes a successful one.
  absl::Status StartWaiting();
  void StopWaiting();
  // The end of a call whose reservation failed: RESOURCE_EXHAUSTED when it gave up waiting
  // (kDeadline), CANCELLED when the client went away, the engine's status otherwise.
  ReserveEnd ReservationFailed(int prompt_tokens, CancelReason gave_up, bool client_gone,
                               const absl::Status& status) const;
  // The first event of a reservation: the signed handoff, its lease counted from now.
  v1::DecodeEvent HandoffEvent(const KvReservation& reservation) const;
  // The outcome of a reservation whose handoff was sent, from its stream.
  static ReservationOutcome OutcomeOf(const DecodeStreamSummary& summary);
  // Admits, aborts or refuses an import as the verifier judged it.
  void Act(ImportVerdict verdict);

  // The steps a KvExportCall runs; none blocks.
  //
  // Checks the handoff and the request, builds the writer (its result to `on_finished`) and hands
  // it to Engine::ExportPaused; OK once started, else why not (nothing written). A refusal after
  // the handoff was admitted is also told to the destination, so that it frees the reservation
  // instead of waiting out the lease.
  absl::Status StartExport(const v1::ExportKvRequest& request, absl::Time received_at,
                           std::function<void(absl::StatusOr<KvWriteResult>)> on_finished);
  // A failed export's status as ExportKv answers it (the codes node.proto lists).
  static absl::Status ExportError(const absl::Status& status);

  Engine* const engine_;
  KvTransport* const transport_;
  const DecodeServiceOptions options_;
  RouterRequestIds router_ids_;
  std::atomic<int64_t> waiting_reservations_{0};
  std::atomic<int64_t> open_calls_{0};
  std::atomic<bool> draining_{false};
  HandoffGate handoff_gate_;
  KvEventsPublisher kv_events_;
  // Seals handoffs and judges completions; its thread calls the engine (outlived by it).
  std::unique_ptr<KvImportVerifier> verifier_;
  // Where the calls' handlers run; outlives the ticker, which posts to them.
  WorkerPool workers_;
  CallTicker ticker_;
};

}  // namespace tandem

#endif  // TANDEM_DECODE_NODE_DECODE_SERVICE_H_
