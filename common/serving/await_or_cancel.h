// Giving up on work handed to another thread (the engine, a KV writer), once: when the caller
// goes away or a deadline passes, ask that work to stop, and go on waiting for its answer.
//
// Owns: the "give up once" bookkeeping (CancelOnce) that the node services' calls use
// (decode_node/decode_stream_call.h, prefill_node/prefill_call.h: they check it from gRPC's
// OnCancel and their service's CallTicker, no thread waiting), CallEnd, the shape in which those
// calls report how they ended, and AwaitOrCancel, the same give-up for a thread that does wait (a
// poll loop; no service uses it since its calls moved to gRPC's callback API). Touches nothing but
// what the caller passes in:
//   - the condition it waits for: a function that waits up to an interval and says whether the
//     condition holds (or a mutex and an absl::Condition);
//   - the cancellation sources: an is-cancelled function (a gRPC ServerContext's IsCancelled, a
//     fake in tests) and/or a deadline read on an injected Clock;
//   - what to do once on giving up (e.g. Engine::Cancel(id)).
//
// Giving up does not end the wait: the work answers once it has stopped (the engine reports a
// cancelled request through the same channel), and AwaitOrCancel returns then, with the reason it
// gave up. The caller decides what the reason means for its own outcome.
//
// Time: the deadline is compared with clock->Now(); the interval between checks is a real-time
// timed wait (20 ms by default), so a test that moves a ManualClock sees the give-up within one
// interval. CancelOnce and AwaitOrCancel are used from one thread at a time (the waiting one, or
// the call's executor).
#ifndef TANDEM_COMMON_SERVING_AWAIT_OR_CANCEL_H_
#define TANDEM_COMMON_SERVING_AWAIT_OR_CANCEL_H_

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/util/clock.h"

namespace tandem {

// Why a wait asked its work to stop.
enum class CancelReason {
  kNone,       // it has not
  kCancelled,  // the caller went away (is_cancelled, or the owner's CancelNow)
  kDeadline,   // the deadline passed on the clock
};

// The cancellation side of a wait: where cancellation comes from, and the action run the first
// time one of them fires. Later firings are ignored; the first reason is kept.
class CancelOnce {
 public:
  struct Options {
    // The deadline is read on it (borrowed).
    Clock* clock = Clock::Real();
    // Passed once clock->Now() >= deadline. InfiniteFuture: no deadline.
    absl::Time deadline = absl::InfiniteFuture();
    // True once the caller went away. Empty: only the deadline cancels.
    absl::AnyInvocable<bool()> is_cancelled;
    // Run once, on the first give-up (e.g. [&] { engine->Cancel(id); }). Empty: nothing to do.
    absl::AnyInvocable<void()> on_cancel;
  };

  explicit CancelOnce(Options options);
  CancelOnce(const CancelOnce&) = delete;
  CancelOnce& operator=(const CancelOnce&) = delete;

  // Gives up when a source has fired (the caller's cancellation first, then the deadline), unless
  // it already has. Returns reason().
  CancelReason Check();
  // Gives up now for `reason` (kCancelled or kDeadline), unless it already has.
  void CancelNow(CancelReason reason);

  CancelReason reason() const { return reason_; }
  bool cancelled() const { return reason_ != CancelReason::kNone; }

 private:
  Options options_;
  CancelReason reason_ = CancelReason::kNone;
};

// How a serving call ended: the reason its metrics count (the service's enum) and the status its
// caller gets (converted to gRPC at the service's boundary).
template <typename Reason>
struct CallEnd {
  Reason reason{};
  absl::Status status;
};

inline constexpr absl::Duration kAwaitPollInterval = absl::Milliseconds(20);

// Waits until `wait_for(interval)` returns true: it waits up to `interval` for the condition and
// says whether it holds. Between waits it runs `cancel.Check()`, so the work is asked to stop once
// a source fires; the wait goes on until the condition holds. Returns cancel.reason().
CancelReason AwaitOrCancel(absl::FunctionRef<bool(absl::Duration)> wait_for, CancelOnce& cancel,
                           absl::Duration poll_interval = kAwaitPollInterval);

// The same for `ready` under `mu`: `mu` is held only while waiting, never while `cancel` runs.
CancelReason AwaitOrCancel(absl::Mutex& mu, const absl::Condition& ready, CancelOnce& cancel,
                           absl::Duration poll_interval = kAwaitPollInterval)
    ABSL_LOCKS_EXCLUDED(mu);

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_AWAIT_OR_CANCEL_H_
