#include "router/request_runner.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/kv/block_hash.h"
#include "router/client_errors.h"
#include "router/client_stream.h"
#include "router/prefill_call.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

constexpr absl::Duration kWatchdogInterval = absl::Milliseconds(10);
constexpr absl::Duration kCancelRpcTimeout = absl::Seconds(2);
// The decode stream finished while the prefill call had not answered yet (its answer races with
// the first token): how long it gets before it is cancelled.
constexpr absl::Duration kPrefillAnswerGrace = absl::Seconds(1);
// A decode node that reports no block size: the estimate of blocks a request takes uses this.
constexpr int64_t kDefaultBlockSize = 16;

std::string NodeName(const std::shared_ptr<Node>& node) {
  return absl::StrCat(NodeRoleName(node->role()), " node ", node->address());
}

}  // namespace

struct RequestRunner::Chosen {
  PlacementKind kind = PlacementKind::kDisaggregated;
  PlacementReason reason = PlacementReason::kDisaggregated;
  std::shared_ptr<Node> decode;
  std::shared_ptr<Node> prefill;  // kDisaggregated only
  int64_t cached_prefix_tokens = 0;
};

struct RequestRunner::AttemptResult {
  grpc::Status status;  // OK: the request is done
  bool retry = false;
  RetryReason reason = RetryReason::kDecodeFailed;
  std::vector<std::shared_ptr<Node>> blame;  // not to be used again by this request if possible
};

RequestRunner::RequestRunner(std::shared_ptr<const ServedModel> model, NodeDirectory* pool,
                             const RouterOptions& options, RouterCounters* counters,
                             RouterMetrics* metrics, Clock* clock)
    : model_(std::move(model)),
      pool_(pool),
      options_(options),
      counters_(counters),
      metrics_(metrics),
      clock_(clock),
      placer_(options.placement),
      watchdog_(kWatchdogInterval, clock),
      admission_(
          AdmissionOptions{
              .max_running = options.max_concurrent_requests,
              .max_queued_requests = options.max_queued_requests,
              .max_queued_prompt_tokens = options.max_queued_prompt_tokens,
              .max_wait = absl::Milliseconds(options.queue_timeout_ms),
          },
          clock) {}

RequestRunner::~RequestRunner() {
  absl::MutexLock lock(&cancels_mu_);
  auto none = [this]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(cancels_mu_) { return cancels_in_flight_ == 0; };
  cancels_mu_.AwaitWithTimeout(absl::Condition(&none), kCancelRpcTimeout + absl::Seconds(1));
}

