#include "common/util/thread_pool.h"

#include <algorithm>

namespace tandem {
namespace {

// The [begin, end) range thread `index` of `threads` handles.
std::pair<int64_t, int64_t> SplitRange(int64_t n, int64_t grain, int index, int threads) {
  int64_t chunks = (n + grain - 1) / grain;
  int64_t per = chunks / threads;
  int64_t extra = chunks % threads;
  int64_t first = index * per + std::min<int64_t>(index, extra);
  int64_t count = per + (index < extra ? 1 : 0);
  int64_t begin = std::min(n, first * grain);
  int64_t end = std::min(n, (first + count) * grain);
  return {begin, end};
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn,
                             int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    pending_ = num_threads_ - 1;
    ++generation_;
  }
  work_cv_.notify_all();
  auto [begin, end] = SplitRange(n, grain, 0, num_threads_);
  if (begin < end) fn(begin, end);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    const absl::FunctionRef<void(int64_t, int64_t)>* job;
    int64_t n, grain;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      grain = job_grain_;
    }
    auto [begin, end] = SplitRange(n, grain, index, num_threads_);
    if (begin < end) (*job)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace tandem
