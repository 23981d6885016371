// One request's path through the router as a state machine that no thread waits on: its events
// (a slot in the admission queue, the decode stream's events and end, a client write done, the
// prefill's answer, the watchdog's wake-ups) arrive on gRPC's and the watchdog's threads and are
// handled one at a time on its SerialExecutor, so its handlers hold no lock. The decode stream's
// events and the client's write completions run inline on the gRPC thread that delivers them
// when the executor allows (SerialExecutor::RunOrPost: no hand-off on the token path); the rest
// are posted to the runner's few worker threads, so no handler runs inside a watchdog poll or a
// caller's lock. The decisions are
// the RequestRunner's (placement, JudgeAttempt, Apply); this object sequences them.
//
//   stage            what it waits for                      moved out by
//   kQueued          a slot (AdmissionQueue)                 the slot → kWaitingForKv (attempt);
//                                                            queue timeout, deadline, client → end
//   kWaitingForKv    a decode node with room for the KV      room → an attempt; timeout → end
//   kReserving       Reserve's first event (the handoff)     handoff → kStreaming (prefill sent);
//                                                            stream end → the attempt's verdict
//   kStreaming       D's events (and the client's writes)    stream end → kEndingPrefill (disagg.)
//                                                            or the verdict (local)
//   kEndingPrefill   the prefill's answer (a grace after a   answer or give-up → the verdict
//                    finished stream; else it is cancelled)
//   the verdict → a retry (kWaitingForKv), a migration (kWaitingForKv: tokens reached the client
//   and the decode side failed; the next attempt resumes on another decode node), or kDone.
//   kDone            nothing: `done` ran, the sink is not touched again.
//
// Live KV migration (request_flow_kv.cc) happens inside kStreaming: the decode node pauses the
// stream (an event with migration_paused: it drains, or this router asked it to rebalance) and the
// flow runs a move beside the attempt:
//   move step        what it waits for                      moved on by
//   reserving        the destination's handoff (Reserve      handoff → ExportKv sent to the
//                    with the tokens so far)                 source, exporting
//   exporting        the destination's first token           token → the stream switches to the
//                                                            destination (the source's stream
//                                                            is cancelled: it frees its KV)
//   any step         --kv-move-timeout-ms; the destination   the move is dropped: ResumePaused
//                    failing; ExportKv failing               on the source (or, when the source
//                                                            failed too, the attempt's verdict)
// The source's stream keeps being read throughout: a resumed source streams on, and a source that
// ends before its KV left it ends the attempt as any failure does (a migration by recomputing).
#ifndef TANDEM_ROUTER_REQUEST_FLOW_H_
#define TANDEM_ROUTER_REQUEST_FLOW_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "common/util/serial_executor.h"
#include "grpcpp/client_context.h"
#include "router/call_watchdog.h"
#include "router/client_stream.h"
#include "router/node_client.h"
#include "router/prefill_call.h"
#include "router/request_runner.h"

namespace tandem {

class RequestFlow : public std::enable_shared_from_this<RequestFlow> {
 public:
  using Done = absl::AnyInvocable<void(grpc::Status)>;

  // Starts `request` (RequestRunner::Start).
  static void Start(RequestRunner* runner, const v1::GenerateRequest& request,
                    const RunOptions& options, ResponseSink* sink, Done done);

  enum class Stage { kQueued, kWaitingForKv, kReserving, kStreaming, kEndingPrefill, kDone };

  // For the runner's KV rebalancing (any thread): the stream's KV (prompt + output so far), its
  // moves so far, whether it can move now (streaming, not moving, not finished).
  int64_t kv_tokens() const { return kv_tokens_.load(std::memory_order_relaxed); }
  int moves() const { return moves_.load(std::memory_order_relaxed); }
  bool movable() const { return movable_.load(std::memory_order_relaxed); }
  // Asks the stream's decode node to pause it for a live move (rebalance); any thread.
  void AskToMove();

 private:
  // One try on one pair of nodes (or one decode node).
  struct Attempt {
    int number = 0;
    RequestRunner::Chosen chosen;
    std::string node_request_id;
    std::unique_ptr<grpc::ClientContext> decode_ctx;
    std::shared_ptr<DecodeStream> stream;
    std::shared_ptr<PrefillCall> prefill;
    ReserveEnd reserve = ReserveEnd::kHandoff;
    bool first_token = false;
    bool reading = true;                            // the flow still reads D's stream
    bool writing = false;                           // a response is being written to the client
    bool stream_ended = false;                      // D's stream reported its end
    std::optional<ClientStream::EventResult> last;  // kFinished / kStopped once seen
    StreamOutcome outcome;
    absl::Time prefill_grace_until = absl::InfinitePast();
    absl::Time prefill_wait_until = absl::InfiniteFuture();
  };
  class Receiver;
  // A receiver handing attempt `attempt`'s stream events to this flow.
  std::shared_ptr<DecodeStreamReceiver> ReceiverFor(int attempt);

  RequestFlow(RequestRunner* runner, ResponseSink* sink, Done done, RequestApi api);

  // A live KV move of the attempt's stream (request_flow_kv.cc).
  struct KvMove {
    KvMoveTrigger trigger = KvMoveTrigger::kNodePaused;
    std::unique_ptr<Attempt> target;  // the destination's Reserve
    bool exporting = false;           // the handoff came; ExportKv was sent
    bool exported = false;            // ExportKv answered OK: the KV is on the destination
    absl::Time paused_at;
    absl::Time give_up;
  };
  struct ExportCall;

