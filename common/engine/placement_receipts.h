// How many requests each router placed on this node, for the routers' in-flight accounting
// (router/in_flight.h). A router tags each request it sends with its random id and a sequence
// number (PlacementTag); the node counts them per router id, and its load report carries the
// counts: a router retires the placements a report says arrived, so its view of the node is
// the report plus only what is still on the wire. Counts cover this incarnation of the node.
//
// Bounded: the counts of the `capacity` routers seen most recently are kept; a router not seen
// for longer loses its count (it starts over from 0, which that router reads as a reset).
// Deterministic; not thread-safe (the engine thread counts, PublishStats copies).
#ifndef TANDEM_COMMON_ENGINE_PLACEMENT_RECEIPTS_H_
#define TANDEM_COMMON_ENGINE_PLACEMENT_RECEIPTS_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/engine/request.h"

namespace tandem {

struct PlacementReceipt {
  uint64_t router_id = 0;
  int64_t received = 0;  // requests this node took from that router in this incarnation
  bool operator==(const PlacementReceipt&) const = default;
};

class PlacementReceipts {
 public:
  static constexpr int kDefaultCapacity = 64;
  explicit PlacementReceipts(int capacity = kDefaultCapacity);

  // Counts a request carrying `tag`; untagged ones (router_id 0) are not counted.
  void Count(const PlacementTag& tag);
  // The counts, by router id.
  std::vector<PlacementReceipt> Snapshot() const;
  int capacity() const { return capacity_; }
  // Bumped on every Count that changed something (the snapshot is copied only then).
  uint64_t version() const { return version_; }

 private:
  struct Entry {
    int64_t received = 0;
    uint64_t last_seen = 0;  // version_ when last counted
  };
  const int capacity_;
  uint64_t version_ = 0;
  absl::flat_hash_map<uint64_t, Entry> counts_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_PLACEMENT_RECEIPTS_H_
