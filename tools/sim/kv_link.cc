#include "tools/sim/kv_link.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace tandem::sim {
namespace {

// Transfers within this many bytes of done are done (rounding of the shared rate).
constexpr double kDoneBytes = 1e-3;

}  // namespace

KvLink::KvLink(EventLoop* loop, double bytes_per_second, int64_t latency_nanos)
    : loop_(loop), bytes_per_nano_(bytes_per_second * 1e-9), latency_(latency_nanos) {}

void KvLink::Start(int64_t bytes, absl::AnyInvocable<void()> done) {
  Advance();
  bytes_moved_ += bytes;
  if (bytes <= 0) {
    loop_->After(latency_, std::move(done));
    return;
  }
  active_.push_back(Transfer{static_cast<double>(bytes), std::move(done)});
  Reschedule();
}

void KvLink::Advance() {
  const int64_t now = loop_->now();
  if (!active_.empty() && now > last_advance_) {
    const double each = bytes_per_nano_ * static_cast<double>(now - last_advance_) /
                        static_cast<double>(active_.size());
    for (Transfer& t : active_) t.remaining -= each;
  }
  last_advance_ = now;
}

void KvLink::Reschedule() {
  ++generation_;
  if (active_.empty()) return;
  double least = active_.front().remaining;
  for (const Transfer& t : active_) least = std::min(least, t.remaining);
  const double rate = bytes_per_nano_ / static_cast<double>(active_.size());
  const int64_t in = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(least / rate)));
  loop_->After(in, [this, g = generation_] { OnCompletion(g); });
}

void KvLink::OnCompletion(uint64_t generation) {
  if (generation != generation_) return;  // the set changed since: a newer event stands
  Advance();
  std::vector<absl::AnyInvocable<void()>> finished;
  for (size_t i = 0; i < active_.size();) {
    if (active_[i].remaining <= kDoneBytes) {
      finished.push_back(std::move(active_[i].done));
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  for (auto& done : finished) loop_->After(latency_, std::move(done));
  Reschedule();
}

}  // namespace tandem::sim
