#include "router/http/running_requests.h"

#include <utility>
#include <vector>

namespace tandem {

bool RunningRequests::Begin(std::shared_ptr<HttpResponseSink> sink, uint64_t* id) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  *id = next_id_++;
  running_[*id] = std::move(sink);
  return true;
}

void RunningRequests::End(uint64_t id) {
  std::shared_ptr<HttpResponseSink> sink;  // released outside the lock
  absl::MutexLock lock(&mu_);
  auto it = running_.find(id);
  if (it == running_.end()) return;
  sink = std::move(it->second);
  running_.erase(it);
}

void RunningRequests::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool RunningRequests::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_.empty(); };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

void RunningRequests::CancelAll() {
  std::vector<std::shared_ptr<HttpResponseSink>> sinks;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, sink] : running_) sinks.push_back(sink);
  }
  for (auto& sink : sinks) sink->Cancel();
}

int64_t RunningRequests::running() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(running_.size());
}

}  // namespace tandem
