// An injectable clock, so schedulers, leases and deadlines are testable without sleeping.
#ifndef TANDEM_COMMON_UTIL_CLOCK_H_
#define TANDEM_COMMON_UTIL_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace tandem {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in nanoseconds since an arbitrary epoch: intervals, leases inside a process.
  virtual int64_t NowNanos() const = 0;
  double NowSeconds() const { return static_cast<double>(NowNanos()) * 1e-9; }
  // Calendar time: deadlines, and times that cross processes (a handoff's issue time). The real
  // clock's is absl::Now(); a manual clock's moves with NowNanos (the Unix epoch plus it), so
  // code that reads either runs in virtual time.
  virtual absl::Time Now() const = 0;

  // The process-wide monotonic clock.
  static Clock* Real();
};

// A clock that only moves when told to. Thread-safe.
class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t start_nanos = 0) : now_(start_nanos) {}
  int64_t NowNanos() const override { return now_.load(std::memory_order_relaxed); }
  absl::Time Now() const override { return absl::FromUnixNanos(NowNanos()); }
  void AdvanceNanos(int64_t delta) { now_.fetch_add(delta, std::memory_order_relaxed); }
  void AdvanceSeconds(double s) { AdvanceNanos(static_cast<int64_t>(s * 1e9)); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_UTIL_CLOCK_H_
