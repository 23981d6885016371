// Bounds every request the router serves, and is the clock of requests that wait (for a slot,
// for KV room, for a prefill's answer) without a thread. One thread polls every active request:
//   - the client cancelled or disconnected (ResponseSink::ClientGone): cancel the request's
//     node calls, so the nodes see their streams cancelled;
//   - the attempt passed its first-token deadline: cancel its node calls (the handler retries);
//   - the request passed its deadline: cancel its node calls, and a little later abort the
//     client side (ResponseSink::Abort), which unblocks a Write to a client that stopped reading.
#ifndef TANDEM_ROUTER_CALL_WATCHDOG_H_
#define TANDEM_ROUTER_CALL_WATCHDOG_H_

#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/util/clock.h"
#include "grpcpp/client_context.h"
#include "router/response_sink.h"

namespace tandem {

// One request's watch state. The handler attaches the ClientContexts of its node calls while
// they run; the watchdog cancels them.
class CallGuard {
 public:
  // `sink` (may be null in tests) is polled until Close().
  CallGuard(ResponseSink* sink, absl::Time deadline) : sink_(sink), deadline_(deadline) {}

  // An attached context is cancelled at once if the request is already cancelled or expired.
  void Attach(grpc::ClientContext* ctx);
  void Detach(grpc::ClientContext* ctx);
  // The current attempt must see its first token by `deadline` (InfiniteFuture: no limit).
  void SetAttemptDeadline(absl::Time deadline);

  bool client_cancelled() const;
  bool timed_out() const;
  bool attempt_timed_out() const;
  absl::Time deadline() const { return deadline_; }

  // Wakes the request's flow (request_flow.h), which waits without a thread: `wake` runs on the
  // watchdog's thread, with no lock held, at the first Poll at or after the time WakeAt set
  // (then not again until the next WakeAt), and whenever the client goes or the deadline passes.
  // Set before the guard is watched.
  void SetWaker(absl::AnyInvocable<void()> wake) { waker_ = std::move(wake); }
  void WakeAt(absl::Time when);

  // Ends the request as if its client went away (the router is shutting down).
  void Cancel();

  // Checks the conditions above at `now`; the watchdog calls this.
  void Poll(absl::Time now);
  // The handler is returning: the sink must not be touched any more.
  void Close();

 private:
  void CancelAttachedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ResponseSink* const sink_;
  const absl::Time deadline_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<grpc::ClientContext*> attached_ ABSL_GUARDED_BY(mu_);
  absl::Time attempt_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool client_cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool timed_out_ ABSL_GUARDED_BY(mu_) = false;
  bool sink_aborted_ ABSL_GUARDED_BY(mu_) = false;
  bool attempt_timed_out_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time wake_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::AnyInvocable<void()> waker_;  // set before the guard is watched
};

class CallWatchdog {
 public:
  // Polls every `interval` of real time; the guards see `clock`'s time (borrowed).
  CallWatchdog(absl::Duration interval, Clock* clock = Clock::Real());
  ~CallWatchdog();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  void Add(std::shared_ptr<CallGuard> guard);
  void Remove(const std::shared_ptr<CallGuard>& guard);
  // Cancels every watched request (CallGuard::Cancel).
  void CancelAll();

 private:
  void Run();

  const absl::Duration interval_;
  Clock* const clock_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<std::shared_ptr<CallGuard>> guards_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_CALL_WATCHDOG_H_
