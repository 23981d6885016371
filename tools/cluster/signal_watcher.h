// Synchronous handling of SIGINT/SIGTERM for a launcher: the constructor blocks them (and
// SIGCHLD, to wake up when a child exits) in the calling thread; create it in main() before any
// other thread starts so every thread inherits the mask and the signals stay pending until
// Wait() takes them. Children started with ChildProcess get a clean mask.
#ifndef TANDEM_TOOLS_CLUSTER_SIGNAL_WATCHER_H_
#define TANDEM_TOOLS_CLUSTER_SIGNAL_WATCHER_H_

#include <signal.h>

#include "absl/time/time.h"

namespace tandem {

class SignalWatcher {
 public:
  SignalWatcher();
  ~SignalWatcher();  // restores the previous mask
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // Waits up to `timeout` for a signal. Returns true once SIGINT or SIGTERM has been received
  // (now or earlier); false on a timeout or a SIGCHLD.
  bool Wait(absl::Duration timeout);
  // Checks without waiting.
  bool StopRequested() { return Wait(absl::ZeroDuration()); }
  // The first SIGINT/SIGTERM received, 0 if none.
  int stop_signal() const { return stop_signal_; }

 private:
  sigset_t watched_;
  sigset_t previous_;
  int stop_signal_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLUSTER_SIGNAL_WATCHER_H_