void RequestRunner::SendCancel(const std::shared_ptr<Node>& node, const std::string& request_id) {
  struct Call {
    std::shared_ptr<Node> node;
    grpc::ClientContext ctx;
    v1::CancelRequest request;
    v1::CancelResponse response;
  };
  auto* call = new Call;
  call->node = node;
  call->request.set_request_id(request_id);
  call->ctx.set_deadline(absl::ToChronoTime(clock_->Now() + kCancelRpcTimeout));
  {
    absl::MutexLock lock(&cancels_mu_);
    ++cancels_in_flight_;
  }
  ++counters_->cancels_sent;
  auto done = [this, call](grpc::Status status) {
    if (!status.ok()) {
      spdlog::debug("Cancel({}) on {}: {}", call->request.request_id(), NodeName(call->node),
                    status.error_message());
    }
    delete call;
    absl::MutexLock lock(&cancels_mu_);
    --cancels_in_flight_;
  };
  node->client().Cancel(&call->ctx, &call->request, &call->response, std::move(done));
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
  if (popts.mode == ServingMode::kDisaggregated) prefill = usable(NodeRole::kPrefill);
  if (decode.empty()) {
    const size_t known = pool_->Nodes(NodeRole::kDecode).size();
    return absl::UnavailableError(known == 0
                                      ? std::string("no decode node is known")
                                      : absl::StrCat("none of the ", known, " decode nodes is up"));
  }

  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  const bool use_prefix =
      popts.policy == PlacementPolicy::kPrefixAware ||
      (popts.mode == ServingMode::kDisaggregated && popts.local_prefill_threshold > 0);
  absl::flat_hash_map<int32_t, std::vector<uint64_t>> hashes_by_block_size;

  std::vector<NodeCandidate> prefill_candidates;
  for (size_t i = 0; i < prefill.size(); ++i) {
    const Node::Snapshot s = prefill[i]->snapshot();
    NodeCandidate c;
    c.index = static_cast<int>(i);
    c.address = prefill[i]->address();
    c.free_kv_blocks = s.load.num_free_kv_blocks() - s.pending_blocks;
    c.queued_tokens = s.load.num_queued_tokens() + s.pending_tokens;
    c.num_sequences = s.load.num_running() + s.load.num_waiting() + s.pending_requests;
    const int32_t block_size = prefill[i]->kv_block_size();
    if (use_prefix && block_size > 0 && prefill[i]->num_cached_blocks() > 0) {
      auto it = hashes_by_block_size.find(block_size);
      if (it == hashes_by_block_size.end()) {
        it = hashes_by_block_size.emplace(block_size, HashFullBlocks(request.prompt, block_size))
                 .first;
      }
      c.cached_prefix_tokens = prefill[i]->CachedPrefixBlocks(it->second) * block_size;
    }
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
    decode_candidates.push_back(std::move(c));
  }

  absl::StatusOr<Placement> placement =
      placer_.Choose(prefill_candidates, decode_candidates, prompt_tokens);
  if (!placement.ok()) return placement.status();
  Chosen chosen;
  chosen.kind = placement->kind;
  chosen.reason = placement->reason;
  chosen.decode = decode[placement->decode];
  chosen.cached_prefix_tokens = placement->cached_prefix_tokens;
  if (placement->prefill >= 0) chosen.prefill = prefill[placement->prefill];

  // Until the nodes' next load reports, count what this router just sent them.
  int64_t block_size = chosen.decode->snapshot().load.block_size();
  if (block_size <= 0) block_size = kDefaultBlockSize;
  const int64_t total = prompt_tokens + request.sampling.max_tokens;
  const bool local = chosen.kind != PlacementKind::kDisaggregated;
  chosen.decode->AddPending(local ? prompt_tokens : 0, (total + block_size - 1) / block_size);
  if (chosen.prefill != nullptr) {
    chosen.prefill->AddPending(prompt_tokens - chosen.cached_prefix_tokens, 0);
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
  if (verdict.blame_decode) result.blame.push_back(chosen.decode);
  if (verdict.blame_prefill) result.blame.push_back(chosen.prefill);
  return result;
}

RequestRunner::AttemptResult RequestRunner::RunDisaggregated(const Chosen& chosen,
                                                             const std::string& node_request_id,
                                                             CallGuard& guard,
                                                             ClientStream& stream) {
  const RouterRequest& request = stream.request;
  const std::shared_ptr<Node>& d = chosen.decode;

  // 1. Reserve on D: its first event is the handoff.
  grpc::ClientContext d_ctx;
  d_ctx.set_deadline(absl::ToChronoTime(guard.deadline()));
  guard.Attach(&d_ctx);
  absl::Cleanup detach_d = [&] { guard.Detach(&d_ctx); };
  v1::ReserveRequest reserve;
  reserve.mutable_prompt_token_ids()->Assign(request.prompt.begin(), request.prompt.end());
  *reserve.mutable_sampling() = request.node_sampling;
  reserve.set_request_id(node_request_id);
  reserve.set_lease_ms(options_.lease_ms);
  std::unique_ptr<DecodeEventReader> reader = d->client().Reserve(&d_ctx, reserve);
  v1::DecodeEvent first;
  if (!reader->Read(&first)) {
    const grpc::Status reserve_status = reader->Finish();
    AttemptFacts facts = CommonFacts(chosen, guard, stream);
    facts.reserve = ReserveEnd::kNoEvent;
    facts.reserve_status = reserve_status;
    return Apply(JudgeAttempt(facts), chosen, node_request_id);
  }
  if (!first.has_handoff()) {
    d_ctx.TryCancel();
    reader->Finish();
    AttemptFacts facts = CommonFacts(chosen, guard, stream);
    facts.reserve = ReserveEnd::kNoHandoff;
    return Apply(JudgeAttempt(facts), chosen, node_request_id);
  }
  stream.cached_tokens =
      std::max<int64_t>(stream.cached_tokens, first.handoff().num_cached_tokens());

  // 2. Prefill on P, concurrently with reading D's stream (a prefill that fails before D's first
  // token cancels D's stream, so the attempt ends at once).
  v1::PrefillRequest prefill_request;
  prefill_request.mutable_prompt_token_ids()->Assign(request.prompt.begin(), request.prompt.end());
  *prefill_request.mutable_sampling() = request.node_sampling;
  *prefill_request.mutable_handoff() = first.handoff();
  prefill_request.set_request_id(node_request_id);
  std::shared_ptr<PrefillCall> prefill =
      PrefillCall::Create(std::move(prefill_request), guard.deadline());
  guard.Attach(prefill->context());
  prefill->Start(chosen.prefill->client(), [&d_ctx] { d_ctx.TryCancel(); });

  // 3. D's tokens.
  const StreamOutcome outcome =
      stream.ReadFrom(reader.get(), &d_ctx, *d, [&](const v1::DecodeEvent&) {
        guard.SetAttemptDeadline(absl::InfiniteFuture());
        prefill->ProtectStream();
      });

  // 4. The prefill call ends before this attempt does.
  const PrefillCall::Result prefill_result = prefill->Finish(
      outcome.finished, kPrefillAnswerGrace,
      std::max(guard.deadline() - clock_->Now(), absl::ZeroDuration()) + absl::Seconds(1));
  guard.Detach(prefill->context());
  if (prefill_result.end == PrefillEnd::kOk) {
    chosen.prefill->NoteProgress(clock_->Now());
    stream.timer->SetNodeQueue(absl::Microseconds(prefill_result.queue_us));
  }

  AttemptFacts facts = CommonFacts(chosen, guard, stream);
  facts.prefill = prefill_result.end;
  facts.prefill_status = prefill_result.status;
  facts.stream = outcome;
  return Apply(JudgeAttempt(facts), chosen, node_request_id);
}

RequestRunner::AttemptResult RequestRunner::RunLocal(const Chosen& chosen,
                                                     const std::string& node_request_id,
                                                     CallGuard& guard, ClientStream& stream) {
  const RouterRequest& request = stream.request;
  grpc::ClientContext d_ctx;
  d_ctx.set_deadline(absl::ToChronoTime(guard.deadline()));
  guard.Attach(&d_ctx);
  absl::Cleanup detach_d = [&] { guard.Detach(&d_ctx); };
  v1::NodeGenerateRequest generate;
  generate.mutable_prompt_token_ids()->Assign(request.prompt.begin(), request.prompt.end());
  *generate.mutable_sampling() = request.node_sampling;
  generate.set_request_id(node_request_id);
  std::unique_ptr<DecodeEventReader> reader = chosen.decode->client().Generate(&d_ctx, generate);
  const StreamOutcome outcome =
      stream.ReadFrom(reader.get(), &d_ctx, *chosen.decode, [&](const v1::DecodeEvent& event) {
        guard.SetAttemptDeadline(absl::InfiniteFuture());
        stream.timer->SetNodeQueue(absl::Microseconds(event.queue_us()));
      });
  AttemptFacts facts = CommonFacts(chosen, guard, stream);
  facts.stream = outcome;
  return Apply(JudgeAttempt(facts), chosen, node_request_id);
}

grpc::Status RequestRunner::Run(const v1::GenerateRequest& request, const RunOptions& options,
                                ResponseSink& sink) {
  ++counters_->requests;
  RequestTimer timer(clock_->Now());
  in_flight_.fetch_add(1);
  absl::Cleanup leave = [&] { in_flight_.fetch_sub(1); };
  // The router's --request-timeout-ms and the client's own deadline, from arrival: the wait for a
  // slot counts.
  const absl::Time deadline =
      std::min(clock_->Now() + absl::Milliseconds(options_.request_timeout_ms), options.deadline);
  absl::StatusOr<RouterRequest> built =
      BuildRequest(request, *model_, options.unset_max_tokens_fills_context);
  if (!built.ok()) {
    ++counters_->requests_invalid;
    const auto code = static_cast<grpc::StatusCode>(built.status().code());
    metrics_->RequestRefused(options.api, code);
    return grpc::Status(code, std::string(built.status().message()));
  }
  if (!options.request_id.empty()) built->request_id = options.request_id;
  if (!built->client_request_id.empty()) {
    spdlog::debug("{}: the client calls it {}", built->request_id, built->client_request_id);
  }
  if (std::optional<grpc::Status> refused = Admit(*built, deadline, options.api, sink)) {
    return *refused;
  }
  absl::Cleanup release = [&] { admission_.Release(); };
  metrics_->RequestStarted();
  ClientStream stream(&sink, *built, *model_->tokenizer, &timer, metrics_, clock_);
  grpc::Status status = RunBuilt(stream, deadline);
  metrics_->RequestFinished(options.api, status.error_code(), timer, clock_->Now(),
                            static_cast<int64_t>(built->prompt.size()), stream.completion_tokens,
                            stream.cached_tokens);
  return status;
}

std::optional<grpc::Status> RequestRunner::Admit(const RouterRequest& request, absl::Time deadline,
                                                 RequestApi api, ResponseSink& sink) {
  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  const bool must_wait = admission_.running() >= options_.max_concurrent_requests;
  const Admission admission =
      admission_.Admit(prompt_tokens, deadline, [&sink] { return sink.ClientGone(); });
  if (must_wait && admission != Admission::kQueueFull) ++counters_->queued;
  std::string why;
  switch (admission) {
    case Admission::kAdmitted:
      return std::nullopt;
    case Admission::kCancelled:
      ++counters_->requests_cancelled;
      metrics_->RequestRefused(api, grpc::StatusCode::CANCELLED);
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled");
    case Admission::kQueueFull:
      why = absl::StrCat("the router is running ", options_.max_concurrent_requests,
                         " requests and its queue is full (--max-queued-requests ",
                         options_.max_queued_requests, ", --max-queued-prompt-tokens ",
                         options_.max_queued_prompt_tokens, ")");
      break;
    case Admission::kTimedOut:
      if (clock_->Now() >= deadline) {
        ++counters_->requests_failed;
        metrics_->RequestRefused(api, grpc::StatusCode::DEADLINE_EXCEEDED);
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            WithRequestId("the request ran past its deadline waiting for a slot",
                                          request.request_id));
      }
      ++counters_->queue_timeouts;
      why = absl::StrCat("no slot freed within ", options_.queue_timeout_ms,
                         " ms (--queue-timeout-ms) among the ", options_.max_concurrent_requests,
                         " running requests");
      break;
  }
  ++counters_->requests_refused;
  metrics_->RequestRefused(api, grpc::StatusCode::RESOURCE_EXHAUSTED);
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      WithRequestId(absl::StrCat(why, "; retry later"), request.request_id));
}

