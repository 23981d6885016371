#include "router/admission_queue.h"

#include <algorithm>

namespace tandem {
namespace {

// How often a waiter looks at its client and the clock.
constexpr absl::Duration kPoll = absl::Milliseconds(10);

}  // namespace

AdmissionQueue::AdmissionQueue(AdmissionOptions options, Clock* clock)
    : options_(options), clock_(clock) {}

Admission AdmissionQueue::Admit(int64_t prompt_tokens, absl::Time deadline,
                                const std::function<bool()>& client_gone) {
  absl::MutexLock lock(&mu_);
  if (running_ < options_.max_running && queue_.empty()) {
    ++running_;
    return Admission::kAdmitted;
  }
  // A prompt larger than the whole token budget may still wait alone.
  if (static_cast<int64_t>(queue_.size()) >= options_.max_queued_requests ||
      (!queue_.empty() &&
       queued_prompt_tokens_ + prompt_tokens > options_.max_queued_prompt_tokens)) {
    return Admission::kQueueFull;
  }
  Waiter waiter{.prompt_tokens = prompt_tokens};
  auto it = queue_.insert(queue_.end(), &waiter);
  queued_prompt_tokens_ += prompt_tokens;
  const absl::Time give_up = std::min(deadline, clock_->Now() + options_.max_wait);
  while (true) {
    mu_.AwaitWithTimeout(absl::Condition(&waiter.admitted), kPoll);
    if (waiter.admitted) return Admission::kAdmitted;
    const bool gone = client_gone();
    if (gone || clock_->Now() >= give_up) {
      queue_.erase(it);
      queued_prompt_tokens_ -= prompt_tokens;
      return gone ? Admission::kCancelled : Admission::kTimedOut;
    }
  }
}

void AdmissionQueue::Release() {
  absl::MutexLock lock(&mu_);
  --running_;
  AdmitWaitersLocked();
}

void AdmissionQueue::AdmitWaitersLocked() {
  while (running_ < options_.max_running && !queue_.empty()) {
    Waiter* next = queue_.front();
    queue_.pop_front();
    queued_prompt_tokens_ -= next->prompt_tokens;
    next->admitted = true;
    ++running_;
  }
}

int64_t AdmissionQueue::running() const {
  absl::MutexLock lock(&mu_);
  return running_;
}

int64_t AdmissionQueue::queued() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

int64_t AdmissionQueue::queued_prompt_tokens() const {
  absl::MutexLock lock(&mu_);
  return queued_prompt_tokens_;
}

}  // namespace tandem
