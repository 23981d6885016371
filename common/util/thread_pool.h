// A fixed pool of worker threads for data-parallel loops on the CPU backend's hot path.
// ParallelFor allocates nothing per call: the caller's function is borrowed by reference.
#ifndef TANDEM_COMMON_UTIL_THREAD_POOL_H_
#define TANDEM_COMMON_UTIL_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace tandem {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread, which also works: 1 means no extra threads.
  // 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over [0, n) split into contiguous ranges, one per thread, and waits.
  // Ranges are aligned to `grain` items where possible. Not reentrant.
  void ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn, int64_t grain = 1);

 private:
  void WorkerLoop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  uint64_t generation_ = 0;  // bumped for each ParallelFor
  int pending_ = 0;          // workers still running the current job
  bool stop_ = false;
  // Current job, valid while pending_ > 0.
  const absl::FunctionRef<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_THREAD_POOL_H_
