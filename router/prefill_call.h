// One PrefillNode.Prefill call of a disaggregated attempt, running while the request's flow reads
// the decode node's stream. The call's answer arrives on a gRPC thread; this object is the one
// place the two meet. Owns the call's context, request and response; touches the
// decode stream only to cancel it, and only in kInFlight.
//
//   state          what it means                             moved out by
//   kInFlight      no answer yet; a failed answer cancels    ProtectStream → kStreamLive;
//                  D's stream, so the attempt ends at once   the answer → kAnswered
//   kStreamLive    no answer yet; D's stream is live or      Cancel → kCancelling;
//                  ending: the answer leaves it alone        the answer → kAnswered
//   kCancelling    the router cancelled the call: what it    the answer → kAnsweredAfterCancel
//                  answers is not the node's fault
//   kAnswered, kAnsweredAfterCancel: final.
#ifndef TANDEM_ROUTER_PREFILL_CALL_H_
#define TANDEM_ROUTER_PREFILL_CALL_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "router/attempt_verdict.h"
#include "router/node_client.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

class PrefillCall : public std::enable_shared_from_this<PrefillCall> {
 public:
  enum class State { kInFlight, kStreamLive, kCancelling, kAnswered, kAnsweredAfterCancel };

  struct Result {
    PrefillEnd end = PrefillEnd::kCancelledByRouter;
    grpc::Status status;   // the answer's status (kOk, kFailed)
    int64_t queue_us = 0;  // the node's queue time (kOk)
  };

  // A call that ends by `deadline`; not started yet, so its context() can be handed to a
  // watchdog first.
  static std::shared_ptr<PrefillCall> Create(v1::PrefillRequest request, absl::Time deadline);

  grpc::ClientContext* context() { return &ctx_; }

  // Sends the call. `cancel_decode_stream` cancels D's stream; it is called at most once, on a
  // gRPC thread, and never after ProtectStream or Cancel. `on_answer` runs once when the answer
  // arrives (on a gRPC thread, or in this call), after the state moved.
  void Start(NodeClient& client, absl::AnyInvocable<void()> cancel_decode_stream,
             absl::AnyInvocable<void()> on_answer);

  // D's first token arrived, or its stream ended: from now on a late failure must not cut it.
  void ProtectStream();
  // The router gives up on the call (the stream ended without it): cancels it; whatever it
  // answers is then not the node's fault. Nothing once answered.
  void Cancel();
  bool answered() const;
  // How the call ended: its answer, or — once cancelled — kCancelledByRouter unless it answered
  // OK (an answer that races the cancel).
  Result result() const;

  State state() const;

 private:
  PrefillCall(v1::PrefillRequest request, absl::Time deadline);
  void OnAnswer(grpc::Status status);
  // Moves the state for an answer; false if one was recorded already.
  bool Record(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Answered() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  grpc::ClientContext ctx_;
  v1::PrefillRequest request_;
  v1::PrefillResponse response_;
  absl::AnyInvocable<void()> cancel_decode_stream_;
  absl::AnyInvocable<void()> on_answer_;

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kInFlight;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_PREFILL_CALL_H_
