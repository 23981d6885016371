// The router's admission: at most max_running requests run at once; the next ones wait here, in
// arrival order, bounded by count (max_queued_requests) and by the prompt tokens they hold
// (max_queued_prompt_tokens). When the queue is full a request is refused at once: the caller
// answers gRPC RESOURCE_EXHAUSTED / HTTP 429 with a Retry-After. Waiting costs no thread: a
// queued request's callback runs when a slot is handed to it. How long a request may wait
// (max_wait, its deadline, its client) is the caller's to watch; it leaves with Leave.
// Thread-safe.
#ifndef TANDEM_ROUTER_ADMISSION_QUEUE_H_
#define TANDEM_ROUTER_ADMISSION_QUEUE_H_

#include <cstdint>
#include <list>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem {

struct AdmissionOptions {
  int64_t max_running = 4096;
  int64_t max_queued_requests = 4096;
  int64_t max_queued_prompt_tokens = int64_t{16} << 20;
  absl::Duration max_wait = absl::Seconds(30);
};

enum class Admission {
  kAdmitted,   // runs now; call Release when it ends
  kQueued,     // waits; its callback runs when it gets a slot, unless it Leaves first
  kQueueFull,  // refused at once: the queue holds max_queued_requests or _prompt_tokens
};

class AdmissionQueue {
 public:
  using Admitted = absl::AnyInvocable<void()>;

  explicit AdmissionQueue(AdmissionOptions options) : options_(options) {}

  // Admits a request of `prompt_tokens` or queues it: then `admitted` runs (once, on the thread
  // of the Release that frees the slot, with no lock held) and `*ticket` names the waiter.
  Admission Admit(int64_t prompt_tokens, Admitted admitted, uint64_t* ticket);
  // Takes a waiter out of the queue (it timed out, its client left). False when it was admitted
  // already: its callback runs or ran, and it owns a slot.
  bool Leave(uint64_t ticket);
  // A request that was admitted ended: its slot goes to the longest waiter.
  void Release();

  int64_t running() const;
  int64_t queued() const;
  int64_t queued_prompt_tokens() const;
  const AdmissionOptions& options() const { return options_; }

 private:
  struct Waiter {
    uint64_t ticket = 0;
    int64_t prompt_tokens = 0;
    Admitted admitted;
  };

  const AdmissionOptions options_;
  mutable absl::Mutex mu_;
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t queued_prompt_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  std::list<Waiter> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::list<Waiter>::iterator> by_ticket_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_ADMISSION_QUEUE_H_
