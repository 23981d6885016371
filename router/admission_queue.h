// The router's admission: at most max_running requests run at once; the next ones wait here, in
// arrival order, bounded by count (max_queued_requests), by the prompt tokens they hold
// (max_queued_prompt_tokens) and by time (max_wait, and each request's own deadline). When the
// queue is full a request is refused at once: the caller answers gRPC RESOURCE_EXHAUSTED / HTTP 429
// with a Retry-After. Thread-safe; waiting blocks the caller's thread.
//
// A waiter's state: queued → admitted (Release or Admit handed it a slot) or gone (it timed out
// or its client left, and took itself out of the queue). Only the queue's owner of the lock moves
// it, so a waiter that times out at the moment it is admitted keeps the slot it was given.
#ifndef TANDEM_ROUTER_ADMISSION_QUEUE_H_
#define TANDEM_ROUTER_ADMISSION_QUEUE_H_

#include <cstdint>
#include <functional>
#include <list>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/util/clock.h"

namespace tandem {

struct AdmissionOptions {
  int64_t max_running = 4096;
  int64_t max_queued_requests = 4096;
  int64_t max_queued_prompt_tokens = int64_t{16} << 20;
  absl::Duration max_wait = absl::Seconds(30);
};

enum class Admission {
  kAdmitted,   // runs now; call Release when it ends
  kQueueFull,  // refused at once: the queue holds max_queued_requests or _prompt_tokens
  kTimedOut,   // waited max_wait (or until its deadline) without a slot
  kCancelled,  // its client left while it waited
};

class AdmissionQueue {
 public:
  // `clock` must outlive the queue.
  AdmissionQueue(AdmissionOptions options, Clock* clock);

  // Admits a request of `prompt_tokens`, waiting while every slot is taken. `client_gone` is
  // polled (every 10 ms) while it waits; `deadline` is the request's own.
  Admission Admit(int64_t prompt_tokens, absl::Time deadline,
                  const std::function<bool()>& client_gone);
  // A request Admit admitted ended: its slot goes to the longest waiter.
  void Release();

  int64_t running() const;
  int64_t queued() const;
  int64_t queued_prompt_tokens() const;
  const AdmissionOptions& options() const { return options_; }

 private:
  struct Waiter {
    int64_t prompt_tokens = 0;
    bool admitted = false;
  };
  void AdmitWaitersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const AdmissionOptions options_;
  Clock* const clock_;
  mutable absl::Mutex mu_;
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t queued_prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<Waiter*> queue_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_ADMISSION_QUEUE_H_
