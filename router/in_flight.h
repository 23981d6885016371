// What one router placed on one node that the node's load reports do not show yet: the router's
// in-flight accounting (ARCHITECTURE.md, Placement). Load reports are stale by design (one every
// --health-interval-ms), so without it a burst lands on whichever node looked emptiest in the last
// report; with it each placement counts against its node from the moment it is made.
//
// Every placement gets the next sequence number of this (router, node) and travels with its
// request as a PlacementTag {router id, seq}. The node counts, per router id, the tagged requests
// it took, in the same engine snapshot as the load it reports (EngineStats::receipts), so a
// report whose receipt for this router says `received = n` includes n of this router's requests.
// The ledger keeps the placements in the order they were sent and retires the first
// n - (receipts seen before) of them: count-based, so requests that arrive out of order retire
// the right *number* of entries, and the sums stay right in aggregate though the entries retired
// may be others than the ones that arrived. Other routers' work is in the report itself (the node
// counts every router's requests), so replicas converge without talking to each other.
//
// Also retired:
//  - all of them, on a report from a node that counts no receipts (max_router_receipts 0: older
//    nodes; the report is taken to include everything sent before it, as before receipts);
//  - all of them, when the node restarted (a new incarnation) or its count for this router went
//    back (it forgot this router among more recently seen ones): counting starts over there;
//  - each one `ttl` after it was sent: a request whose RPC failed never arrives.
// A placement whose request is never sent (its attempt ended first) is withdrawn: it is not
// counted by the node either, so the two counts stay aligned.
//
// Deterministic (time is passed in); not thread-safe (Node holds it under its lock).
#ifndef TANDEM_ROUTER_IN_FLIGHT_H_
#define TANDEM_ROUTER_IN_FLIGHT_H_

#include <cstdint>
#include <list>
#include <optional>

#include "absl/time/time.h"
#include "common/types/placement_tag.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

// What one placement brings its node.
struct InFlightWork {
  int64_t tokens = 0;          // prompt tokens it will compute there
  int64_t blocks = 0;          // KV blocks it will hold there
  int64_t context_tokens = 0;  // KV tokens a step there will read for it (its prompt)
};

// The placements not retired yet, summed.
struct InFlightSums {
  int64_t requests = 0;
  int64_t tokens = 0;
  int64_t blocks = 0;
  int64_t context_tokens = 0;
};

class InFlightLedger {
 public:
  // `router_id`: this router's (non-zero) id; `ttl`: how long a placement counts at most.
  InFlightLedger(uint64_t router_id, absl::Duration ttl);

  // A placement made at `now`; its tag goes with the request.
  PlacementTag Add(const InFlightWork& work, absl::Time now);
  // The request of placement `seq` left at `now` (later than its placement: the prefill of a
  // disaggregated request, sent once the decode node reserved blocks): its ttl starts over and it
  // moves behind the placements sent before it.
  void Sent(uint64_t seq, absl::Time now);
  // Placement `seq`'s request will never be sent.
  void Withdraw(uint64_t seq);
  // A load report: `received` is the node's count of this router's requests (0 when it names no
  // receipt for this router), nullopt when the node counts no receipts; `restarted` when its
  // incarnation differs from the previous report's.
  void OnReport(std::optional<int64_t> received, bool restarted, absl::Time now);
  // The placements not retired as of `now`.
  InFlightSums Sums(absl::Time now);

  uint64_t router_id() const { return router_id_; }

 private:
  struct Entry {
    uint64_t seq = 0;
    InFlightWork work;
    absl::Time sent;
  };
  void Retire(std::list<Entry>::iterator it);
  void RetireAll();
  void Expire(absl::Time now);

  const uint64_t router_id_;
  const absl::Duration ttl_;
  uint64_t next_seq_ = 1;
  // The node's count of this router's requests in the last report taken into account.
  int64_t acked_ = 0;
  std::list<Entry> entries_;  // in the order they were sent (and so of `sent`)
  InFlightSums sums_;
};

// This router process's id: random, non-zero, the same for the process's life.
uint64_t ProcessRouterId();

// `tag` on the wire (a request's `placement`); an empty tag (router_id 0) leaves it unset.
void SetPlacementTag(const PlacementTag& tag, v1::PlacementTag* out);

}  // namespace tandem

#endif  // TANDEM_ROUTER_IN_FLIGHT_H_
