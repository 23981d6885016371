#include "tools/sim/sim_cluster.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/serve/datasets.h"
#include "common/util/clock.h"
#include "common/util/status_macros.h"
#include "router/attempt_verdict.h"
#include "router/auto_mode.h"
#include "tools/sim/event_loop.h"
#include "tools/sim/kv_link.h"
#include "tools/sim/sim_node.h"
#include "tools/sim/sim_request.h"
#include "tools/sim/sim_router.h"

namespace tandem::sim {
namespace {

int64_t Nanos(double seconds) { return std::llround(seconds * 1e9); }
int64_t MicrosToNanos(double us) { return std::llround(us * 1e3); }
double Seconds(int64_t nanos) { return static_cast<double>(nanos) * 1e-9; }

class Cluster {
 public:
  Cluster(const SimClusterOptions& options, const StepTimeModel* prefill_model,
          const StepTimeModel* decode_model, const StepTimeModel* draft_model)
      : options_(options),
        prefill_model_(prefill_model),
        decode_model_(decode_model),
        draft_model_(draft_model),
        auto_(options.mode == ServingMode::kAuto),
        loop_(&clock_),
        router_half_(MicrosToNanos(options.router_overhead_us) / 2),
        hop_(MicrosToNanos(options.hop_latency_us)),
        link_latency_(MicrosToNanos(options.kv_link_latency_us)),
        block_bytes_(decode_model->KvBytesPerToken() * options.block_size),
        kill_rng_(options.faults.seed) {}

  absl::Status Build() {
    ASSIGN_OR_RETURN(decode_blocks_, KvBlocksPerNode(options_, *decode_model_, draft_model_));
    if (options_.mode == ServingMode::kDisaggregated && options_.num_prefill < 1) {
      return absl::InvalidArgumentError("--mode disaggregated needs --prefill >= 1");
    }
    if (auto_ && options_.num_prefill > 0) {
      return absl::InvalidArgumentError(
          "--mode auto runs no prefill nodes (every node prefills for the others): drop --prefill");
    }
    const int num_prefill = options_.mode == ServingMode::kDisaggregated ? options_.num_prefill : 0;
    if (num_prefill > 0) {
      ASSIGN_OR_RETURN(prefill_blocks_, KvBlocksPerNode(options_, *prefill_model_, nullptr));
    }
    for (int role = 0; role < 2; ++role) {
      const bool prefill = role == 0;
      for (int i = 0; i < (prefill ? num_prefill : options_.num_decode); ++i) {
        ASSIGN_OR_RETURN(std::unique_ptr<SimNode> node, MakeNode(prefill, i));
        Pool(prefill).push_back(std::move(node));
      }
    }
    stats_.placed_on_prefill.assign(PrefillPool().size(), 0);
    stats_.placed_on_decode.assign(nodes_.size(), 0);
    if (options_.num_routers < 1) return absl::InvalidArgumentError("--routers must be >= 1");
    for (int r = 0; r < options_.num_routers; ++r) {
      const PlacementOptions placement{
          .policy = options_.policy,
          .mode = options_.mode,
          .local_prefill_threshold = options_.local_prefill_threshold,
          .slo_ttft_ms = options_.placement_slo_ttft_ms,
          .slo_tpot_ms = options_.placement_slo_tpot_ms,
          .disaggregation_hop_us = 2 * options_.hop_latency_us,
          .kv_bytes_per_token = static_cast<double>(decode_model_->KvBytesPerToken()),
          .kv_link_gbps = options_.kv_link_gbps,
          .seed = options_.placement_seed + static_cast<uint64_t>(r),
      };
      routers_.push_back(std::make_unique<SimRouter>(
          placement, options_.placement_receipts, 4 * options_.load_poll_ms * 1'000'000,
          static_cast<int>(prefill_.size()), static_cast<int>(nodes_.size())));
    }
    const FaultOptions& f = options_.faults;
    if (f.max_retries < 0 || f.migration_limit < 0 ||
        f.max_retries + f.migration_limit >= kMaxAttempts) {
      return absl::InvalidArgumentError(absl::StrCat("retries + migrations must be below ",
                                                     kMaxAttempts, " attempts per request"));
    }
    if (f.kill_random_node_every_s < 0 || f.node_restart_s < 0) {
      return absl::InvalidArgumentError(
          "--kill-random-node-every and --node-restart-s must be >= 0");
    }
    for (const NodeKill& kill : f.kills) {
      if (!FindNode(kill.node).has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("--kill-node-at: no node named ", kill.node,
                                                       " (prefill-0..", prefill_.size(),
                                                       " - 1, decode-0..", nodes_.size(), " - 1)"));
      }
    }
    return absl::OkStatus();
  }

