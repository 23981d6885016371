// A fixed set of threads that run queued tasks, first in first out. The place where work posted
// from callbacks (gRPC reactions, timers) runs, so that no callback runs another object's handler
// inline while its caller holds a lock.
#ifndef TANDEM_COMMON_UTIL_WORKER_POOL_H_
#define TANDEM_COMMON_UTIL_WORKER_POOL_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace tandem {

class WorkerPool {
 public:
  explicit WorkerPool(int num_threads);
  // Runs the tasks already queued, then joins the threads.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Schedule(absl::AnyInvocable<void()> task);
  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Work();

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_WORKER_POOL_H_
