// CallTicker: the one clock of a node service's calls that wait without a thread. A call waiting
// for the engine (a reservation's blocks, a prefill's KV write) has deadlines to check (the
// reservation's reserve_wait_timeout, the handoff's lease) but no thread to check them on: it
// registers here, and one thread per service calls every registered call's OnTick every interval
// (20 ms by default, real time). The call compares its deadlines with its injected Clock there,
// so a test that moves a ManualClock sees the give-up within one interval.
//
// Owns: its thread and the set of registered calls (weak references: a call that is gone is
// dropped). Touches nothing else. OnTick runs on the ticker's thread with no lock of the ticker
// held; a call typically posts to its own executor from it. A call may still get one tick after
// Unwatch returns (its tick was already under way). The thread sleeps while nothing is watched.
#ifndef TANDEM_COMMON_SERVING_CALL_TICKER_H_
#define TANDEM_COMMON_SERVING_CALL_TICKER_H_

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem {

class CallTicker {
 public:
  // What a registered call implements.
  class Tickable {
   public:
    virtual ~Tickable() = default;
    // On the ticker's thread; must not block.
    virtual void OnTick() = 0;
  };

  explicit CallTicker(absl::Duration interval = absl::Milliseconds(20));
  // Stops and joins the thread.
  ~CallTicker();
  CallTicker(const CallTicker&) = delete;
  CallTicker& operator=(const CallTicker&) = delete;

  // Ticks `call` until Unwatch (or until it is gone). Watching a call twice is watching it once.
  void Watch(std::weak_ptr<Tickable> call);
  void Unwatch(const Tickable* call);

  // How many calls are watched (for tests).
  int watched() const;

 private:
  void Run();

  const absl::Duration interval_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<const Tickable*, std::weak_ptr<Tickable>> calls_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_CALL_TICKER_H_
