// Runs posted tasks one at a time, in posting order, on a WorkerPool's threads: no lock is held
// while a task runs, and a Post never runs a task inline. An object whose events arrive on many
// threads (gRPC reactions, a timer thread) posts each of them here and so handles them one at a
// time, without locks in its handlers; and since its handlers never run inside the poster's call,
// a poster may hold its own locks (gRPC runs reactions inline in calls such as TryCancel).
#ifndef TANDEM_COMMON_UTIL_SERIAL_EXECUTOR_H_
#define TANDEM_COMMON_UTIL_SERIAL_EXECUTOR_H_

#include <deque>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "common/util/worker_pool.h"

namespace tandem {

class SerialExecutor : public std::enable_shared_from_this<SerialExecutor> {
 public:
  // `pool` must outlive every task posted here.
  static std::shared_ptr<SerialExecutor> Create(WorkerPool* pool) {
    return std::shared_ptr<SerialExecutor>(new SerialExecutor(pool));
  }

  void Post(absl::AnyInvocable<void()> task) {
    {
      absl::MutexLock lock(&mu_);
      tasks_.push_back(std::move(task));
      if (scheduled_) return;  // a drain is queued or running: it runs this one too
      scheduled_ = true;
    }
    pool_->Schedule([self = shared_from_this()] { self->Drain(); });
  }

 private:
  explicit SerialExecutor(WorkerPool* pool) : pool_(pool) {}

  // Runs a batch of tasks, then hands the rest back to the pool (other objects' tasks get turns).
  void Drain() {
    constexpr int kBatch = 64;
    for (int i = 0; i < kBatch; ++i) {
      absl::AnyInvocable<void()> next;
      {
        absl::MutexLock lock(&mu_);
        if (tasks_.empty()) {
          scheduled_ = false;
          return;
        }
        next = std::move(tasks_.front());
        tasks_.pop_front();
      }
      next();
    }
    pool_->Schedule([self = shared_from_this()] { self->Drain(); });
  }

  WorkerPool* const pool_;
  absl::Mutex mu_;
  bool scheduled_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_SERIAL_EXECUTOR_H_
