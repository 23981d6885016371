#include "router/call_watchdog.h"

#include <algorithm>
#include <utility>

#include "common/util/serial_executor.h"

namespace tandem {
namespace {

// After the request deadline the node calls are cancelled; if the handler is still there this
// much later (stuck writing to a client that does not read), the client side is aborted too.
constexpr absl::Duration kSinkAbortGrace = absl::Seconds(1);

}  // namespace

// Every call into gRPC (TryCancel) or the sink (Abort) under mu_ holds an InlineBlock: either may
// run a reaction inline, and a request's handler run from there could take mu_ again.
void CallGuard::Attach(grpc::ClientContext* ctx) {
  SerialExecutor::InlineBlock no_inline;
  absl::MutexLock lock(&mu_);
  attached_.insert(ctx);
  if (client_cancelled_ || timed_out_ || attempt_timed_out_) ctx->TryCancel();
}

void CallGuard::Detach(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  attached_.erase(ctx);
}

void CallGuard::SetAttemptDeadline(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  attempt_deadline_ = deadline;
  attempt_timed_out_ = false;
}

bool CallGuard::client_cancelled() const {
  absl::MutexLock lock(&mu_);
  return client_cancelled_;
}

bool CallGuard::timed_out() const {
  absl::MutexLock lock(&mu_);
  return timed_out_;
}

bool CallGuard::attempt_timed_out() const {
  absl::MutexLock lock(&mu_);
  return attempt_timed_out_;
}

void CallGuard::CancelAttachedLocked() {
  for (grpc::ClientContext* ctx : attached_) ctx->TryCancel();
}

void CallGuard::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

void CallGuard::Cancel() {
  SerialExecutor::InlineBlock no_inline;
  {
    absl::MutexLock lock(&mu_);
    if (closed_ || client_cancelled_) return;
    client_cancelled_ = true;
    CancelAttachedLocked();
  }
  if (waker_ != nullptr) waker_();
}

void CallGuard::WakeAt(absl::Time when) {
  absl::MutexLock lock(&mu_);
  wake_at_ = std::min(wake_at_, when);
}

void CallGuard::Poll(absl::Time now) {
  SerialExecutor::InlineBlock no_inline;
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    if (!client_cancelled_ && sink_ != nullptr && sink_->ClientGone()) {
      client_cancelled_ = true;
      CancelAttachedLocked();
      wake = true;
    }
    if (!timed_out_ && now >= deadline_) {
      timed_out_ = true;
      CancelAttachedLocked();
      wake = true;
    }
    if (timed_out_ && !sink_aborted_ && now >= deadline_ + kSinkAbortGrace && sink_ != nullptr) {
      sink_aborted_ = true;
      sink_->Abort();
    }
    if (!attempt_timed_out_ && now >= attempt_deadline_) {
      attempt_timed_out_ = true;
      CancelAttachedLocked();
    }
    if (now >= wake_at_) {
      wake_at_ = absl::InfiniteFuture();
      wake = true;
    }
  }
  if (wake && waker_ != nullptr) waker_();
}

CallWatchdog::CallWatchdog(absl::Duration interval, Clock* clock)
    : interval_(interval), clock_(clock) {
  thread_ = std::thread([this] { Run(); });
}

CallWatchdog::~CallWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void CallWatchdog::Add(std::shared_ptr<CallGuard> guard) {
  absl::MutexLock lock(&mu_);
  guards_.insert(std::move(guard));
}

void CallWatchdog::Remove(const std::shared_ptr<CallGuard>& guard) {
  guard->Close();
  absl::MutexLock lock(&mu_);
  guards_.erase(guard);
}

void CallWatchdog::CancelAll() {
  std::vector<std::shared_ptr<CallGuard>> guards;
  {
    absl::MutexLock lock(&mu_);
    guards.assign(guards_.begin(), guards_.end());
  }
  for (const auto& guard : guards) guard->Cancel();
}

void CallWatchdog::Run() {
  std::vector<std::shared_ptr<CallGuard>> guards;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), interval_);
      if (stop_) return;
      guards.assign(guards_.begin(), guards_.end());
    }
    const absl::Time now = clock_->Now();
    for (const auto& guard : guards) guard->Poll(now);
    guards.clear();
  }
}

}  // namespace tandem
