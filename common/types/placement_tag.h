// Who placed a request on a node: the placing router's random id and its sequence number for that
// node (tandem.v1.PlacementTag on the wire). Nodes count tagged requests per router in their load
// reports (common/engine/placement_receipts.h); routers retire their in-flight placements by those
// counts (router/in_flight.h). Here, below both, so each can name it.
#ifndef TANDEM_COMMON_TYPES_PLACEMENT_TAG_H_
#define TANDEM_COMMON_TYPES_PLACEMENT_TAG_H_

#include <cstdint>

namespace tandem {

// router_id 0: untagged (not counted).
struct PlacementTag {
  uint64_t router_id = 0;
  uint64_t seq = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TYPES_PLACEMENT_TAG_H_