  SimRun Run(const std::vector<bench::BenchRequest>& requests,
             const std::vector<double>& arrival_s) {
    const auto wall_start = std::chrono::steady_clock::now();
    requests_ = &requests;
    states_.resize(requests.size());
    remaining_ = static_cast<int64_t>(requests.size());
    int64_t first_arrival = INT64_MAX;
    std::vector<int64_t> place_at(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const bench::BenchRequest& r = requests[i];
      RequestState& s = states_[i];
      const double at = r.timestamp_s.has_value() ? *r.timestamp_s : arrival_s[i];
      s.sent = Nanos(at);
      s.router = static_cast<int>(i % static_cast<size_t>(options_.num_routers));
      first_arrival = std::min(first_arrival, s.sent);
      s.output_len = r.output_len;
      s.prompt_len =
          r.prompt_ids.empty() ? r.prompt_len : static_cast<int32_t>(r.prompt_ids.size());
      place_at[i] = s.sent + hop_;
    }
    loop_.AtEach(place_at, [this](size_t i) { Place(i); });
    ScheduleFaults();
    // Every replica has polled once before the workload starts (routers run before traffic
    // does); then each polls on its own phase, spread over the period.
    for (int r = 0; r < options_.num_routers; ++r) {
      loop_.At(0, [this, r] {
        Poll(r, false);
        const int64_t phase = options_.load_poll_ms * 1'000'000 * r / options_.num_routers;
        if (options_.load_poll_times_ns.empty()) {
          loop_.After(phase > 0 ? phase : options_.load_poll_ms * 1'000'000,
                      [this, r] { Poll(r); });
        }
      });
    }
    const std::vector<int64_t>& polls = options_.load_poll_times_ns;
    for (size_t k = 0; k < polls.size(); ++k) {
      loop_.At(polls[k], [this, last = k + 1 == polls.size()] { Poll(0, last); });
    }
    loop_.Run();
    SimRun run;
    run.stats = stats_;
    run.results.reserve(states_.size());
    for (RequestState& s : states_) run.results.push_back(ResultOf(std::move(s)));
    run.stats.events = loop_.events_run();
    run.stats.decode_kv_blocks = decode_blocks_;
    for (const auto* group : {&nodes_, &prefill_, &graveyard_}) {
      for (const auto& node : *group) {
        run.stats.steps += node->num_steps();
        run.stats.jumped_steps += node->num_jumped_steps();
        run.stats.decode_runs += node->num_decode_runs();
        run.stats.preemptions += node->num_preemptions();
        run.stats.spec_verifications += node->num_spec_verifications();
        run.stats.spec_draft_tokens += node->num_spec_draft_tokens();
        run.stats.spec_accepted_tokens += node->num_spec_accepted_tokens();
        run.stats.draft_passes += node->num_draft_passes();
        run.stats.draft_busy_s += Seconds(node->draft_nanos());
      }
    }
    for (const auto& [pair, link] : links_) run.stats.kv_bytes += link->bytes_moved();
    run.stats.simulated_s =
        requests.empty() ? 0 : Seconds(loop_.now() - std::min<int64_t>(first_arrival, 0));
    run.stats.wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    return run;
  }

