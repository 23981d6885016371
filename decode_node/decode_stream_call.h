// One Reserve or Generate call of tandem-decode (decode_service.h) as a state machine that no
// thread waits on. Its events arrive on other threads and are handled one at a time on its
// SerialExecutor, on the service's few worker threads, so its handlers hold no lock, none of them
// blocks, and none runs inside the call that posted it:
//   - the engine's answer to a reservation and the request's events (the engine thread only
//     posts them);
//   - a write done and the client going away (gRPC's callback threads);
//   - the service's CallTicker (reserve_wait_timeout, the wait for a failed reservation's end).
// Events are written one at a time: at most one StartWrite is outstanding, OnWriteDone starts the
// next. After the client went away (or a write failed) the request is cancelled in the engine and
// nothing more is written; its final event still comes, and the call ends with it.
// A Generate may carry a migrated request's resumed output and rng counter (engine request.h: the
// engine validates them, naming the fields, and streams only what follows); so may a Reserve, for
// a request moving in with its KV (live KV migration). Every event with tokens, on both calls,
// carries the request's rng_counter after them: where a migration resumes. A request paused for
// live KV migration (Engine::PauseForMigration) sends an event with migration_paused and its
// rng_counter, and the call goes on streaming (kStreaming) until the request's final event.
//
//   stage                what it waits for                       moved out by
//   kStarting            nothing: Begin runs (refusals, the      refused → kDone; Reserve →
//                        router id, Reserve or Submit)           kReserving; Generate → kStreaming
//   kReserving           the engine's reservation answer; the    blocks → the handoff queued,
//                        ticker checks reserve_wait_timeout,     kStreaming; an error →
//                        the client going away cancels           kEndingReservation
//   kEndingReservation   the request's final event (at most      it, or kFailedReservationWait →
//                        kFailedReservationWait)                 kDone (ReservationFailed's end)
//   kStreaming           the request's events, written in turn   the final event → kFlushing
//   kFlushing            the writes queued before the final      the last OnWriteDone (at once
//                        event                                   when cancelled) → kDone
//   kDone                gRPC's OnDone: Finish was called; later events are ignored.
// Every way out to kDone goes through End: the router id released, the reservation's outcome
// counted (ReservationEnded), Finish with the status.
//
// Owns: its write queue and summary of the stream. Touches, through the service it belongs to
// (borrowed; it outlives every call): the engine, the router-id table, the counts of waiting
// reservations and open calls, the metrics, the ticker.
#ifndef TANDEM_DECODE_NODE_DECODE_STREAM_CALL_H_
#define TANDEM_DECODE_NODE_DECODE_STREAM_CALL_H_

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "common/serving/await_or_cancel.h"
#include "common/serving/call_ticker.h"
#include "common/util/serial_executor.h"
#include "decode_node/decode_metrics.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

class DecodeService;

// What the stream of a call saw: whether a token arrived, the request's final event, and the
// error that ended it (an engine error or stop), if one did.
struct DecodeStreamSummary {
  bool got_token = false;
  FinishReason finish_reason = FinishReason::kNone;
  absl::Status final_status;
  std::optional<absl::Status> error;
};

class DecodeStreamCall final : public grpc::ServerWriteReactor<v1::DecodeEvent>,
                               public CallTicker::Tickable,
                               public std::enable_shared_from_this<DecodeStreamCall> {
 public:
  enum class Stage { kStarting, kReserving, kEndingReservation, kStreaming, kFlushing, kDone };

  // How long a call whose reservation failed waits for the request's final event.
  static constexpr absl::Duration kFailedReservationWait = absl::Seconds(5);

  // Start a call; the reactor lives until gRPC's OnDone (and any event still in flight).
  // `request` is gRPC's: valid until OnDone.
  static grpc::ServerWriteReactor<v1::DecodeEvent>* StartReserve(DecodeService* service,
                                                                 const v1::ReserveRequest* request);
  static grpc::ServerWriteReactor<v1::DecodeEvent>* StartGenerate(
      DecodeService* service, const v1::NodeGenerateRequest* request);

  // gRPC's reactions and the ticker's tick: each posts to the executor.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;
  void OnTick() override;

 private:
  using Ending = CallEnd<ReservationOutcome>;

  DecodeStreamCall(DecodeService* service, DecodePath path);
  // Makes the call and posts `begin` of `request` as its first task.
  template <typename Request>
  static grpc::ServerWriteReactor<v1::DecodeEvent>* Start(
      DecodeService* service, DecodePath path, const Request* request,
      void (DecodeStreamCall::*begin)(const Request&));

  // Event handlers (on the executor).
  void BeginReserve(const v1::ReserveRequest& request);
  void BeginGenerate(const v1::NodeGenerateRequest& request);
  void OnReserved(absl::StatusOr<KvReservation> reservation);
  void OnEvent(const GenerationEvent& event);
  void OnWritten(bool ok);
  void OnClientGone();
  void OnTicked();

  // Steps.
  GenerateRequest MakeRequest(const google::protobuf::RepeatedField<int32_t>& prompt,
                              const v1::SamplingParams& sampling);
  // Copies a request's resumed output and rng counter (migration) into the engine's request.
  template <typename Request>
  static void SetResumed(const Request& request, GenerateRequest* engine_request);
  // Binds the engine's id to the router's; cancels or pauses the request if that was asked first.
  void BindRouterId();
  void ConsumeEvent(const GenerationEvent& event);
  void Enqueue(v1::DecodeEvent event);
  void WriteNext();
  // The client went away or a write failed: cancel the request (once), write nothing more.
  void StopStreaming();
  void EndStreamIfDone();
  void EndFailedReservation();
  // The only way to kDone.
  void End(Ending ending);

  // Posts `handler` to run on the executor (on the service's workers) with this call alive.
  template <typename Handler>
  void Post(Handler handler) {
    executor_->Post(
        [self = shared_from_this(), handler = std::move(handler)]() mutable { handler(*self); });
  }

  DecodeService* const service_;
  const DecodePath path_;
  const std::shared_ptr<SerialExecutor> executor_;
  std::shared_ptr<DecodeStreamCall> self_;  // until OnDone

  Stage stage_ = Stage::kStarting;
  std::string router_id_;
  bool claimed_ = false;  // router_id_ is claimed in the service's table
  bool waiting_ = false;  // counted among the reservations waiting for blocks
  int prompt_tokens_ = 0;
  bool with_logprobs_ = false;
  RequestId id_ = 0;
  // kReserving: the give-up (client gone: kCancelled; reserve_wait_timeout: kDeadline).
  std::optional<CancelOnce> reserve_cancel_;
  bool client_gone_ = false;
  absl::Status reservation_error_;      // kEndingReservation
  absl::Time final_wait_until_;         // kEndingReservation
  std::vector<GenerationEvent> early_;  // events before the reservation's answer (none expected)
  bool final_seen_ = false;
  bool stream_stopped_ = false;
  DecodeStreamSummary summary_;
  std::deque<v1::DecodeEvent> queue_;
  bool writing_ = false;
  v1::DecodeEvent in_flight_;  // the message of the outstanding write
};

}  // namespace tandem

#endif  // TANDEM_DECODE_NODE_DECODE_STREAM_CALL_H_
