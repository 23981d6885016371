// The UCX transport's progress thread: the thread that makes every UCX call, the queue of
// commands other threads post to it, and how it paces itself.
//
// Other threads Post tasks (a mutex-protected queue) and wake the thread through an eventfd. The
// thread runs the queued tasks, polls the worker, lets its Work handle what the callbacks left and
// check deadlines; while anything is in flight it keeps polling for `busy_poll` without progress,
// then sleeps on the eventfd and the worker's own event fd (until the earliest deadline at most).
// Pacing is real time (UCX's I/O is); deadlines are read on the deadline clock.
//
// Owns the thread, the queue, the eventfd and the epoll fd. Touches the worker only to poll, arm
// and wait on it; everything else the thread does is its Work's.
#ifndef TANDEM_COMMON_TRANSPORT_UCX_PROGRESS_LOOP_H_
#define TANDEM_COMMON_TRANSPORT_UCX_PROGRESS_LOOP_H_

#include <ucp/api/ucp.h>

#include <deque>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/util/clock.h"

namespace tandem {

// Runs on the progress thread; `cancelled` when the transport stopped before running it.
using UcxTask = absl::AnyInvocable<void(bool cancelled)>;

class UcxProgressLoop {
 public:
  // What the thread does besides running tasks and polling. Every call is on the thread.
  class Work {
   public:
    virtual ~Work() = default;
    // First: creates the worker. An error ends the thread (after Teardown).
    virtual absl::StatusOr<ucp_worker_h> Init() = 0;
    // Handles what UCX's callbacks left. True if it did anything.
    virtual bool AfterProgress() = 0;
    // Fails what is past its deadline; `now` on the deadline clock.
    virtual void CheckDeadlines(absl::Time now) = 0;
    // Something is in flight: the loop polls `busy_poll` before it sleeps.
    virtual bool InFlight() const = 0;
    // The earliest deadline of an active operation: the sleep ends by it.
    virtual std::optional<absl::Time> EarliestDeadline() const = 0;
    // Endpoints are closing: the sleep is short.
    virtual bool EndpointsClosing() const = 0;
    // Last, also after a failed Init: releases everything (see RunQueued, RefuseTasks).
    virtual void Teardown() = 0;
  };

  // `deadline_clock` (borrowed) is the clock the operations' deadlines are on.
  UcxProgressLoop(absl::Duration busy_poll, Clock* deadline_clock)
      : busy_poll_(busy_poll), deadline_clock_(deadline_clock) {}
  // Stops the thread; closes the eventfd.
  ~UcxProgressLoop();

  UcxProgressLoop(const UcxProgressLoop&) = delete;
  UcxProgressLoop& operator=(const UcxProgressLoop&) = delete;

  // Starts the thread and waits for `work` (borrowed, outlives the thread) to Init. Errors: Init's,
  // or the event fds could not be made (the thread is gone then).
  absl::Status Start(Work* work);
  // Asks the thread to stop, then joins it (it runs Work::Teardown on its way out).
  void Stop();

  // Queues `task` for the thread; runs task(true) here when the loop is stopping.
  void Post(UcxTask task);
  // Runs `fn` on the thread and waits for it; Cancelled when the loop is stopping.
  absl::Status RunSync(absl::AnyInvocable<absl::Status()> fn);

  // For Work::Teardown. Runs the queued tasks, with `cancelled`; true if there were any.
  bool RunQueued(bool cancelled);
  // From now on Post runs tasks inline, cancelled; runs (cancelled) what is queued. Closes the
  // epoll fd. The eventfd stays open until the loop is gone: Post may still write to it.
  void RefuseTasks();

 private:
  absl::Status OpenFds(ucp_worker_h worker);
  void Run();
  bool stopping() const;
  // Sleeps on the fds unless a task is queued; `now` on the deadline clock.
  void Sleep(absl::Time now);
  int SleepTimeoutMs(absl::Time now) const;
  void Wake();

  const absl::Duration busy_poll_;
  Clock* const deadline_clock_;
  Work* work_ = nullptr;
  std::thread thread_;

  mutable absl::Mutex mu_;
  std::deque<UcxTask> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool sleeping_ ABSL_GUARDED_BY(mu_) = false;
  int cmd_fd_ = -1;  // set before Start returns, closed by the destructor

  // The thread's own.
  ucp_worker_h worker_ = nullptr;
  int ucx_fd_ = -1;
  int epoll_fd_ = -1;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_UCX_PROGRESS_LOOP_H_
