// A KV link between two simulated nodes (tools/sim/README.md, "KV transfer"): a bandwidth shared
// fairly by the transfers in flight (processor sharing: n transfers each move at bandwidth / n)
// and a latency added to each transfer's end. A transfer of b bytes alone takes b / bandwidth +
// latency; two started together, 2b / bandwidth + latency each.
#ifndef TANDEM_TOOLS_SIM_KV_LINK_H_
#define TANDEM_TOOLS_SIM_KV_LINK_H_

#include <cstdint>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "tools/sim/event_loop.h"

namespace tandem::sim {

class KvLink {
 public:
  // `bytes_per_second` > 0; `latency_nanos` >= 0. `loop` is borrowed.
  KvLink(EventLoop* loop, double bytes_per_second, int64_t latency_nanos);

  // Starts moving `bytes`; `done` runs once they have all arrived (latency included).
  void Start(int64_t bytes, absl::AnyInvocable<void()> done);

  int active() const { return static_cast<int>(active_.size()); }
  int64_t bytes_moved() const { return bytes_moved_; }

 private:
  struct Transfer {
    double remaining;  // bytes
    absl::AnyInvocable<void()> done;
  };
  // Moves every active transfer forward to now.
  void Advance();
  // Schedules the next completion (replacing the one scheduled before).
  void Reschedule();
  void OnCompletion(uint64_t generation);

  EventLoop* const loop_;
  const double bytes_per_nano_;
  const int64_t latency_;
  std::vector<Transfer> active_;
  int64_t last_advance_ = 0;
  uint64_t generation_ = 0;
  int64_t bytes_moved_ = 0;
};

}  // namespace tandem::sim

#endif  // TANDEM_TOOLS_SIM_KV_LINK_H_