 private:
  absl::StatusOr<std::unique_ptr<SimNode>> MakeNode(bool prefill, int i) {
    SimNodeConfig config{
        .name = absl::StrCat(prefill ? "prefill-" : "decode-", i),
        .model = prefill ? prefill_model_ : decode_model_,
        .block_size = options_.block_size,
        .num_blocks = prefill ? prefill_blocks_ : decode_blocks_,
        .scheduler = {.max_num_batched_tokens = options_.max_num_batched_tokens,
                      .max_num_seqs = options_.max_num_seqs},
        .prefix_caching = options_.prefix_caching,
        .step_jumps = options_.step_jumps,
        .num_speculative_tokens = prefill ? 0 : options_.num_speculative_tokens,
        .spec_acceptance_rate = options_.spec_acceptance_rate,
        .draft_model = prefill ? nullptr : draft_model_,
    };
    return SimNode::Create(std::move(config), &loop_, &clock_,
                           prefill ? PrefillEvents() : (auto_ ? AutoEvents(i) : DecodeEvents()));
  }

  std::vector<std::unique_ptr<SimNode>>& Pool(bool prefill) { return prefill ? prefill_ : nodes_; }
  // The nodes that prefill for others: the prefill pool; in auto mode the decode nodes, whose
  // placements of either role the routers count in their decode views.
  std::vector<std::unique_ptr<SimNode>>& PrefillPool() { return auto_ ? nodes_ : prefill_; }
  bool prefill_view() const { return !auto_; }

  std::optional<std::pair<bool, int>> FindNode(const std::string& name) const {
    for (int role = 0; role < 2; ++role) {
      const auto& pool = role == 0 ? prefill_ : nodes_;
      for (size_t i = 0; i < pool.size(); ++i) {
        if (pool[i]->name() == name) return std::make_pair(role == 0, static_cast<int>(i));
      }
    }
    return std::nullopt;
  }

  // The current attempt of the request `key` belongs to, or nullptr for an abandoned attempt's.
  RequestState* Current(uint64_t key) {
    RequestState& s = states_[RequestOf(key)];
    return !s.done && s.attempt == AttemptOf(key) ? &s : nullptr;
  }

  SimNodeEvents DecodeEvents() {
    return SimNodeEvents{
        .on_token =
            [this](uint64_t key, int32_t, int64_t at) {
              if (RequestState* s = Current(key)) {
                s->NoteToken(at + hop_ + router_half_ + hop_);
              }
            },
        .on_finished =
            [this](uint64_t key, bool ok) {
              if (Current(key) == nullptr) return;
              if (ok) {
                Finish(RequestOf(key));
              } else {
                Fail(RequestOf(key), "the request can never fit the node's KV pool or context");
              }
            },
        .on_reserved = [this](uint64_t key, int32_t cached) { OnReserved(key, cached); },
    };
  }

  SimNodeEvents PrefillEvents() {
    return SimNodeEvents{
        .on_finished =
            [this](uint64_t key, bool ok) {
              if (!ok && Current(key) != nullptr) {
                Fail(RequestOf(key), "the prompt can never fit the prefill node's KV pool");
              }
            },
        .on_blocks_ready = [this](uint64_t key, int32_t first,
                                  int32_t count) { OnBlocksReady(key, first, count); },
        .on_prefilled =
            [this](uint64_t key) {
              if (RequestState* s = Current(key)) {
                s->prefilled = true;
                MaybeComplete(key);
              }
            },
    };
  }

  // Auto mode: node i decodes some requests and prefills others; each event goes to the role the
  // node has in its request.
  SimNodeEvents AutoEvents(int i) {
    SimNodeEvents events = DecodeEvents();
    SimNodeEvents prefill = PrefillEvents();
    events.on_blocks_ready = std::move(prefill.on_blocks_ready);
    events.on_prefilled = std::move(prefill.on_prefilled);
    // A prefill for another node that ended without its first token could not be scheduled
    // (all blocks held by reservations awaiting KV: a circular wait between the nodes); the
    // router sees Prefill fail RESOURCE_EXHAUSTED.
    events.on_finished = [this, i, as_decode = std::move(events.on_finished)](uint64_t key,
                                                                              bool ok) {
      const RequestState* s = Current(key);
      if (s == nullptr || s->prefill_node != nodes_[i].get()) return as_decode(key, ok);
      if (!ok) JudgeAttempt(RequestOf(key), /*refused_prefill=*/true, false);
    };
    return events;
  }

