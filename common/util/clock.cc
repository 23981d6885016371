#include "common/util/clock.h"

#include <chrono>

#include "absl/time/clock.h"

namespace tandem {
namespace {

class SteadyClock : public Clock {
 public:
  int64_t NowNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock* Clock::Real() {
  static SteadyClock* clock = new SteadyClock();
  return clock;
}

}  // namespace tandem
