#include "tools/sim/event_loop.h"

#include <algorithm>
#include <utility>

namespace tandem::sim {

void EventLoop::At(int64_t when, Callback callback, Order order) {
  heap_.push_back(Event{std::max(when, now()), order, next_seq_++, std::move(callback)});
  std::push_heap(heap_.begin(), heap_.end(), &Later);
}

int64_t EventLoop::Run(int64_t until) {
  int64_t ran = 0;
  while (!heap_.empty() && heap_.front().at <= until) {
    std::pop_heap(heap_.begin(), heap_.end(), &Later);
    Event event = std::move(heap_.back());
    heap_.pop_back();
    clock_->AdvanceNanos(event.at - now());
    event.callback();
    ++ran;
    ++events_run_;
  }
  return ran;
}

}  // namespace tandem::sim