grpc::Status RequestRunner::RunBuilt(ClientStream& stream, absl::Time deadline) {
  const RouterRequest& req = stream.request;
  auto guard = std::make_shared<CallGuard>(stream.sink, deadline);
  watchdog_.Add(guard);
  absl::Cleanup unwatch = [&] { watchdog_.Remove(guard); };

  std::vector<std::string> failed_nodes;
  // The last failed attempt's stage and code, in client-safe words ("" before any).
  std::string last;
  for (int attempt = 0;; ++attempt) {
    if (guard->client_cancelled()) {
      ++counters_->requests_cancelled;
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled");
    }
    if (guard->timed_out()) {
      ++counters_->requests_failed;
      return grpc::Status(
          grpc::StatusCode::DEADLINE_EXCEEDED,
          WithRequestId(attempt == 0 ? std::string("the request ran past its deadline")
                                     : absl::StrCat("the request ran past its deadline; last "
                                                    "error: ",
                                                    last),
                        req.request_id));
    }
    if (std::optional<grpc::Status> refused = WaitForKvRoom(req, *guard)) {
      ++(refused->error_code() == grpc::StatusCode::CANCELLED ? counters_->requests_cancelled
                                                              : counters_->requests_failed);
      return *refused;
    }
    absl::StatusOr<Chosen> chosen = Place(req, failed_nodes);
    if (!chosen.ok()) {
      ++counters_->no_node_available;
      ++counters_->requests_failed;
      std::string message(chosen.status().message());
      if (attempt > 0) absl::StrAppend(&message, "; last error: ", last);
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, WithRequestId(message, req.request_id));
    }
    switch (chosen->kind) {
      case PlacementKind::kDisaggregated:
        ++counters_->disaggregated;
        break;
      case PlacementKind::kLocalPrefill:
        ++(chosen->reason == PlacementReason::kNoPrefillNode
               ? counters_->local_prefill_no_prefill_node
               : counters_->local_prefill_short_prompt);
        break;
      case PlacementKind::kColocated:
        ++counters_->colocated;
        break;
    }
    spdlog::debug("{}: attempt {}: {} ({}) decode {}{} ({} of {} prompt tokens cached)",
                  req.request_id, attempt, PlacementKindName(chosen->kind),
                  PlacementReasonName(chosen->reason), chosen->decode->address(),
                  chosen->prefill ? absl::StrCat(" prefill ", chosen->prefill->address()) : "",
                  chosen->cached_prefix_tokens, req.prompt.size());

    const std::string node_request_id =
        attempt == 0 ? req.request_id : absl::StrCat(req.request_id, "#", attempt);
    stream.timer->Dispatched(clock_->Now());
    guard->SetAttemptDeadline(clock_->Now() + absl::Milliseconds(options_.first_token_timeout_ms));
    AttemptResult r = chosen->kind == PlacementKind::kDisaggregated
                          ? RunDisaggregated(*chosen, node_request_id, *guard, stream)
                          : RunLocal(*chosen, node_request_id, *guard, stream);
    guard->SetAttemptDeadline(absl::InfiniteFuture());
    if (r.status.ok()) {
      ++counters_->requests_ok;
      return grpc::Status::OK;
    }
    if (stream.client_gone || guard->client_cancelled()) {
      ++counters_->requests_cancelled;
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled");
    }
    if (guard->timed_out()) {
      ++counters_->requests_failed;
      spdlog::warn("{}: ran past its deadline: {}", req.request_id, r.status.error_message());
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          WithRequestId("the request ran past its deadline", req.request_id));
    }
    if (!r.retry || stream.sent_tokens || attempt >= options_.max_retries) {
      ++counters_->requests_failed;
      if (stream.sent_tokens) ++counters_->failed_after_first_token;
      spdlog::warn("{}: failed: {}", req.request_id, r.status.error_message());
      return ClientNodeError(r.status, r.reason, r.retry ? attempt + 1 : 1, req.request_id);
    }
    counters_->AddRetry(r.reason);
    spdlog::warn("{}: attempt {} failed ({}), retrying: {}", req.request_id, attempt,
                 RetryReasonName(r.reason), r.status.error_message());
    for (const auto& node : r.blame) failed_nodes.push_back(node->address());
    last = ClientNodeErrorText(r.status, r.reason, 1);
  }
}

}  // namespace tandem
