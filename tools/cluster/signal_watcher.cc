#include "tools/cluster/signal_watcher.h"

#include <pthread.h>

#include <cerrno>
#include <ctime>

namespace tandem {

SignalWatcher::SignalWatcher() {
  sigemptyset(&watched_);
  sigaddset(&watched_, SIGINT);
  sigaddset(&watched_, SIGTERM);
  sigaddset(&watched_, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &watched_, &previous_);
}

SignalWatcher::~SignalWatcher() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

bool SignalWatcher::Wait(absl::Duration timeout) {
  if (stop_signal_ != 0) return true;
  timespec ts = absl::ToTimespec(timeout);
  while (true) {
    int sig = sigtimedwait(&watched_, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      stop_signal_ = sig;
      return true;
    }
    if (sig == SIGCHLD) {
      // Drain: another signal may be pending behind it; poll once without waiting.
      ts = timespec{0, 0};
      continue;
    }
    // Timeout (EAGAIN) or an unrelated interruption (EINTR).
    return false;
  }
}

}  // namespace tandem
