// Runs posted tasks one at a time, in posting order: no lock is held while a task runs. An object
// whose events arrive on many threads (gRPC reactions, a timer thread) hands each of them here and
// so handles them one at a time, without locks in its handlers.
//
// Two ways in:
//   Post       never runs the task inline: it runs on a WorkerPool thread. For a poster that may
//              hold a lock of its own (gRPC runs reactions inline in calls such as TryCancel).
//   RunOrPost  runs the task at once on the calling thread when that is safe: the executor is
//              idle, the thread runs no other executor's task, and no InlineBlock lives on it.
//              Otherwise as Post. It saves the hand-off to a worker (a thread wake-up: tens to
//              hundreds of microseconds on a busy host) for events that arrive on a thread
//              holding none of our locks, such as a gRPC reaction or an I/O completion.
// A caller that holds a lock while calling into gRPC (which may run a reaction, and so a
// RunOrPost, inline) holds an InlineBlock for the duration.
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

  // Marks a region of the current thread in which RunOrPost posts instead of running inline.
  class InlineBlock {
   public:
    InlineBlock() { ++depth_; }
    ~InlineBlock() { --depth_; }
    InlineBlock(const InlineBlock&) = delete;
    InlineBlock& operator=(const InlineBlock&) = delete;
    static bool active() { return depth_ > 0; }

   private:
    static inline thread_local int depth_ = 0;
  };

  void Post(absl::AnyInvocable<void()> task) {
    {
      absl::MutexLock lock(&mu_);
      tasks_.push_back(std::move(task));
      if (scheduled_) return;  // a drain is queued or running: it runs this one too
      scheduled_ = true;
    }
    pool_->Schedule([self = shared_from_this()] { self->Drain(); });
  }

  void RunOrPost(absl::AnyInvocable<void()> task) {
    if (InlineBlock::active() || running_here_) {
      Post(std::move(task));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (scheduled_) {  // a drain is queued or running: it runs this one too
        tasks_.push_back(std::move(task));
        return;
      }
      scheduled_ = true;
    }
    const std::shared_ptr<SerialExecutor> self = shared_from_this();  // the task may drop its owner
    RunTask(task);
    Drain();  // what was posted meanwhile
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
      RunTask(next);
    }
    pool_->Schedule([self = shared_from_this()] { self->Drain(); });
  }

  static void RunTask(absl::AnyInvocable<void()>& task) {
    const bool outer = running_here_;
    running_here_ = true;
    task();
    running_here_ = outer;
  }

  // This thread is running some executor's task (a worker's drain, or a RunOrPost inline).
  static inline thread_local bool running_here_ = false;

  WorkerPool* const pool_;
  absl::Mutex mu_;
  bool scheduled_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_SERIAL_EXECUTOR_H_
