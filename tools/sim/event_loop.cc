#include "tools/sim/event_loop.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace tandem::sim {

void EventLoop::At(int64_t when, Callback callback, Order order) {
  heap_.push_back(Event{std::max(when, now()), order, next_seq_++, std::move(callback)});
  std::push_heap(heap_.begin(), heap_.end(), &Later);
}

void EventLoop::AtEach(const std::vector<int64_t>& whens,
                       absl::AnyInvocable<void(size_t)> callback) {
  assert(each_.empty() && "AtEach is once per loop");
  each_.reserve(whens.size());
  for (size_t i = 0; i < whens.size(); ++i) {
    each_.push_back(EachEvent{std::max(whens[i], now()), next_seq_++, i});
  }
  // Sequence numbers rise with i, so a stable sort by time is the (at, seq) order.
  std::stable_sort(each_.begin(), each_.end(),
                   [](const EachEvent& a, const EachEvent& b) { return a.at < b.at; });
  each_callback_ = std::move(callback);
}

int64_t EventLoop::Run(int64_t until) {
  int64_t ran = 0;
  while (true) {
    const bool from_each =
        each_next_ < each_.size() && (heap_.empty() || Before(each_[each_next_], heap_.front()));
    if (from_each) {
      const EachEvent& event = each_[each_next_];
      if (event.at > until) break;
      ++each_next_;
      clock_->AdvanceNanos(event.at - now());
      each_callback_(event.index);
    } else {
      if (heap_.empty() || heap_.front().at > until) break;
      std::pop_heap(heap_.begin(), heap_.end(), &Later);
      Event event = std::move(heap_.back());
      heap_.pop_back();
      clock_->AdvanceNanos(event.at - now());
      event.callback();
    }
    ++ran;
    ++events_run_;
  }
  return ran;
}

}  // namespace tandem::sim
