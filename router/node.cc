#include "router/node.h"

#include <algorithm>
#include <utility>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace tandem {

namespace {

// Shorter than the 10 s a slow node is given before it is marked down (node_down_after_ms).
constexpr int kMinConnectTimeoutMs = 5000;

}  // namespace

const char* NodeRoleName(NodeRole role) {
  return role == NodeRole::kPrefill ? "prefill" : "decode";
}

Node::Node(NodeRole role, std::string address, int64_t max_reconnect_backoff_ms,
           std::shared_ptr<grpc::ChannelCredentials> credentials, grpc::ChannelArguments args,
           InFlightOptions in_flight)
    : role_(role),
      address_(std::move(address)),
      router_id_(in_flight.router_id),
      clock_(in_flight.clock),
      in_flight_(in_flight.router_id, in_flight.ttl) {
  const int backoff = static_cast<int>(std::clamp<int64_t>(max_reconnect_backoff_ms, 100, 10000));
  // Reconnect soon after a node comes back (100 ms, backing off to the health interval), but give
  // each attempt time to finish: gRPC takes the "min reconnect backoff" as the shortest time a
  // connection attempt (TCP + TLS handshake) may take, and at 100 ms a TLS handshake on a busy
  // machine timed out and left a healthy node down at the router's start.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(backoff, 100));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kMinConnectTimeoutMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, backoff);
  // Each node gets a connection of its own even when two share an address string's target.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  channel_ = grpc::CreateCustomChannel(address_, credentials, args);
  decode_stub_ = v1::DecodeNode::NewStub(channel_);
  prefill_stub_ = v1::PrefillNode::NewStub(channel_);
  client_ = std::make_unique<GrpcNodeClient>(channel_, role_ == NodeRole::kDecode);
}

Node::Node(NodeRole role, std::string address, std::unique_ptr<NodeClient> client,
           InFlightOptions in_flight)
    : role_(role),
      address_(std::move(address)),
      client_(std::move(client)),
      router_id_(in_flight.router_id),
      clock_(in_flight.clock),
      in_flight_(in_flight.router_id, in_flight.ttl) {}

Node::Snapshot Node::snapshot() const {
  absl::MutexLock lock(&mu_);
  Snapshot s = state_;
  const InFlightSums pending = in_flight_.Sums(clock_->Now());
  s.pending_requests = pending.requests;
  s.pending_tokens = pending.tokens;
  s.pending_blocks = pending.blocks;
  s.pending_context_tokens = pending.context_tokens;
  return s;
}

bool Node::up() const {
  absl::MutexLock lock(&mu_);
  return state_.up;
}

bool Node::MarkUp(const v1::NodeLoad& load) {
  absl::MutexLock lock(&mu_);
  const bool restarted = incarnation_ != 0 && load.incarnation() != incarnation_;
  incarnation_ = load.incarnation();
  state_.up = true;
  state_.checked = true;
  state_.last_error.clear();
  state_.load = load;
  // The receipt for this router: how many of its requests this report includes (in_flight.h).
  std::optional<int64_t> received;
  if (load.max_router_receipts() > 0) {
    received = 0;
    for (const v1::RouterReceipt& receipt : load.receipts()) {
      if (receipt.router_id() == router_id_) received = receipt.received();
    }
  }
  in_flight_.OnReport(received, restarted, clock_->Now());
  slow_since_ = absl::InfiniteFuture();
  if (restarted) {
    cached_blocks_.clear();
    kv_incarnation_ = 0;
  }
  return restarted;
}

bool Node::MarkDown(const std::string& error) {
  absl::MutexLock lock(&mu_);
  const bool was_up = state_.up;
  state_.up = false;
  state_.checked = true;
  state_.last_error = error;
  slow_since_ = absl::InfiniteFuture();
  return was_up;
}

absl::Time Node::NoteSlowCheck(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (slow_since_ == absl::InfiniteFuture()) slow_since_ = now;
  return slow_since_;
}

void Node::NoteProgress(absl::Time now) {
  const int64_t ns = absl::ToUnixNanos(now);
  int64_t seen = last_progress_ns_.load(std::memory_order_relaxed);
  while (seen < ns && !last_progress_ns_.compare_exchange_weak(seen, ns)) {
  }
}

absl::Time Node::last_progress() const {
  const int64_t ns = last_progress_ns_.load(std::memory_order_relaxed);
  return ns == INT64_MIN ? absl::InfinitePast() : absl::FromUnixNanos(ns);
}

PlacementTag Node::AddPlacement(const InFlightWork& work) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  state_.last_placed = std::max(state_.last_placed, now);
  return in_flight_.Add(work, now);
}

void Node::PlacementSent(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  in_flight_.Sent(seq, clock_->Now());
}

void Node::WithdrawPlacement(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  in_flight_.Withdraw(seq);
}

void Node::ApplyKvEvents(const v1::KvEvents& events) {
  absl::MutexLock lock(&mu_);
  if (events.reset()) {
    cached_blocks_.clear();
    kv_incarnation_ = events.incarnation();
  } else if (events.incarnation() != kv_incarnation_) {
    // A delta from another incarnation than the snapshot we hold: the view is stale.
    cached_blocks_.clear();
    kv_incarnation_ = events.incarnation();
  }
  if (events.block_size() > 0) kv_block_size_ = events.block_size();
  for (uint64_t h : events.removed()) cached_blocks_.erase(h);
  for (uint64_t h : events.stored()) cached_blocks_.insert(h);
}

void Node::ClearKvCache() {
  absl::MutexLock lock(&mu_);
  cached_blocks_.clear();
  kv_incarnation_ = 0;
}

int32_t Node::kv_block_size() const {
  absl::MutexLock lock(&mu_);
  if (kv_block_size_ > 0) return kv_block_size_;
  return state_.load.block_size();
}

int64_t Node::CachedPrefixBlocks(std::span<const uint64_t> block_hashes) const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (uint64_t h : block_hashes) {
    if (!cached_blocks_.contains(h)) break;
    ++n;
  }
  return n;
}

size_t Node::num_cached_blocks() const {
  absl::MutexLock lock(&mu_);
  return cached_blocks_.size();
}

}  // namespace tandem
