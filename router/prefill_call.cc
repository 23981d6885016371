#include "router/prefill_call.h"

#include <utility>

#include "common/util/serial_executor.h"

namespace tandem {

std::shared_ptr<PrefillCall> PrefillCall::Create(v1::PrefillRequest request, absl::Time deadline) {
  return std::shared_ptr<PrefillCall>(new PrefillCall(std::move(request), deadline));
}

PrefillCall::PrefillCall(v1::PrefillRequest request, absl::Time deadline)
    : request_(std::move(request)) {
  ctx_.set_deadline(absl::ToChronoTime(deadline));
}

void PrefillCall::Start(NodeClient& client, absl::AnyInvocable<void()> cancel_decode_stream,
                        absl::AnyInvocable<void()> on_answer) {
  cancel_decode_stream_ = std::move(cancel_decode_stream);
  on_answer_ = std::move(on_answer);
  client.Prefill(&ctx_, &request_, &response_, [self = shared_from_this()](grpc::Status status) {
    self->OnAnswer(std::move(status));
  });
}

void PrefillCall::OnAnswer(grpc::Status status) {
  absl::AnyInvocable<void()> on_answer;
  {
    absl::MutexLock lock(&mu_);
    if (!Record(std::move(status))) return;
    on_answer = std::move(on_answer_);  // what it holds (the request's flow) goes after it runs
  }
  on_answer();
}

bool PrefillCall::Record(grpc::Status status) {
  switch (state_) {
    case State::kInFlight:
      // A prefill that fails before D's first token: D will never send one. (Under mu_: the
      // cancel may run the stream's reaction inline, which must not run the flow here.)
      if (!status.ok()) {
        SerialExecutor::InlineBlock no_inline;
        cancel_decode_stream_();
      }
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
      return false;  // gRPC answers once
  }
  status_ = std::move(status);
  return true;
}

bool PrefillCall::Answered() const {
  return state_ == State::kAnswered || state_ == State::kAnsweredAfterCancel;
}

void PrefillCall::ProtectStream() {
  absl::MutexLock lock(&mu_);
  if (state_ == State::kInFlight) state_ = State::kStreamLive;
}

void PrefillCall::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    if (Answered() || state_ == State::kCancelling) return;
    state_ = State::kCancelling;
  }
  ctx_.TryCancel();
}

bool PrefillCall::answered() const {
  absl::MutexLock lock(&mu_);
  return Answered();
}

PrefillCall::Result PrefillCall::result() const {
  absl::MutexLock lock(&mu_);
  Result result;
  if (Answered() && status_.ok()) {
    result.end = PrefillEnd::kOk;
    result.queue_us = response_.timings().queue_us();
  } else if (state_ == State::kAnswered) {
    result.end = PrefillEnd::kFailed;
  } else {
    result.end = PrefillEnd::kCancelledByRouter;  // cancelled: answered or not
  }
  result.status = status_;
  return result;
}

PrefillCall::State PrefillCall::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

}  // namespace tandem
