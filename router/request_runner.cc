#include "router/request_runner.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/kv/block_hash.h"
#include "router/auto_mode.h"
#include "router/client_errors.h"
#include "router/client_stream.h"
#include "router/request_flow.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

constexpr absl::Duration kWatchdogInterval = absl::Milliseconds(10);
constexpr absl::Duration kCancelRpcTimeout = absl::Seconds(2);
// At destruction, how long requests still running get to end once cancelled.
constexpr absl::Duration kShutdownWait = absl::Seconds(10);
// A decode node that reports no block size: the estimate of blocks a request takes uses this.
constexpr int32_t kDefaultBlockSize = 16;

std::string NodeName(const std::shared_ptr<Node>& node) {
  return absl::StrCat(NodeRoleName(node->role()), " node ", node->address());
}

// NodeCandidate::last_placed_ns: nanoseconds since the Unix epoch, 0 when never placed.
int64_t LastPlacedNs(const Node::Snapshot& s) {
  return s.last_placed == absl::InfinitePast() ? 0 : absl::ToUnixNanos(s.last_placed);
}

// The cost model's inputs (placement.h) from a node's last report plus this router's placements
// there that the report does not show yet.
void FillCostInputs(const Node::Snapshot& s, NodeCandidate* c) {
  const v1::StepCost& cost = s.load.step_cost();
  c->step_cost = StepCost{.per_step_us = cost.per_step_us(),
                          .per_token_us = cost.per_token_us(),
                          .per_context_token_us = cost.per_context_token_us(),
                          .samples = cost.samples()};
  c->num_running = s.load.num_running();
  c->context_tokens = s.load.num_context_tokens() + s.pending_context_tokens;
  c->max_batched_tokens = s.load.max_num_batched_tokens();
  c->max_num_seqs = s.load.max_num_seqs();
  c->num_kv_blocks = s.load.num_kv_blocks();
  c->block_size = s.load.block_size();
  c->kv_bytes_per_token = s.load.kv_bytes_per_token();
  c->waiting_blocks = WaitingBlocks(s.load.num_queued_tokens(), s.load.block_size());
}

}  // namespace

RequestRunner::RequestRunner(std::shared_ptr<const ServedModel> model, NodeDirectory* pool,
                             const RouterOptions& options, RouterCounters* counters,
                             RouterMetrics* metrics, Clock* clock)
    : model_(std::move(model)),
      pool_(pool),
      options_(options),
      counters_(counters),
      metrics_(metrics),
      clock_(clock),
      workers_(static_cast<int>(std::max(2u, std::thread::hardware_concurrency()))),
      placer_(options.placement),
      watchdog_(kWatchdogInterval, clock),
      admission_(AdmissionOptions{
          .max_running = options.max_concurrent_requests,
          .max_queued_requests = options.max_queued_requests,
          .max_queued_prompt_tokens = options.max_queued_prompt_tokens,
          .max_wait = absl::Milliseconds(options.queue_timeout_ms),
      }) {
  if (options_.live_kv_migration && options_.kv_rebalance_interval_ms > 0) {
    rebalancer_ = std::thread([this] { RebalanceLoop(); });
  }
}

void RequestRunner::RebalanceLoop() {
  // Real time: it paces looks at load reports that arrive in real time.
  const absl::Duration interval = absl::Milliseconds(options_.kv_rebalance_interval_ms);
  while (!stop_rebalancer_.WaitForNotificationWithTimeout(interval)) RebalanceKvOnce();
}

void RequestRunner::TrackStream(uint64_t key, std::weak_ptr<RequestFlow> flow,
                                const std::string& node) {
  absl::MutexLock lock(&streams_mu_);
  streams_[key] = TrackedStream{std::move(flow), node};
}

void RequestRunner::UntrackStream(uint64_t key) {
  absl::MutexLock lock(&streams_mu_);
  streams_.erase(key);
}