  // Router replica r's load reports: every live node's, every load_poll_ms (after the listed
  // load_poll_times_ns, when there are), while requests remain. A node back from a kill is up again
  // from its first report.
  void Poll(int r, bool again = true) {
    ++stats_.load_polls;
    for (int role = 0; role < 2; ++role) {
      const bool prefill = role == 0;
      for (size_t j = 0; j < Pool(prefill).size(); ++j) {
        SimNode* node = Pool(prefill)[j].get();
        if (node->dead()) {
          routers_[r]->MarkDown(prefill, static_cast<int>(j));
        } else {
          routers_[r]->Report(prefill, static_cast<int>(j), node->Load(), loop_.now());
        }
      }
    }
    if (again && remaining_ > 0) {
      loop_.After(options_.load_poll_ms * 1'000'000, [this, r] { Poll(r); });
    }
  }

  // A pool's candidates: nodes up, less those earlier attempts blamed (RequestRunner::Place).
  std::vector<NodeCandidate> Candidates(bool prefill, const RequestState& s) {
    std::vector<NodeCandidate> all, preferred;  // preferred: those not avoided, when some are
    const bool cost = options_.policy == PlacementPolicy::kCost;
    const bool use_prefix = options_.policy == PlacementPolicy::kPrefixAware || cost ||
                            options_.local_prefill_threshold > 0;
    const SimRouter& router = *routers_[s.router];
    const auto& pool = prefill ? PrefillPool() : nodes_;
    const bool view = prefill && prefill_view();  // the routers' view these nodes are in
    all.reserve(pool.size());
    PromptBlockNames names(s.prompt, options_.block_size);  // named once for every node
    for (size_t j = 0; j < pool.size(); ++j) {
      const int index = static_cast<int>(j);
      if (router.down(view, index)) continue;
      NodeCandidate c = prefill && auto_ ? router.AutoPrefillCandidate(index, pool[j]->name())
                                         : router.Candidate(view, index, pool[j]->name());
      // Cached prefixes, as the router learns them from KV events (here: at once), where placement
      // uses them (RequestRunner::Place): prefill nodes', and decode nodes' for the cost model.
      if (prefill ? use_prefix : cost)
        c.cached_prefix_tokens = pool[j]->CachedPrefixTokens(s.prompt, &names);
      // Auto mode: a node prefills for another only with room for the prompt (auto_mode.h).
      const int64_t prompt_tokens = static_cast<int64_t>(s.prompt.size());
      if (prefill && auto_ && !HasRoomToPrefill(c, prompt_tokens, options_.block_size)) continue;
      if (!s.avoid.empty() && std::find(s.avoid.begin(), s.avoid.end(),
                                        std::make_pair(view, c.index)) == s.avoid.end()) {
        preferred.push_back(c);
      }
      all.push_back(std::move(c));
    }
    return preferred.empty() ? std::move(all) : std::move(preferred);
  }

