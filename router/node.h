// One prefill or decode node as the router knows it: its gRPC channel, stubs and NodeClient,
// whether it is up, its last reported load (plus what this router placed there that the report
// does not show yet: in_flight.h), its incarnation, and the block hashes of its prefix cache as
// told by WatchKvEvents (prefill nodes, and decode nodes under the cost policy). Thread-safe. Held
// by shared_ptr: a request keeps using a node that DNS has since removed.
#ifndef TANDEM_ROUTER_NODE_H_
#define TANDEM_ROUTER_NODE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/util/clock.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "router/in_flight.h"
#include "router/node_client.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

enum class NodeRole { kPrefill, kDecode };
const char* NodeRoleName(NodeRole role);

// How this router's placements on a node are counted until its load reports show them
// (in_flight.h).
struct InFlightOptions {
  uint64_t router_id = ProcessRouterId();
  // A placement counts at most this long after its request was sent (the pool uses 4 health
  // intervals).
  absl::Duration ttl = absl::Seconds(2);
  Clock* clock = Clock::Real();  // borrowed
};

class Node {
 public:
  // A channel to `address` whose reconnect backoff stays short, so a node that comes back is
  // noticed by the next health check; over `credentials` with `args` (TLS: the name override).
  Node(NodeRole role, std::string address, int64_t max_reconnect_backoff_ms,
       std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials(),
       grpc::ChannelArguments args = {}, InFlightOptions in_flight = {});
  // A node reached through `client` only, without a channel (tests of the request path): the
  // pool's health checks and KV events, which use channel() and the stubs, cannot run on it.
  Node(NodeRole role, std::string address, std::unique_ptr<NodeClient> client,
       InFlightOptions in_flight = {});

  NodeRole role() const { return role_; }
  const std::string& address() const { return address_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  v1::DecodeNode::Stub& decode() const { return *decode_stub_; }
  v1::PrefillNode::Stub& prefill() const { return *prefill_stub_; }
  // The request path's calls.
  NodeClient& client() const { return *client_; }

  struct Snapshot {
    bool up = false;
    bool checked = false;  // a health check has answered at least once
    std::string last_error;
    v1::NodeLoad load;
    // Placed here by this router and not in `load` yet (in_flight.h): requests, the prompt tokens
    // they will compute here, the KV blocks they will hold, the KV tokens they add to a step.
    int64_t pending_requests = 0;
    int64_t pending_tokens = 0;
    int64_t pending_blocks = 0;
    int64_t pending_context_tokens = 0;
    // This router's last placement here (InfinitePast: none): the cost policy sends a prompt to
    // the least recently used of equally priced nodes (placement.cc, ChooseByCost).
    absl::Time last_placed = absl::InfinitePast();
  };
  Snapshot snapshot() const;
  bool up() const;

  // A health check answered: serving with `load`. Returns true when the incarnation differs
  // from the one known before (a restart); the prefix-cache view is dropped then. Retires the
  // placements the report's receipt for this router covers (in_flight.h).
  bool MarkUp(const v1::NodeLoad& load);
  // A check or an RPC failed. Returns true if the node was up.
  bool MarkDown(const std::string& error);
  // A health check ran out of time at `now` (busy, or hung: not known yet). Returns when the
  // checks began failing this way; a passing check or MarkDown starts the count over.
  absl::Time NoteSlowCheck(absl::Time now);
  // One of this node's streams delivered an event, or a call on it completed, at `now`.
  // Lock-free: called for every token event.
  void NoteProgress(absl::Time now);
  // The last NoteProgress (InfinitePast when none).
  absl::Time last_progress() const;
  // This router placed a request here: it counts in the snapshot's pending_* until a load report
  // shows it (in_flight.h). Returns the tag its request carries (PlacementTag in node.proto).
  PlacementTag AddPlacement(const InFlightWork& work);
  // Placement `seq`'s request was sent now (later than placed: a disaggregated prefill).
  void PlacementSent(uint64_t seq);
  // Placement `seq`'s request will never be sent.
  void WithdrawPlacement(uint64_t seq);
  uint64_t router_id() const { return router_id_; }

  // Prefix cache, from WatchKvEvents (empty while the pool does not watch this node's).
  void ApplyKvEvents(const v1::KvEvents& events);
  void ClearKvCache();
  // Block size of the hashes in the cache view (0 when unknown).
  int32_t kv_block_size() const;
  // How many leading entries of `block_hashes` (HashFullBlocks of a prompt) the cache holds.
  int64_t CachedPrefixBlocks(std::span<const uint64_t> block_hashes) const;
  size_t num_cached_blocks() const;

 private:
  const NodeRole role_;
  const std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DecodeNode::Stub> decode_stub_;
  std::unique_ptr<v1::PrefillNode::Stub> prefill_stub_;
  std::unique_ptr<NodeClient> client_;
  const uint64_t router_id_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  Snapshot state_ ABSL_GUARDED_BY(mu_);
  mutable InFlightLedger in_flight_ ABSL_GUARDED_BY(mu_);  // expires entries as it is read
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t kv_block_size_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t kv_incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<uint64_t> cached_blocks_ ABSL_GUARDED_BY(mu_);
  absl::Time slow_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::atomic<int64_t> last_progress_ns_{INT64_MIN};
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_NODE_H_