std::vector<RebalanceMove> RequestRunner::RebalanceKvOnce() {
  std::vector<RebalanceNode> nodes;
  for (const std::shared_ptr<Node>& node : pool_->UpNodes(NodeRole::kDecode)) {
    const Node::Snapshot s = node->snapshot();
    if (!s.checked) continue;
    nodes.push_back({.address = node->address(),
                     .num_kv_blocks = s.load.num_kv_blocks(),
                     .num_free_kv_blocks = s.load.num_free_kv_blocks() - s.pending_blocks,
                     .block_size = s.load.block_size() > 0 ? s.load.block_size() : 16,
                     .num_running = s.load.num_running(),
                     .num_waiting = s.load.num_waiting()});
  }
  if (nodes.size() < 2) return {};
  std::vector<RebalanceStream> streams;
  absl::flat_hash_map<uint64_t, std::shared_ptr<RequestFlow>> flows;
  {
    absl::MutexLock lock(&streams_mu_);
    for (const auto& [key, tracked] : streams_) {
      std::shared_ptr<RequestFlow> flow = tracked.flow.lock();
      if (flow == nullptr) continue;
      streams.push_back({.key = key,
                         .node = tracked.node,
                         .kv_tokens = flow->kv_tokens(),
                         .moves = flow->moves(),
                         .movable = flow->movable()});
      flows.emplace(key, std::move(flow));
    }
  }
  std::vector<RebalanceMove> moves = PlanKvRebalance(nodes, streams, RebalanceOptions());
  for (const RebalanceMove& move : moves) {
    spdlog::info("rebalancing KV: decode node {} is out of blocks; moving a stream to {}",
                 move.from, move.to);
    flows[move.key]->AskToMove();
  }
  return moves;
}

