// TaskLoop (cuda_kv_transport_loop.h): the transport's thread, its queue and its run state.
// Touches only those; the protocol runs in the hooks and tasks it is given.
#include "common/transport/cuda/cuda_kv_transport_loop.h"

#include <utility>

#include "absl/synchronization/notification.h"

namespace tandem::cuda_internal {

void TaskLoop::Start(Hooks hooks) {
  hooks_ = std::move(hooks);
  thread_ = std::thread([this] { Run(); });
}

bool TaskLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kRunning) return false;
    state_ = State::kJoining;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  state_ = State::kStopped;
  return true;
}

void TaskLoop::Post(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kRunning) {
      queue_.push_back(std::move(task));
      return;
    }
  }
  task(true);
}

absl::Status TaskLoop::RunSync(std::function<absl::Status()> fn) {
  absl::Notification done;
  absl::Status status;
  Post([&](bool cancelled) {
    status = cancelled ? absl::CancelledError("cuda transport stopped") : fn();
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

void TaskLoop::RunQueued(bool cancelled) {
  while (true) {
    std::deque<Task> tasks;
    {
      absl::MutexLock lock(&mu_);
      tasks.swap(queue_);
    }
    if (tasks.empty()) return;
    for (Task& t : tasks) t(cancelled);
  }
}

bool TaskLoop::issuing() const {
  absl::MutexLock lock(&mu_);
  return state_ != State::kStopped;
}

void TaskLoop::Run() {
  while (true) {
    // Read on this thread only, from state only this thread changes.
    const absl::Duration wait = hooks_.idle_wait();
    std::deque<Task> tasks;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return state_ != State::kRunning || !queue_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
      if (state_ != State::kRunning) return;
      tasks.swap(queue_);
    }
    for (Task& t : tasks) t(false);
    hooks_.round();
  }
}

}  // namespace tandem::cuda_internal
