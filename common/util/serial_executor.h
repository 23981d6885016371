// Runs posted tasks one at a time, in posting order, on whichever thread posts while none runs:
// no thread of its own and no lock held while a task runs. An object whose events arrive on many
// threads (gRPC callbacks, a timer thread) posts each of them here and so handles them one at a
// time, without locks in its handlers; a task may post more (they run after it, on the same
// thread), and may call into libraries that run callbacks inline (gRPC's callback API does).
#ifndef TANDEM_COMMON_UTIL_SERIAL_EXECUTOR_H_
#define TANDEM_COMMON_UTIL_SERIAL_EXECUTOR_H_

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace tandem {

class SerialExecutor {
 public:
  void Post(absl::AnyInvocable<void()> task) {
    {
      absl::MutexLock lock(&mu_);
      tasks_.push_back(std::move(task));
      if (draining_) return;  // the thread draining runs it
      draining_ = true;
    }
    while (true) {
      absl::AnyInvocable<void()> next;
      {
        absl::MutexLock lock(&mu_);
        if (tasks_.empty()) {
          draining_ = false;
          return;
        }
        next = std::move(tasks_.front());
        tasks_.pop_front();
      }
      next();
    }
  }

 private:
  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_SERIAL_EXECUTOR_H_
