#include "router/prefill_call.h"

#include <utility>

namespace tandem {

std::shared_ptr<PrefillCall> PrefillCall::Create(v1::PrefillRequest request, absl::Time deadline) {
  return std::shared_ptr<PrefillCall>(new PrefillCall(std::move(request), deadline));
}

PrefillCall::PrefillCall(v1::PrefillRequest request, absl::Time deadline)
    : request_(std::move(request)) {
  ctx_.set_deadline(absl::ToChronoTime(deadline));
}

void PrefillCall::Start(NodeClient& client, absl::AnyInvocable<void()> cancel_decode_stream) {
  cancel_decode_stream_ = std::move(cancel_decode_stream);
  client.Prefill(&ctx_, &request_, &response_, [self = shared_from_this()](grpc::Status status) {
    self->OnAnswer(std::move(status));
  });
}

void PrefillCall::OnAnswer(grpc::Status status) {
  absl::MutexLock lock(&mu_);
  switch (state_) {
    case State::kInFlight:
      // A prefill that fails before D's first token: D will never send one.
      if (!status.ok()) cancel_decode_stream_();
      state_ = State::kAnswered;
      break;
    case State::kStreamLive:
      state_ = State::kAnswered;
      break;
    case State::kCancelling:
      state_ = State::kAnsweredAfterCancel;
      break;
    case State::kAnswered:
    case State::kAnsweredAfterCancel:
      return;  // gRPC answers once
  }
  status_ = std::move(status);
}

bool PrefillCall::Answered() const {
  return state_ == State::kAnswered || state_ == State::kAnsweredAfterCancel;
}

void PrefillCall::ProtectStream() {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kInFlight) state_ = State::kStreamLive;
}

PrefillCall::Result PrefillCall::Finish(bool stream_finished, absl::Duration grace,
                                        absl::Duration answer_wait) {
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kInFlight) state_ = State::kStreamLive;
    if (!Answered()) {
      if (!stream_finished ||
          !mu_.AwaitWithTimeout(absl::Condition(this, &PrefillCall::Answered), grace)) {
        state_ = State::kCancelling;
        cancel = true;
      }
    }
  }
  if (cancel) ctx_.TryCancel();
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &PrefillCall::Answered), answer_wait);
  Result result;
  if (Answered() && status_.ok()) {
    result.end = PrefillEnd::kOk;
    result.queue_us = response_.timings().queue_us();
  } else if (state_ == State::kAnswered) {
    result.end = PrefillEnd::kFailed;
  } else {
    result.end = PrefillEnd::kCancelledByRouter;  // Finish cancelled it: answered or not
  }
  result.status = status_;
  return result;
}

PrefillCall::State PrefillCall::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

}  // namespace tandem
