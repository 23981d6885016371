// CudaKvTransport's thread: the queue of tasks every entry point posts to, the thread that runs
// them in order, and the transport's run state. Owns the thread, the queue and the state; touches
// nothing else (each round calls the hooks it was started with, which own the protocol).
//
// Run state (one machine; every transition here):
//
//   state      | meaning                                               | moves out when
//   -----------+-------------------------------------------------------+-------------------------
//   kRunning   | Post queues; the thread runs tasks, then the round    | Stop() -> kJoining
//   kJoining   | Post runs tasks at once, cancelled; the thread ends   | the thread is joined
//              | its round (still issuing work) and exits              |   -> kStopped
//   kStopped   | the caller of Stop() fails what is pending; nothing   | never (terminal)
//              | new is issued (issuing() is false)                    |
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_LOOP_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_LOOP_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem::cuda_internal {

// Runs on the transport's thread; `cancelled` when the transport stopped before running it.
using Task = absl::AnyInvocable<void(bool cancelled)>;

class TaskLoop {
 public:
  // What the thread does besides running tasks; both run on the thread.
  struct Hooks {
    // How long to sleep when no task is queued.
    absl::AnyInvocable<absl::Duration()> idle_wait;
    // After each batch of tasks (or a wait that timed out): poll fences, check timers.
    absl::AnyInvocable<void()> round;
  };

  TaskLoop() = default;
  ~TaskLoop() { Stop(); }

  TaskLoop(const TaskLoop&) = delete;
  TaskLoop& operator=(const TaskLoop&) = delete;

  // Starts the thread (kRunning).
  void Start(Hooks hooks);
  // kRunning -> kJoining -> (thread joined) -> kStopped. False, doing nothing, when Stop() ran
  // before (the caller that got true finishes the shutdown).
  bool Stop();

  // Queues `task` for the thread; runs task(true) here when the loop is not kRunning.
  void Post(Task task);
  // Runs `fn` on the thread and waits for its outcome (Cancelled when stopped first).
  absl::Status RunSync(std::function<absl::Status()> fn);
  // Runs whatever is queued with `cancelled`, until the queue stays empty (shutdown).
  void RunQueued(bool cancelled);

  // False once kStopped: no message, grant or copy may be issued any more.
  bool issuing() const;

 private:
  enum class State { kRunning, kJoining, kStopped };

  void Run();

  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  State state_ ABSL_GUARDED_BY(mu_) = State::kRunning;
  Hooks hooks_;  // the thread's only
  std::thread thread_;
};

}  // namespace tandem::cuda_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_LOOP_H_
