#include "router/admission_queue.h"

#include <utility>
#include <vector>

namespace tandem {

Admission AdmissionQueue::Admit(int64_t prompt_tokens, Admitted admitted, uint64_t* ticket) {
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
  *ticket = next_ticket_++;
  auto it = queue_.insert(
      queue_.end(),
      Waiter{.ticket = *ticket, .prompt_tokens = prompt_tokens, .admitted = std::move(admitted)});
  by_ticket_[*ticket] = it;
  queued_prompt_tokens_ += prompt_tokens;
  return Admission::kQueued;
}

bool AdmissionQueue::Leave(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  auto found = by_ticket_.find(ticket);
  if (found == by_ticket_.end()) return false;
  queued_prompt_tokens_ -= found->second->prompt_tokens;
  queue_.erase(found->second);
  by_ticket_.erase(found);
  return true;
}

void AdmissionQueue::Release() {
  std::vector<Admitted> admitted;
  {
    absl::MutexLock lock(&mu_);
    --running_;
    while (running_ < options_.max_running && !queue_.empty()) {
      Waiter& next = queue_.front();
      queued_prompt_tokens_ -= next.prompt_tokens;
      by_ticket_.erase(next.ticket);
      admitted.push_back(std::move(next.admitted));
      queue_.pop_front();
      ++running_;
    }
  }
  for (Admitted& run : admitted) run();
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