  // Places the request's current attempt, as RequestRunner::Place does, and sends it on. A
  // migrated request recomputes its prompt and the tokens so far on a decode node.
  void Place(size_t i) {
    RequestState& s = states_[i];
    if (s.done) return;
    // Built at placement (again for a retry once handed on), with room for the whole sequence.
    if (s.prompt.empty()) s.prompt = PromptIds((*requests_)[i], i, s.prompt_len + s.output_len);
    const bool migrated = s.migrations > 0;
    const int32_t output = s.output_len - s.num_tokens;
    const std::vector<NodeCandidate> decode = Candidates(false, s);
    const std::vector<NodeCandidate> prefill =
        migrated ? std::vector<NodeCandidate>{} : Candidates(true, s);
    const int64_t prompt_tokens = static_cast<int64_t>(s.prompt.size()) + s.num_tokens;
    SimRouter& router = *routers_[s.router];
    absl::StatusOr<Placement> placement =
        router.placer().Choose(prefill, decode, prompt_tokens, output);
    if (!placement.ok()) {
      Fail(i, std::string(placement.status().message()) +
                  (s.attempt > 0 ? absl::StrCat("; last error: ", s.error) : ""));
      return;
    }
    if (migrated) {
      placement->kind = PlacementKind::kLocalPrefill;
      placement->reason = PlacementReason::kMigration;
    }
    ++stats_.placements[std::string(PlacementReasonName(placement->reason))];
    ++stats_.placed_on_decode[placement->decode];
    if (placement->kind == PlacementKind::kDisaggregated)
      ++stats_.placed_on_prefill[placement->prefill];
    const int j = placement->decode;
    const int64_t block_size = router.block_size(j);
    const bool local = placement->kind != PlacementKind::kDisaggregated;
    const int64_t now = loop_.now();
    s.decode_seq = router.NotePlaced(
        false, j,
        {.placed_at = now,
         .queued_tokens = local ? prompt_tokens - placement->decode_cached_prefix_tokens : 0,
         .blocks = (prompt_tokens + output + block_size - 1) / block_size,
         .context_tokens = prompt_tokens});
    s.kind = placement->kind;
    s.decode = j;
    s.decode_node = nodes_[j].get();
    const uint64_t key = NodeKey(i, s.attempt);
    if (!local) {
      s.prefill = placement->prefill;
      s.prefill_node = PrefillPool()[s.prefill].get();
      int64_t held = 0;  // auto mode: the prompt's blocks the prefill holds there
      for (const NodeCandidate& c : prefill) {
        if (auto_ && c.index == s.prefill)
          held = PrefillHeldBlocks(c, prompt_tokens, options_.block_size);
      }
      s.prefill_seq =
          router.NotePlaced(prefill_view(), s.prefill,
                            {.placed_at = now,
                             .queued_tokens = prompt_tokens - placement->cached_prefix_tokens,
                             .blocks = held});
    }
    // A local prefill takes the prompt; a reservation gets a copy and the prefill node the
    // prompt itself (OnReserved).
    std::vector<int32_t> prompt = local ? TakeAttemptPrompt(s, i) : CopyPrompt(s);
    loop_.After(router_half_ + hop_,
                [this, key, local, prompt = std::move(prompt), output]() mutable {
                  RequestState* r = Current(key);
                  if (r == nullptr || r->decode_node->dead()) return;  // the kill already judged it
                  routers_[r->router]->NoteDelivered(false, r->decode, r->decode_seq, loop_.now());
                  if (local) {
                    r->decode_node->Submit(key, std::move(prompt), output);
                  } else {
                    r->decode_node->Reserve(key, std::move(prompt), output);
                  }
                });
  }

  // The decode node reserved: its handoff goes back through the router to the prefill node.
  void OnReserved(uint64_t key, int32_t cached_tokens) {
    RequestState* s = Current(key);
    if (s == nullptr) return;
    s->reserved = true;
    s->decode_cached_blocks = cached_tokens / options_.block_size;
    loop_.After(2 * hop_, [this, key] {
      RequestState* r = Current(key);
      if (r == nullptr || r->prefill_node->dead()) return;
      routers_[r->router]->NoteDelivered(prefill_view(), r->prefill, r->prefill_seq, loop_.now());
      r->prefill_node->SubmitPrefill(key, std::move(r->prompt));
    });
  }

  // Final blocks on the prefill node: one write of those the decode node lacks.
  void OnBlocksReady(uint64_t key, int32_t first, int32_t count) {
    RequestState* s = Current(key);
    if (s == nullptr) return;
    const int32_t from = std::max(first, s->decode_cached_blocks);
    const int64_t blocks = std::max(0, first + count - from);
    if (blocks == 0) return;
    ++s->writes;
    Link(s->prefill, s->decode).Start(blocks * block_bytes_, [this, key] {
      if (RequestState* r = Current(key)) {
        --r->writes;
        MaybeComplete(key);
      }
    });
  }