  // Event handlers (on the executor).
  void Begin(const v1::GenerateRequest& request, const RunOptions& options);
  void OnAdmitted();
  void OnWake();
  void OnStreamEvent(int attempt, const v1::DecodeEvent& event);
  void OnStreamDone(int attempt, const grpc::Status& status);
  // A response carrying `tokens` tokens was written (`ok`), or the client is gone.
  void OnWritten(int attempt, int tokens, bool ok);
  void OnPrefillAnswer(int attempt);

  // Steps.
  void Admitted();
  void NextAttempt();
  bool KvRoomOrWait();
  void StartDisaggregated();
  void StartLocal();
  void OnHandoff(const v1::DecodeEvent& event);
  void ConsumeEvent(const v1::DecodeEvent& event);
  void AfterEvent();
  void StopReading();
  void StreamEnded();
  void EndPrefill();
  void Conclude();
  void AfterAttempt(RequestRunner::AttemptResult result);
  void Migrate(const RequestRunner::AttemptResult& result);

  // Live KV migration (request_flow_kv.cc).
  // The attempt's stream paused on its node: a move to another decode node, or a resume.
  void OnPaused();
  // An event or the end of the move's destination stream.
  void OnMoveEvent(const v1::DecodeEvent& event);
  void OnMoveStreamDone(const grpc::Status& status);
  void OnExportAnswer(int attempt, const grpc::Status& status, int64_t bytes);
  // The destination streams: it becomes the attempt, the source's stream is cancelled.
  void SwitchToMoveTarget();
  // Drops the move (cancels the destination) and counts it.
  void DropMove(const std::string& why);
  // After DropMove: the attempt's verdict when the source's stream ended, else ResumePaused.
  void AfterMoveDropped();
  void SendPauseOrResume(bool resume);
  // True when the source's end must wait: the move carries its KV already.
  bool SourceEndedDuringMove();
  // kStreaming's wake-up: the move's time limit.
  void CheckMove();
  void End(grpc::Status status);
  // The refusal of a request that never ran (admission, bad input).
  void Refuse(grpc::Status status);

  // Posts `handler` to run on the executor with this flow alive.
  template <typename Handler>
  void Post(Handler handler) {
    executor_->Post(
        [self = shared_from_this(), handler = std::move(handler)]() mutable { handler(*self); });
  }

  // Runs `handler` now on this thread if the executor allows it (RunOrPost), else posts it. Only
  // for events delivered on a thread that holds none of our locks (a gRPC reaction).
  template <typename Handler>
  void RunOrPost(Handler handler) {
    executor_->RunOrPost(
        [self = shared_from_this(), handler = std::move(handler)]() mutable { handler(*self); });
  }

  // A callback for others to call (any number of times): posts `handler` while the flow lives.
  template <typename Handler>
  absl::AnyInvocable<void()> PosterIfAlive(Handler handler) {
    return [weak = weak_from_this(), handler = std::move(handler)] {
      if (std::shared_ptr<RequestFlow> flow = weak.lock()) flow->Post(handler);
    };
  }

  // Counts this flow in RequestRunner::live_flows_ from its construction until the last of its
  // members is destroyed (declared first, so destroyed last): the runner's destructor waits for
  // the count, not only for in_flight_, which drops before `done` runs and before the flow's
  // members (which may reach the runner) go.
  class LiveFlow {
   public:
    explicit LiveFlow(std::atomic<int64_t>* count) : count_(count) { count_->fetch_add(1); }
    ~LiveFlow() { count_->fetch_sub(1); }
    LiveFlow(const LiveFlow&) = delete;
    LiveFlow& operator=(const LiveFlow&) = delete;

   private:
    std::atomic<int64_t>* const count_;
  };
  const LiveFlow live_;

  RequestRunner* const runner_;
  ResponseSink* const sink_;
  Done done_;
  const RequestApi api_;
  const std::shared_ptr<SerialExecutor> executor_;
  std::shared_ptr<RequestFlow> self_;  // until kDone

  Stage stage_ = Stage::kQueued;
  RequestTimer timer_;
  std::optional<RouterRequest> request_;
  std::optional<ClientStream> stream_;
  std::shared_ptr<CallGuard> guard_;
  absl::Time deadline_;
  bool admitted_ = false;
  bool started_ = false;  // metrics RequestStarted
  uint64_t ticket_ = 0;
  absl::Time queue_give_up_ = absl::InfiniteFuture();
  bool waiting_for_kv_ = false;
  absl::Time kv_give_up_ = absl::InfiniteFuture();
  int attempt_number_ = -1;
  int migrations_ = 0;
  std::unique_ptr<Attempt> attempt_;
  // Attempts replaced while their calls were still open (a moved stream's source, a dropped
  // move's destination): their contexts live as long as the flow, which their receivers hold.
  std::vector<std::unique_ptr<Attempt>> retired_;
  std::unique_ptr<KvMove> move_;
  bool move_asked_ = false;  // this router asked the node to pause the stream (rebalance)
  const uint64_t key_;       // the runner's name for this flow (TrackStream)
  std::atomic<int64_t> kv_tokens_{0};
  std::atomic<int> moves_{0};
  std::atomic<bool> movable_{false};
  std::vector<std::string> failed_nodes_;
  std::string last_error_;  // the last failed attempt, in client-safe words
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_REQUEST_FLOW_H_
