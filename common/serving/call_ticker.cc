#include "common/serving/call_ticker.h"

#include <utility>
#include <vector>

namespace tandem {

CallTicker::CallTicker(absl::Duration interval) : interval_(interval) {
  thread_ = std::thread([this] { Run(); });
}

CallTicker::~CallTicker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void CallTicker::Watch(std::weak_ptr<Tickable> call) {
  std::shared_ptr<Tickable> alive = call.lock();
  if (alive == nullptr) return;
  absl::MutexLock lock(&mu_);
  calls_.insert_or_assign(alive.get(), std::move(call));
}

void CallTicker::Unwatch(const Tickable* call) {
  absl::MutexLock lock(&mu_);
  calls_.erase(call);
}

int CallTicker::watched() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(calls_.size());
}

void CallTicker::Run() {
  std::vector<std::shared_ptr<Tickable>> due;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Asleep while nothing is watched; else one tick per interval.
      auto has_work = [this]()
                          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !calls_.empty(); };
      mu_.Await(absl::Condition(&has_work));
      mu_.AwaitWithTimeout(absl::Condition(&stop_), interval_);
      if (stop_) return;
      for (auto it = calls_.begin(); it != calls_.end();) {
        if (std::shared_ptr<Tickable> call = it->second.lock()) {
          due.push_back(std::move(call));
          ++it;
        } else {
          calls_.erase(it++);
        }
      }
    }
    for (const std::shared_ptr<Tickable>& call : due) call->OnTick();
    due.clear();  // the last reference to a call may go here, with no lock held
  }
}

}  // namespace tandem