  // Every write landed and the first token is sampled: the completion notice, then admission.
  void MaybeComplete(uint64_t key) {
    RequestState& s = states_[RequestOf(key)];
    if (!s.prefilled || s.writes > 0 || s.completed) return;
    s.completed = true;
    s.prefill_node->ReleaseExport(key);
    loop_.After(link_latency_, [this, key] {
      RequestState* r = Current(key);
      if (r != nullptr && !r->decode_node->dead()) r->decode_node->CompleteImport(key);
    });
  }

  KvLink& Link(int p, int d) {
    std::unique_ptr<KvLink>& link = links_[{p, d}];
    if (link == nullptr) {
      link = std::make_unique<KvLink>(&loop_, options_.kv_link_gbps * 1e9 / 8, link_latency_);
    }
    return *link;
  }

  void ScheduleFaults() {
    for (const NodeKill& kill : options_.faults.kills) {
      const auto [prefill, index] = *FindNode(kill.node);
      loop_.At(Nanos(kill.at_s), [this, prefill, index] { KillNode(prefill, index); });
    }
    if (options_.faults.kill_random_node_every_s > 0) ScheduleRandomKill();
  }

  void ScheduleRandomKill() {
    loop_.After(Nanos(options_.faults.kill_random_node_every_s), [this] {
      if (remaining_ == 0) return;
      std::vector<std::pair<bool, int>> alive;
      for (int role = 0; role < 2; ++role) {
        for (size_t j = 0; j < Pool(role == 0).size(); ++j) {
          if (!Pool(role == 0)[j]->dead()) alive.emplace_back(role == 0, static_cast<int>(j));
        }
      }
      if (!alive.empty()) {
        const auto [prefill, index] = alive[kill_rng_() % alive.size()];
        KillNode(prefill, index);
      }
      ScheduleRandomKill();
    });
  }

  // A node dies: the router sees its calls break at once and judges each attempt they carried.
  void KillNode(bool prefill, int index) {
    SimNode* node = Pool(prefill)[index].get();
    if (node->dead()) return;
    node->Kill();
    for (auto& router : routers_) router->MarkDown(prefill, index);
    ++stats_.kills;
    if (options_.faults.node_restart_s > 0) {
      loop_.After(Nanos(options_.faults.node_restart_s), [this, prefill, index] {
        graveyard_.push_back(std::move(Pool(prefill)[index]));
        Pool(prefill)[index] = *MakeNode(prefill, index);  // as it was built: cannot fail
      });
    }
    for (size_t i = 0; i < states_.size(); ++i) {
      RequestState& s = states_[i];
      if (s.done) continue;
      const bool decode_died = s.decode_node == node;
      // A prefill node's part is over once its completion notice left.
      if (!decode_died && (s.prefill_node != node || s.completed)) continue;
      JudgeAttempt(i, /*refused_prefill=*/false, decode_died);
    }
  }

