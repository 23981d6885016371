#include "router/in_flight.h"

#include <algorithm>

#include "absl/random/random.h"

namespace tandem {

InFlightLedger::InFlightLedger(uint64_t router_id, absl::Duration ttl)
    : router_id_(router_id), ttl_(ttl) {}

PlacementTag InFlightLedger::Add(const InFlightWork& work, absl::Time now) {
  Expire(now);
  const uint64_t seq = next_seq_++;
  entries_.push_back(Entry{seq, work, now});
  ++sums_.requests;
  sums_.tokens += work.tokens;
  sums_.blocks += work.blocks;
  sums_.context_tokens += work.context_tokens;
  return PlacementTag{.router_id = router_id_, .seq = seq};
}

void InFlightLedger::Sent(uint64_t seq, absl::Time now) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [seq](const Entry& e) { return e.seq == seq; });
  if (it == entries_.end()) return;  // retired already
  it->sent = now;
  entries_.splice(entries_.end(), entries_, it);
}

void InFlightLedger::Withdraw(uint64_t seq) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [seq](const Entry& e) { return e.seq == seq; });
  if (it != entries_.end()) Retire(it);
}

void InFlightLedger::OnReport(std::optional<int64_t> received, bool restarted, absl::Time now) {
  if (!received.has_value()) {
    RetireAll();  // the node counts no receipts: its report is taken to include everything
    acked_ = 0;
  } else if (restarted || *received < acked_) {
    // Counting started over there: nothing tells which of ours it has.
    RetireAll();
    acked_ = *received;
  } else {
    for (int64_t n = *received - acked_; n > 0 && !entries_.empty(); --n) {
      Retire(entries_.begin());
    }
    acked_ = *received;
  }
  Expire(now);
}

InFlightSums InFlightLedger::Sums(absl::Time now) {
  Expire(now);
  return sums_;
}

void InFlightLedger::Retire(std::list<Entry>::iterator it) {
  --sums_.requests;
  sums_.tokens -= it->work.tokens;
  sums_.blocks -= it->work.blocks;
  sums_.context_tokens -= it->work.context_tokens;
  entries_.erase(it);
}

void InFlightLedger::RetireAll() {
  entries_.clear();
  sums_ = {};
}

void InFlightLedger::Expire(absl::Time now) {
  while (!entries_.empty() && now - entries_.front().sent >= ttl_) Retire(entries_.begin());
}

uint64_t ProcessRouterId() {
  static const uint64_t id = [] {
    absl::BitGen gen;
    uint64_t v = 0;
    while (v == 0) v = absl::Uniform<uint64_t>(gen);
    return v;
  }();
  return id;
}

void SetPlacementTag(const PlacementTag& tag, v1::PlacementTag* out) {
  if (tag.router_id == 0) return;
  out->set_router_id(tag.router_id);
  out->set_seq(tag.seq);
}

}  // namespace tandem
