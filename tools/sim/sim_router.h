// One router replica of tandem-sim, as RequestRunner::Place sees the nodes: the project's Placer
// over candidates built from the nodes' last load reports plus what this replica placed since.
//
// In-flight accounting follows the real router's receipts: every placement gets a sequence
// number and is remembered until a load report shows the node had received it. A node's report
// counts the requests of each router it took in before it published the load it reports; a
// report counting n of this replica's remembered placements retires the first n (by count, as
// the real router does, so arrivals out of order even out). A report taken before a placement
// arrived thus does not forget it, and replicas see each other's work in the reports. A
// placement never delivered (its attempt died first) is forgotten after `expiry`. With receipts
// off, every report forgets everything placed before it (the router before receipts).
#ifndef TANDEM_TOOLS_SIM_SIM_ROUTER_H_
#define TANDEM_TOOLS_SIM_SIM_ROUTER_H_

#include <climits>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "router/placement.h"
#include "tools/sim/sim_node.h"

namespace tandem::sim {

// What one placement adds to a node until the node's report includes it.
struct SimPlaced {
  uint64_t seq = 0;  // set by NotePlaced
  int64_t placed_at = 0;
  int64_t delivered_at = INT64_MAX;  // when the request reached the node (loop nanoseconds)
  int64_t queued_tokens = 0;
  int64_t blocks = 0;
  int64_t context_tokens = 0;
};

struct SimNodeView {
  SimNodeLoad load;
  bool down = false;              // killed, and no load report since it came back
  std::deque<SimPlaced> pending;  // by seq
  uint64_t next_seq = 1;
  int64_t last_placed_at = 0;  // this replica's last placement here (loop nanoseconds)
  // Sums over `pending`.
  int64_t pending_tokens = 0;
  int64_t pending_blocks = 0;
  int64_t pending_context = 0;
};

class SimRouter {
 public:
  SimRouter(PlacementOptions options, bool receipts, int64_t expiry_nanos, int num_prefill,
            int num_decode);

  // Node j of a pool reported `load` (published at load.published_at), read at `now`.
  void Report(bool prefill, int j, const SimNodeLoad& load, int64_t now);
  // Node j is down (killed, or not answering) until its next report.
  void MarkDown(bool prefill, int j);
  bool down(bool prefill, int j) const { return Views(prefill)[j].down; }
  // This replica sent node j a request; returns its sequence number there.
  uint64_t NotePlaced(bool prefill, int j, SimPlaced placed);
  // The request `seq` reached node j at `at`.
  void NoteDelivered(bool prefill, int j, uint64_t seq, int64_t at);

  // A candidate for node j, named `name`, from its view; cached_prefix_tokens left to the caller.
  NodeCandidate Candidate(bool prefill, int j, const std::string& name) const;
  // Auto mode: decode node j as a prefill candidate (RequestRunner::Place builds both of a node's
  // candidates from one view: its load and this replica's placements there of either role).
  NodeCandidate AutoPrefillCandidate(int j, const std::string& name) const;
  int64_t block_size(int decode_index) const;

  const Placer& placer() const { return placer_; }
  const SimNodeView& view(bool prefill, int j) const { return Views(prefill)[j]; }

 private:
  const std::vector<SimNodeView>& Views(bool prefill) const {
    return prefill ? prefill_views_ : decode_views_;
  }
  std::vector<SimNodeView>& Views(bool prefill) { return prefill ? prefill_views_ : decode_views_; }

  Placer placer_;
  const bool receipts_;
  const int64_t expiry_nanos_;
  std::vector<SimNodeView> prefill_views_;
  std::vector<SimNodeView> decode_views_;
};

}  // namespace tandem::sim

#endif  // TANDEM_TOOLS_SIM_SIM_ROUTER_H_