RequestRunner::~RequestRunner() {
  stop_rebalancer_.Notify();
  if (rebalancer_.joinable()) rebalancer_.join();
  // Requests still running end as if their clients left; their node calls are cancelled.
  watchdog_.CancelAll();
  const absl::Time give_up = absl::Now() + kShutdownWait;
  // A flow ends (in_flight_) before it calls its `done` and before its members go: wait for
  // the flows themselves, so none touches this runner after it is gone.
  while ((in_flight_.load() > 0 || live_flows_.load() > 0) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  if (in_flight_.load() > 0 || live_flows_.load() > 0) {
    spdlog::error("{} requests did not end within {} ({} flows still alive)", in_flight_.load(),
                  absl::FormatDuration(kShutdownWait), live_flows_.load());
  }
  absl::MutexLock lock(&cancels_mu_);
  auto none = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(cancels_mu_) { return cancels_in_flight_ == 0; };
  cancels_mu_.AwaitWithTimeout(absl::Condition(&none), kCancelRpcTimeout + absl::Seconds(1));
}

// A best-effort call on `node` that nothing waits for (Cancel, PauseForMigration, ResumePaused):
// it owns itself until its end, and the destructor waits for the ones still in flight.
template <typename Request, typename Response>
void RequestRunner::SendDetached(
    const std::shared_ptr<Node>& node, Request request,
    absl::AnyInvocable<void(NodeClient&, grpc::ClientContext*, const Request*, Response*,
                            NodeClient::Done)>
        start,
    absl::AnyInvocable<void(const grpc::Status&, const Response&)> on_done) {
  struct Call {
    std::shared_ptr<Node> node;
    grpc::ClientContext ctx;
    Request request;
    Response response;
    absl::AnyInvocable<void(const grpc::Status&, const Response&)> on_done;
  };
  auto* call = new Call{node, {}, std::move(request), {}, std::move(on_done)};
  call->ctx.set_deadline(absl::ToChronoTime(clock_->Now() + kCancelRpcTimeout));
  {
    absl::MutexLock lock(&cancels_mu_);
    ++cancels_in_flight_;
  }
  start(node->client(), &call->ctx, &call->request, &call->response,
        [this, call](grpc::Status status) {
          call->on_done(status, call->response);
          delete call;
          absl::MutexLock lock(&cancels_mu_);
          --cancels_in_flight_;
        });
}

void RequestRunner::SendCancel(const std::shared_ptr<Node>& node, const std::string& request_id) {
  ++counters_->cancels_sent;
  v1::CancelRequest request;
  request.set_request_id(request_id);
  SendDetached<v1::CancelRequest, v1::CancelResponse>(
      node, std::move(request),
      [](NodeClient& client, grpc::ClientContext* ctx, const v1::CancelRequest* r,
         v1::CancelResponse* response,
         NodeClient::Done done) { client.Cancel(ctx, r, response, std::move(done)); },
      [name = NodeName(node), request_id](const grpc::Status& status, const v1::CancelResponse&) {
        if (!status.ok())
          spdlog::debug("Cancel({}) on {}: {}", request_id, name, status.error_message());
      });
}

void RequestRunner::SendPauseOrResume(const std::shared_ptr<Node>& node,
                                      const std::string& request_id, bool resume) {
  v1::MigrationRequest request;
  request.set_request_id(request_id);
  SendDetached<v1::MigrationRequest, v1::MigrationResponse>(
      node, std::move(request),
      [resume](NodeClient& client, grpc::ClientContext* ctx, const v1::MigrationRequest* r,
               v1::MigrationResponse* response, NodeClient::Done done) {
        client.PauseOrResume(ctx, resume, r, response, std::move(done));
      },
      [name = NodeName(node), request_id, resume](const grpc::Status& status,
                                                  const v1::MigrationResponse& response) {
        if (status.ok() && response.found()) return;
        spdlog::warn("{}({}) on {}: {}", resume ? "ResumePaused" : "PauseForMigration", request_id,
                     name,
                     status.ok() ? std::string("no such request there") : status.error_message());
      });
}

RequestRunner::KvMoveTarget RequestRunner::PlaceKvMove(
    const RouterRequest& request, int64_t kv_tokens, const std::shared_ptr<Node>& from,
    const std::vector<std::string>& failed_nodes) {
  std::shared_ptr<Node> best;
  int64_t best_free = 0;
  int64_t best_blocks = 0;
  const int64_t remaining = std::max<int64_t>(
      0, request.sampling.max_tokens - (kv_tokens - static_cast<int64_t>(request.prompt.size())));
  for (const std::shared_ptr<Node>& node : pool_->UpNodes(NodeRole::kDecode)) {
    if (node == from || node->address() == from->address()) continue;
    if (std::find(failed_nodes.begin(), failed_nodes.end(), node->address()) !=
        failed_nodes.end()) {
      continue;
    }
    const Node::Snapshot s = node->snapshot();
    const int64_t block_size = s.load.block_size() > 0 ? s.load.block_size() : kDefaultBlockSize;
    const int64_t free = s.load.num_free_kv_blocks() - s.pending_blocks;
    // Its KV now, and room to decode on for a while (a block per sequence at least).
    const int64_t needed = (kv_tokens + block_size) / block_size + 1;
    if (s.load.max_context_tokens() > 0 && kv_tokens >= s.load.max_context_tokens()) continue;
    if (free < needed || free <= best_free) continue;
    best = node;
    best_free = free;
    best_blocks = (kv_tokens + remaining + block_size - 1) / block_size;
  }
  KvMoveTarget target;
  if (best == nullptr) return target;
  target.tag = best->AddPlacement({.blocks = best_blocks, .context_tokens = kv_tokens});
  target.node = std::move(best);
  return target;
}

absl::StatusOr<RequestRunner::Chosen> RequestRunner::Place(
    const RouterRequest& request, const std::vector<std::string>& failed_nodes) {
  const PlacementOptions& popts = options_.placement;
  // Nodes this request has not failed on yet; all nodes that are up when that leaves none.
  auto usable = [&](NodeRole role) {
    std::vector<std::shared_ptr<Node>> up = pool_->UpNodes(role);
    std::vector<std::shared_ptr<Node>> fresh;
    for (const auto& n : up) {
      if (std::find(failed_nodes.begin(), failed_nodes.end(), n->address()) == failed_nodes.end()) {
        fresh.push_back(n);
      }
    }
    return fresh.empty() ? up : fresh;
  };
  std::vector<std::shared_ptr<Node>> decode = usable(NodeRole::kDecode);
  std::vector<std::shared_ptr<Node>> prefill;
  // Auto mode: the decode nodes are the prefill nodes too (the same Node objects, so that one
  // in-flight ledger counts both roles' work on a node, as its one engine's receipts do).
  const bool auto_mode = popts.mode == ServingMode::kAuto;
  if (auto_mode) {
    prefill = decode;
  } else if (popts.mode == ServingMode::kDisaggregated) {
    prefill = usable(NodeRole::kPrefill);
  }
  if (decode.empty()) {
    const size_t known = pool_->Nodes(NodeRole::kDecode).size();
    return absl::UnavailableError(known == 0
                                      ? std::string("no decode node is known")
                                      : absl::StrCat("none of the ", known, " decode nodes is up"));
  }

  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  // From the nodes' snapshots to this placement's in-flight counts, one placement at a time: two
  // requests placed at once would each see the view without the other and pick alike (a burst's
  // requests, placed on several workers, would herd).
  absl::MutexLock place_lock(&place_mu_);
  // The cost model credits the prefix a prefill node holds too, and the one a decode node holds
  // (a local prefill there computes only the rest: a conversation's next turn).
  const bool use_prefix =
      popts.policy == PlacementPolicy::kPrefixAware || popts.policy == PlacementPolicy::kCost ||
      (popts.mode != ServingMode::kColocated && popts.local_prefill_threshold > 0);
  const bool use_decode_prefix = popts.policy == PlacementPolicy::kCost;
  // The prompt's block hashes, computed once per block size whatever the number of nodes: the
  // full blocks before its last token, the ones a node can reuse (the last token is always
  // computed, for its logits: BlockManager::CachedPrefixTokens).
  absl::flat_hash_map<int32_t, std::vector<uint64_t>> hashes_by_block_size;
  const std::span<const TokenId> reusable =
      std::span<const TokenId>(request.prompt)
          .first(std::max<size_t>(request.prompt.size(), 1) - 1);
  auto cached_prefix_tokens = [&](const Node& node) -> int64_t {
    const int32_t block_size = node.kv_block_size();
    if (block_size <= 0 || node.num_cached_blocks() == 0) return 0;
    auto it = hashes_by_block_size.find(block_size);
    if (it == hashes_by_block_size.end()) {
      it = hashes_by_block_size.emplace(block_size, HashFullBlocks(reusable, block_size)).first;
    }
    return node.CachedPrefixBlocks(it->second) * block_size;
  };

  std::vector<NodeCandidate> prefill_candidates;
  for (size_t i = 0; i < prefill.size(); ++i) {
    const Node::Snapshot s = prefill[i]->snapshot();
    NodeCandidate c;
    c.index = static_cast<int>(i);
    c.address = prefill[i]->address();
    c.free_kv_blocks = s.load.num_free_kv_blocks() - s.pending_blocks;
    c.queued_tokens = s.load.num_queued_tokens() + s.pending_tokens;
    c.num_sequences = s.load.num_running() + s.load.num_waiting() + s.pending_requests;
    FillCostInputs(s, &c);
    c.last_placed_ns = LastPlacedNs(s);
    if (use_prefix) c.cached_prefix_tokens = cached_prefix_tokens(*prefill[i]);
    // Auto mode: a node prefills for another only with room for the prompt (router/auto_mode.h).
    if (auto_mode && !HasRoomToPrefill(c, prompt_tokens, kDefaultBlockSize)) continue;
    prefill_candidates.push_back(std::move(c));
  }
  std::vector<NodeCandidate> decode_candidates;
  for (size_t i = 0; i < decode.size(); ++i) {
    const Node::Snapshot s = decode[i]->snapshot();
    NodeCandidate c;
    c.index = static_cast<int>(i);
    c.address = decode[i]->address();
    c.free_kv_blocks = s.load.num_free_kv_blocks() - s.pending_blocks;
    c.queued_tokens = s.load.num_queued_tokens() + s.pending_tokens;
    c.num_sequences =
        s.load.num_running() + s.load.num_waiting() + s.load.num_awaiting_kv() + s.pending_requests;
    FillCostInputs(s, &c);
    c.last_placed_ns = LastPlacedNs(s);
    if (use_decode_prefix) c.cached_prefix_tokens = cached_prefix_tokens(*decode[i]);
    decode_candidates.push_back(std::move(c));
  }

  absl::StatusOr<Placement> placement = placer_.Choose(prefill_candidates, decode_candidates,
                                                       prompt_tokens, request.sampling.max_tokens);
  if (!placement.ok()) return placement.status();
  Chosen chosen;
  chosen.kind = placement->kind;
  chosen.reason = placement->reason;
  chosen.decode = decode[placement->decode];
  chosen.cached_prefix_tokens = placement->cached_prefix_tokens;
  chosen.decode_cached_prefix_tokens = placement->decode_cached_prefix_tokens;
  if (placement->prefill >= 0) chosen.prefill = prefill[placement->prefill];

  // Until the nodes' load reports show them (in_flight.h), count what this router sends them;
  // the requests carry the tags.
  int64_t block_size = chosen.decode->snapshot().load.block_size();
  if (block_size <= 0) block_size = kDefaultBlockSize;
  const int64_t total = prompt_tokens + request.sampling.max_tokens;
  const bool local = chosen.kind != PlacementKind::kDisaggregated;
  chosen.decode_tag = chosen.decode->AddPlacement(
      {.tokens = local ? prompt_tokens - placement->decode_cached_prefix_tokens : 0,
       .blocks = (total + block_size - 1) / block_size,
       .context_tokens = prompt_tokens});
  if (chosen.prefill != nullptr) {
    // Auto mode: the prompt's blocks the prefill holds there count until a report shows them.
    int64_t held = 0;
    for (const NodeCandidate& c : prefill_candidates) {
      if (auto_mode && c.index == placement->prefill) {
        held = PrefillHeldBlocks(c, prompt_tokens, kDefaultBlockSize);
      }
    }
    chosen.prefill_tag =
        chosen.prefill->AddPlacement({.tokens = prompt_tokens - chosen.cached_prefix_tokens,
                                      .blocks = held,
                                      .context_tokens = prompt_tokens});
  }
  return chosen;
}

AttemptFacts RequestRunner::CommonFacts(const Chosen& chosen, const CallGuard& guard,
                                        const ClientStream& stream) const {
  AttemptFacts facts;
  facts.kind = chosen.kind;
  facts.decode_name = NodeName(chosen.decode);
  if (chosen.prefill != nullptr) facts.prefill_name = NodeName(chosen.prefill);
  facts.first_token_timeout_ms = options_.first_token_timeout_ms;
  facts.client_gone = stream.client_gone;
  facts.client_cancelled = guard.client_cancelled();
  facts.timed_out = guard.timed_out();
  facts.attempt_timed_out = guard.attempt_timed_out();
  facts.sent_tokens = stream.sent_tokens;
  return facts;
}

RequestRunner::AttemptResult RequestRunner::Apply(const AttemptVerdict& verdict,
                                                  const Chosen& chosen,
                                                  const std::string& node_request_id) {
  if (verdict.stop_string_hit) ++counters_->stop_string_hits;
  if (verdict.cancel_prefill) SendCancel(chosen.prefill, node_request_id);
  if (verdict.cancel_decode) SendCancel(chosen.decode, node_request_id);
  if (verdict.decode_unreachable) {
    pool_->ReportFailure(chosen.decode, verdict.status.error_message());
  }
  if (verdict.prefill_unreachable) {
    pool_->ReportFailure(chosen.prefill, verdict.status.error_message());
  }
  AttemptResult result;
  result.status = verdict.status;
  result.retry = verdict.retry;
  result.reason = verdict.reason;
  result.migrate = verdict.migrate;
  result.migration_reason = verdict.migration_reason;
  if (verdict.blame_decode) result.blame.push_back(chosen.decode);
  if (verdict.blame_prefill) result.blame.push_back(chosen.prefill);
  return result;
}

void RequestRunner::CountPlacement(const Chosen& chosen, const RouterRequest& request,
                                   int attempt) {
  switch (chosen.kind) {
    case PlacementKind::kDisaggregated:
      ++counters_->disaggregated;
      break;
    case PlacementKind::kLocalPrefill:
      if (chosen.reason == PlacementReason::kMigration) {
        ++counters_->local_prefill_migration;
      } else if (chosen.reason == PlacementReason::kNoPrefillNode) {
        ++counters_->local_prefill_no_prefill_node;
      } else if (chosen.reason == PlacementReason::kCheaperLocal) {
        ++counters_->local_prefill_cheaper_local;
      } else {
        ++counters_->local_prefill_short_prompt;
      }
      break;
    case PlacementKind::kColocated:
      ++counters_->colocated;
      break;
  }
  spdlog::debug(
      "{}: attempt {}: {} ({}) decode {}{} ({} of {} prompt tokens cached on the prefill node, "
      "{} on the decode node)",
      request.request_id, attempt, PlacementKindName(chosen.kind),
      PlacementReasonName(chosen.reason), chosen.decode->address(),
      chosen.prefill ? absl::StrCat(" prefill ", chosen.prefill->address()) : "",
      chosen.cached_prefix_tokens, request.prompt.size(), chosen.decode_cached_prefix_tokens);
}

void RequestRunner::Start(const v1::GenerateRequest& request, const RunOptions& options,
                          ResponseSink* sink, absl::AnyInvocable<void(grpc::Status)> done) {
  RequestFlow::Start(this, request, options, sink, std::move(done));
}

grpc::Status RequestRunner::Run(const v1::GenerateRequest& request, const RunOptions& options,
                                ResponseSink& sink) {
  absl::Mutex mu;
  std::optional<grpc::Status> result;
  Start(request, options, &sink, [&](grpc::Status status) {
    absl::MutexLock lock(&mu);
    result = std::move(status);
  });
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](std::optional<grpc::Status>* r) { return r->has_value(); }, &result));
  return *std::move(result);
}

}  // namespace tandem
