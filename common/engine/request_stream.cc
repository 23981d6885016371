#include "common/engine/request_stream.h"

namespace tandem {

EventCallback RequestStream::Callback() {
  return [this](const GenerationEvent& event) { Push(event); };
}

void RequestStream::Push(const GenerationEvent& event) {
  absl::MutexLock lock(&mu_);
  if (finished_) return;  // nothing follows a final event
  events_.push_back(event);
  if (event.finished) finished_ = true;
}

bool RequestStream::HasUnread() const { return next_ < events_.size() || finished_; }

bool RequestStream::Next(GenerationEvent* event) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &RequestStream::HasUnread));
  if (next_ >= events_.size()) return false;
  *event = events_[next_++];
  return true;
}

std::optional<GenerationEvent> RequestStream::NextWithTimeout(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(this, &RequestStream::HasUnread), timeout);
  if (next_ >= events_.size()) return std::nullopt;
  return events_[next_++];
}

bool RequestStream::finished() const {
  absl::MutexLock lock(&mu_);
  return finished_;
}

GenerationResult RequestStream::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &RequestStream::Finished));
  return Fold();
}

std::optional<GenerationResult> RequestStream::WaitWithTimeout(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(this, &RequestStream::Finished), timeout)) {
    return std::nullopt;
  }
  return Fold();
}

GenerationResult RequestStream::Fold() const {
  GenerationResult result;
  for (const GenerationEvent& e : events_) {
    result.request_id = e.request_id;
    if (e.has_token()) {
      result.tokens.push_back(e.token);
      result.logprobs.push_back(e.logprob);
      result.top_logprobs.push_back(e.top_logprobs);
      result.rng_counters.push_back(e.rng_counter);
    }
    result.usage = e.usage;
    result.finish_reason = e.finish_reason;
    if (!e.status.ok()) result.status = e.status;
  }
  return result;
}

}  // namespace tandem
