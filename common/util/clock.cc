#include "common/util/clock.h"

#include <chrono>

namespace tandem {
namespace {

class SteadyClock : public Clock {
 public:
  int64_t NowNanos() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

Clock* Clock::Real() {
  static SteadyClock* clock = new SteadyClock();
  return clock;
}

}  // namespace tandem
