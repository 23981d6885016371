// tandem-sim's discrete-event loop: virtual time that jumps from one event to the next. Events
// run in time order; at the same time the ends of node steps run first (a node's state at time t
// then includes every step that ended by t, whether the steps were simulated one by one or
// stepped over in one jump: sim_node.h), then the rest in the order they were scheduled, so a run
// is a pure function of its inputs. The loop advances a ManualClock, which the project's own code
// (Scheduler, BlockManager) reads, so what it stamps is virtual time too. Single-threaded.
#ifndef TANDEM_TOOLS_SIM_EVENT_LOOP_H_
#define TANDEM_TOOLS_SIM_EVENT_LOOP_H_

#include <cstdint>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "common/util/clock.h"

namespace tandem::sim {

class EventLoop {
 public:
  using Callback = absl::AnyInvocable<void()>;
  // Which events run first among those due at the same time.
  enum class Order { kStepEnd = 0, kOther = 1 };

  // `clock` (borrowed) starts where it is and only this loop moves it.
  explicit EventLoop(ManualClock* clock) : clock_(clock) {}
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  int64_t now() const { return clock_->NowNanos(); }
  // Runs `callback` at `when` (nanoseconds on the clock; a time already past runs now, after the
  // events already due).
  void At(int64_t when, Callback callback, Order order = Order::kOther);
  void After(int64_t delay, Callback callback, Order order = Order::kOther) {
    At(now() + delay, std::move(callback), order);
  }

  // Runs `callback(i)` at `whens[i]` for every i, exactly as At(whens[i], ...) called for each i
  // in turn would (the same order among events due together), without putting them on the heap:
  // they wait in a sorted array. For the workload's arrivals, known up front: a trace's 900,000
  // on the heap made every later push and pop walk 20 levels of a 60 MB heap. Once per loop.
  void AtEach(const std::vector<int64_t>& whens, absl::AnyInvocable<void(size_t)> callback);

  // Runs events until none is left or the next one is after `until`; the clock ends at the last
  // event run (not at `until`). Returns the number of events run.
  int64_t Run(int64_t until = INT64_MAX);

  size_t pending() const { return heap_.size() + (each_.size() - each_next_); }
  int64_t events_run() const { return events_run_; }

 private:
  struct Event {
    int64_t at;
    Order order;
    uint64_t seq;
    Callback callback;
  };
  // Min-heap order: earliest first, then step ends, then first scheduled.
  static bool Later(const Event& a, const Event& b) {
    if (a.at != b.at) return a.at > b.at;
    if (a.order != b.order) return a.order > b.order;
    return a.seq > b.seq;
  }

  // An AtEach event: callback index `index`.
  struct EachEvent {
    int64_t at;
    uint64_t seq;
    size_t index;
  };
  // Whether `a` runs before `b` (Order::kOther, as At gives them).
  static bool Before(const EachEvent& a, const Event& b) {
    if (a.at != b.at) return a.at < b.at;
    if (b.order != Order::kOther) return false;
    return a.seq < b.seq;
  }

  ManualClock* const clock_;
  std::vector<Event> heap_;
  std::vector<EachEvent> each_;  // sorted by (at, seq); each_[each_next_] runs next of them
  size_t each_next_ = 0;
  absl::AnyInvocable<void(size_t)> each_callback_;
  uint64_t next_seq_ = 0;
  int64_t events_run_ = 0;
};

}  // namespace tandem::sim

#endif  // TANDEM_TOOLS_SIM_EVENT_LOOP_H_
