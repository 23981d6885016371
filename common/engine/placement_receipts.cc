#include "common/engine/placement_receipts.h"

#include <algorithm>

namespace tandem {

PlacementReceipts::PlacementReceipts(int capacity) : capacity_(std::max(capacity, 1)) {}

void PlacementReceipts::Count(const PlacementTag& tag) {
  if (tag.router_id == 0) return;
  ++version_;
  auto it = counts_.find(tag.router_id);
  if (it == counts_.end()) {
    if (static_cast<int>(counts_.size()) >= capacity_) {
      // Forget the router seen least recently.
      auto oldest = counts_.begin();
      for (auto e = counts_.begin(); e != counts_.end(); ++e) {
        if (e->second.last_seen < oldest->second.last_seen) oldest = e;
      }
      counts_.erase(oldest);
    }
    it = counts_.emplace(tag.router_id, Entry{}).first;
  }
  ++it->second.received;
  it->second.last_seen = version_;
}

std::vector<PlacementReceipt> PlacementReceipts::Snapshot() const {
  std::vector<PlacementReceipt> out;
  out.reserve(counts_.size());
  for (const auto& [id, entry] : counts_) out.push_back({id, entry.received});
  std::sort(out.begin(), out.end(), [](const PlacementReceipt& a, const PlacementReceipt& b) {
    return a.router_id < b.router_id;
  });
  return out;
}

}  // namespace tandem
