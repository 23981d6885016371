#include "common/serving/await_or_cancel.h"

#include <utility>

namespace tandem {

CancelOnce::CancelOnce(Options options) : options_(std::move(options)) {}

CancelReason CancelOnce::Check() {
  if (cancelled()) return reason_;
  if (options_.is_cancelled && options_.is_cancelled()) {
    CancelNow(CancelReason::kCancelled);
  } else if (options_.clock->Now() >= options_.deadline) {
    CancelNow(CancelReason::kDeadline);
  }
  return reason_;
}

void CancelOnce::CancelNow(CancelReason reason) {
  if (cancelled() || reason == CancelReason::kNone) return;
  reason_ = reason;
  if (options_.on_cancel) options_.on_cancel();
}

CancelReason AwaitOrCancel(absl::FunctionRef<bool(absl::Duration)> wait_for, CancelOnce& cancel,
                           absl::Duration poll_interval) {
  while (!wait_for(poll_interval)) cancel.Check();
  return cancel.reason();
}

CancelReason AwaitOrCancel(absl::Mutex& mu, const absl::Condition& ready, CancelOnce& cancel,
                           absl::Duration poll_interval) {
  return AwaitOrCancel(
      [&](absl::Duration interval) {
        absl::MutexLock lock(&mu);
        return mu.AwaitWithTimeout(ready, interval);
      },
      cancel, poll_interval);
}

}  // namespace tandem
