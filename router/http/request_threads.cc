#include "router/http/request_threads.h"

#include <utility>

namespace tandem {

RequestThreads::~RequestThreads() {
  Close();
  JoinAll();
}

bool RequestThreads::Launch(std::shared_ptr<HttpResponseSink> sink, absl::AnyInvocable<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  JoinFinished();
  const uint64_t id = next_id_++;
  Entry& entry = running_[id];
  entry.sink = std::move(sink);
  // The thread's epilogue takes mu_, so it cannot run before the entry is complete.
  entry.thread = std::thread([this, id, fn = std::move(fn)]() mutable {
    fn();
    fn = nullptr;  // what it holds (the connection) goes before the request counts as ended
    absl::MutexLock lock(&mu_);
    auto it = running_.find(id);
    finished_.push_back(std::move(it->second.thread));
    running_.erase(it);
  });
  return true;
}

void RequestThreads::JoinFinished() {
  // A finished thread has at most its epilogue's unlock left to run.
  for (std::thread& t : finished_) t.join();
  finished_.clear();
}

void RequestThreads::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool RequestThreads::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_.empty(); };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

void RequestThreads::CancelAll() {
  std::vector<std::shared_ptr<HttpResponseSink>> sinks;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, entry] : running_) sinks.push_back(entry.sink);
  }
  for (auto& sink : sinks) sink->Cancel();
}

void RequestThreads::JoinAll() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_.empty(); };
    mu_.Await(absl::Condition(&idle));
    threads = std::move(finished_);
    finished_.clear();
  }
  for (std::thread& t : threads) t.join();
}

int64_t RequestThreads::running() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(running_.size());
}

}  // namespace tandem