  // RequestRunner's Apply and RequestFlow's next step, on JudgeAttempt's verdict about the
  // request's current attempt: one of its nodes died (which: `decode_died`), or its prefill node
  // could not schedule the prompt (`refused_prefill`).
  void JudgeAttempt(size_t i, bool refused_prefill, bool decode_died) {
    RequestState& s = states_[i];
    const KilledAttempt attempt{
        .kind = s.kind,
        .decode_died = decode_died,
        .reserved = s.reserved,
        .prefilled = s.prefilled,
        .sent_tokens = s.num_tokens > 0,
        .decode_name = s.decode_node->name(),
        .prefill_name = s.prefill_node != nullptr ? s.prefill_node->name() : ""};
    const AttemptVerdict v = tandem::JudgeAttempt(refused_prefill ? FactsOfRefusedPrefill(attempt)
                                                                  : FactsOfKilledAttempt(attempt));
    const uint64_t key = NodeKey(i, s.attempt);
    for (auto [cancel, node] : {std::make_pair(v.cancel_prefill, s.prefill_node),
                                std::make_pair(v.cancel_decode, s.decode_node)}) {
      if (!cancel || node == nullptr || node->dead()) continue;
      loop_.After(router_half_ + hop_, [node, key] {
        if (!node->dead()) node->Cancel(key);
      });
    }
    if (v.blame_decode) s.avoid.emplace_back(false, s.decode);
    if (v.blame_prefill && s.prefill >= 0) s.avoid.emplace_back(prefill_view(), s.prefill);
    s.error = v.status.error_message();
    const FaultOptions& f = options_.faults;
    if (attempt.sent_tokens && v.migrate && s.migrations < f.migration_limit) {
      ++s.migrations;
      ++stats_.migrations;
    } else if (v.retry && !attempt.sent_tokens && s.attempt < f.max_retries) {
      ++stats_.retries;
    } else {
      Fail(i, s.error);
      return;
    }
    s.NewAttempt();
    // The broken call reaches the router one hop later; it places the next attempt then.
    loop_.After(hop_, [this, i] { Place(i); });
  }

  void Finish(size_t i) {
    RequestState& s = states_[i];
    s.done = true;
    s.ok = true;
    s.error.clear();
    End(s);
  }

  void Fail(size_t i, std::string error) {
    RequestState& s = states_[i];
    s.done = true;
    s.ok = false;
    s.error = std::move(error);
    End(s);
  }

  void End(RequestState& s) {
    std::vector<int32_t>().swap(s.prompt);  // a long run holds only the prompts in flight
    --remaining_;
  }

  const SimClusterOptions options_;
  const StepTimeModel* const prefill_model_;
  const StepTimeModel* const decode_model_;
  const StepTimeModel* const draft_model_;  // null: drafts are free
  const bool auto_;  // ServingMode::kAuto: the decode nodes prefill for each other
  ManualClock clock_;
  EventLoop loop_;
  const int64_t router_half_;
  const int64_t hop_;
  const int64_t link_latency_;
  const int64_t block_bytes_;
  int32_t decode_blocks_ = 0;
  int32_t prefill_blocks_ = 0;
  std::vector<std::unique_ptr<SimNode>> nodes_;  // decode (or colocated) nodes
  std::vector<std::unique_ptr<SimNode>> prefill_;
  std::vector<std::unique_ptr<SimRouter>> routers_;  // the router replicas
  // Killed nodes, kept so that events already scheduled on them find them dead.
  std::vector<std::unique_ptr<SimNode>> graveyard_;
  std::map<std::pair<int, int>, std::unique_ptr<KvLink>> links_;
  const std::vector<bench::BenchRequest>* requests_ = nullptr;  // during Run
  std::vector<RequestState> states_;
  int64_t remaining_ = 0;
  std::mt19937_64 kill_rng_;
  SimRunStats stats_;
};

}  // namespace

absl::StatusOr<SimRun> RunSimulation(const SimClusterOptions& options,
                                     const std::vector<bench::BenchRequest>& requests,
                                     const std::vector<double>& arrival_s) {
  RETURN_IF_ERROR(ValidateSimClusterOptions(options, requests.size(), arrival_s.size()));
  ASSIGN_OR_RETURN(StepTimeModel prefill_model,
                   MakeStepTimeModel(options, options.prefill_tensor_parallel));
  ASSIGN_OR_RETURN(StepTimeModel decode_model,
                   MakeStepTimeModel(options, options.decode_tensor_parallel));
  ASSIGN_OR_RETURN(std::optional<StepTimeModel> draft_model, MakeDraftStepTimeModel(options));
  Cluster cluster(options, &prefill_model, &decode_model,
                  draft_model.has_value() ? &*draft_model : nullptr);
  RETURN_IF_ERROR(cluster.Build());
  return cluster.Run(requests, arrival_s);
}

}  // namespace tandem::sim
