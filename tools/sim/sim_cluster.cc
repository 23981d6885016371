#include "tools/sim/sim_cluster.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/backend/sim/gpu_spec.h"
#include "common/backend/sim/sim_model_presets.h"
#include "common/model/model_config.h"
#include "common/util/clock.h"
#include "common/util/status_macros.h"
#include "tools/sim/event_loop.h"
#include "tools/sim/kv_link.h"
#include "tools/sim/sim_node.h"

namespace tandem::sim {
namespace {

int64_t Nanos(double seconds) { return std::llround(seconds * 1e9); }
int64_t MicrosToNanos(double us) { return std::llround(us * 1e3); }
double Seconds(int64_t nanos) { return static_cast<double>(nanos) * 1e-9; }

absl::StatusOr<ModelConfig> ModelShape(const std::string& model) {
  absl::StatusOr<ModelConfig> preset = SimModelPreset(model);
  if (preset.ok()) return preset;
  absl::StatusOr<ModelConfig> dir = LoadModelConfig(model);
  if (dir.ok()) return dir;
  return absl::NotFoundError(absl::StrCat("--model ", model, ": neither a preset (",
                                          preset.status().message(), ") nor a model directory (",
                                          dir.status().message(), ")"));
}

// One request as the simulated client and router see it.
struct RequestState {
  int64_t sent = 0;  // the client's send time
  std::vector<int32_t> prompt;
  int32_t output_len = 0;
  std::vector<int64_t> token_times;  // at the client
  // Disaggregated: the nodes, the decode node's cached blocks, the writes in flight.
  int prefill = -1;
  int decode = -1;
  int32_t decode_cached_blocks = 0;
  int writes = 0;
  bool prefilled = false;
  bool completed = false;
  bool done = false;
  bool ok = false;
  std::string error;
};

// The router's view of one node: its last load report and what it placed there since.
struct NodeView {
  SimNodeLoad load;
  int64_t pending_requests = 0;
  int64_t pending_tokens = 0;
  int64_t pending_blocks = 0;
};

class Cluster {
 public:
  Cluster(const SimClusterOptions& options, const StepTimeModel* prefill_model,
          const StepTimeModel* decode_model)
      : options_(options),
        prefill_model_(prefill_model),
        decode_model_(decode_model),
        loop_(&clock_),
        placer_(PlacementOptions{.policy = options.policy,
                                 .mode = options.mode,
                                 .local_prefill_threshold = options.local_prefill_threshold}),
        router_half_(MicrosToNanos(options.router_overhead_us) / 2),
        hop_(MicrosToNanos(options.hop_latency_us)),
        link_latency_(MicrosToNanos(options.kv_link_latency_us)),
        block_bytes_(decode_model->KvBytesPerToken() * options.block_size) {}

  // KV blocks per node of a pool on `model`'s GPUs.
  absl::StatusOr<int32_t> BlocksPerNode(const StepTimeModel& model) const {
    if (options_.num_kv_blocks > 0) return options_.num_kv_blocks;
    ASSIGN_OR_RETURN(int64_t kv_bytes, model.KvCacheBytes(options_.memory_utilization));
    const int64_t n = kv_bytes / (model.KvBytesPerToken() * options_.block_size);
    if (n < 1 || n > INT32_MAX) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the KV cache of a TP ", model.tensor_parallel(), " node would have ", n, " blocks"));
    }
    return static_cast<int32_t>(n);
  }

  absl::Status Build() {
    ASSIGN_OR_RETURN(const int32_t decode_blocks, BlocksPerNode(*decode_model_));
    if (options_.mode == ServingMode::kDisaggregated && options_.num_prefill < 1) {
      return absl::InvalidArgumentError("--mode disaggregated needs --prefill >= 1");
    }
    const int num_prefill = options_.mode == ServingMode::kDisaggregated ? options_.num_prefill : 0;
    int32_t prefill_blocks = 0;
    if (num_prefill > 0) {
      ASSIGN_OR_RETURN(prefill_blocks, BlocksPerNode(*prefill_model_));
    }
    for (int role = 0; role < 2; ++role) {
      const bool prefill = role == 0;
      for (int i = 0; i < (prefill ? num_prefill : options_.num_decode); ++i) {
        SimNodeConfig config{
            .name = absl::StrCat(prefill ? "prefill-" : "decode-", i),
            .model = prefill ? prefill_model_ : decode_model_,
            .block_size = options_.block_size,
            .num_blocks = prefill ? prefill_blocks : decode_blocks,
            .scheduler = {.max_num_batched_tokens = options_.max_num_batched_tokens,
                          .max_num_seqs = options_.max_num_seqs},
            .prefix_caching = options_.prefix_caching,
            .step_jumps = options_.step_jumps,
        };
        ASSIGN_OR_RETURN(std::unique_ptr<SimNode> node,
                         SimNode::Create(std::move(config), &loop_, &clock_,
                                         prefill ? PrefillEvents(i) : DecodeEvents(i)));
        (prefill ? prefill_ : nodes_).push_back(std::move(node));
      }
    }
    prefill_views_.resize(prefill_.size());
    views_.resize(nodes_.size());
    return absl::OkStatus();
  }

  SimRun Run(const std::vector<bench::BenchRequest>& requests,
             const std::vector<double>& arrival_s) {
    const auto wall_start = std::chrono::steady_clock::now();
    states_.resize(requests.size());
    remaining_ = static_cast<int64_t>(requests.size());
    int64_t first_arrival = INT64_MAX;
    for (size_t i = 0; i < requests.size(); ++i) {
      const bench::BenchRequest& r = requests[i];
      RequestState& s = states_[i];
      const double at = r.timestamp_s.has_value() ? *r.timestamp_s : arrival_s[i];
      s.sent = Nanos(at);
      first_arrival = std::min(first_arrival, s.sent);
      s.output_len = r.output_len;
      s.prompt = r.prompt_ids;
      if (s.prompt.empty()) {  // a text prompt: stand-in ids of its length, its own per request
        for (int32_t j = 0; j < r.prompt_len; ++j) {
          s.prompt.push_back(1000 + static_cast<int32_t>((i * 7919 + j * 31) % 30000));
        }
      }
      loop_.At(s.sent + hop_, [this, i] { Arrive(i); });
    }
    Poll();
    loop_.Run();
    SimRun run;
    for (size_t i = 0; i < requests.size(); ++i) run.results.push_back(Result(i));
    run.stats.events = loop_.events_run();
    for (const auto* group : {&nodes_, &prefill_}) {
      for (const auto& node : *group) {
        run.stats.steps += node->num_steps();
        run.stats.jumped_steps += node->num_jumped_steps();
        run.stats.decode_runs += node->num_decode_runs();
        run.stats.preemptions += node->num_preemptions();
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
  SimNodeEvents DecodeEvents(int j) {
    return SimNodeEvents{
        .on_token = [this](uint64_t key, int32_t, int64_t at) { OnToken(key, at); },
        .on_finished = [this](uint64_t key, bool ok) { OnFinished(key, ok); },
        .on_reserved = [this, j](uint64_t key, int32_t cached) { OnReserved(key, j, cached); },
    };
  }

  SimNodeEvents PrefillEvents(int p) {
    return SimNodeEvents{
        .on_finished =
            [this](uint64_t key, bool ok) {
              if (!ok) Fail(key, "the prompt can never fit the prefill node's KV pool");
            },
        .on_blocks_ready = [this](uint64_t key, int32_t first,
                                  int32_t count) { OnBlocksReady(key, first, count); },
        .on_prefilled =
            [this](uint64_t key) {
              states_[key].prefilled = true;
              MaybeComplete(key);
            },
    };
  }

  // The router's load reports: every node's, every load_poll_ms, while requests remain.
  void Poll() {
    for (size_t j = 0; j < nodes_.size(); ++j) views_[j] = NodeView{.load = nodes_[j]->Load()};
    for (size_t p = 0; p < prefill_.size(); ++p) {
      prefill_views_[p] = NodeView{.load = prefill_[p]->Load()};
    }
    if (remaining_ > 0) loop_.After(options_.load_poll_ms * 1'000'000, [this] { Poll(); });
  }

  // A request reaches the router: placement as RequestRunner::Place does it, then the node.
  void Arrive(size_t i) {
    RequestState& s = states_[i];
    const int64_t prompt_tokens = static_cast<int64_t>(s.prompt.size());
    std::vector<NodeCandidate> decode;
    for (size_t j = 0; j < nodes_.size(); ++j) {
      const NodeView& v = views_[j];
      decode.push_back(NodeCandidate{
          .index = static_cast<int>(j),
          .address = nodes_[j]->name(),
          .free_kv_blocks = v.load.num_free_kv_blocks - v.pending_blocks,
          .queued_tokens = v.load.num_queued_tokens + v.pending_tokens,
          .num_sequences = v.load.num_running + v.load.num_waiting + v.pending_requests});
    }
    std::vector<NodeCandidate> prefill;
    // The prefill nodes' cached prefixes, as the router knows them from their KV events (here:
    // at once), when placement uses them (RequestRunner::Place's condition).
    const bool use_prefix =
        options_.policy == PlacementPolicy::kPrefixAware || options_.local_prefill_threshold > 0;
    for (size_t p = 0; p < prefill_.size(); ++p) {
      const NodeView& v = prefill_views_[p];
      prefill.push_back(NodeCandidate{
          .index = static_cast<int>(p),
          .address = prefill_[p]->name(),
          .free_kv_blocks = v.load.num_free_kv_blocks - v.pending_blocks,
          .queued_tokens = v.load.num_queued_tokens + v.pending_tokens,
          .num_sequences = v.load.num_running + v.load.num_waiting + v.pending_requests,
          .cached_prefix_tokens = use_prefix ? prefill_[p]->CachedPrefixTokens(s.prompt) : 0});
    }
    absl::StatusOr<Placement> placement = placer_.Choose(prefill, decode, prompt_tokens);
    if (!placement.ok()) {
      Fail(i, std::string(placement.status().message()));
      return;
    }
    const int j = placement->decode;
    NodeView& v = views_[j];
    const int64_t block_size = std::max(1, v.load.block_size);
    const bool local = placement->kind != PlacementKind::kDisaggregated;
    ++v.pending_requests;
    v.pending_tokens += local ? prompt_tokens : 0;
    v.pending_blocks += (prompt_tokens + s.output_len + block_size - 1) / block_size;
    s.decode = j;
    if (local) {
      loop_.After(router_half_ + hop_, [this, i, j] {
        RequestState& r = states_[i];
        nodes_[j]->Submit(i, r.prompt, r.output_len);
      });
      return;
    }
    s.prefill = placement->prefill;
    NodeView& pv = prefill_views_[s.prefill];
    ++pv.pending_requests;
    pv.pending_tokens += prompt_tokens - placement->cached_prefix_tokens;
    loop_.After(router_half_ + hop_, [this, i, j] {
      RequestState& r = states_[i];
      nodes_[j]->Reserve(i, r.prompt, r.output_len);
    });
  }

  // The decode node reserved: its handoff goes back through the router to the prefill node.
  void OnReserved(uint64_t key, int j, int32_t cached_tokens) {
    RequestState& s = states_[key];
    s.decode_cached_blocks = cached_tokens / options_.block_size;
    loop_.After(2 * hop_, [this, key] {
      RequestState& r = states_[key];
      prefill_[r.prefill]->SubmitPrefill(key, r.prompt);
    });
  }

  // Final blocks on the prefill node: one write of those the decode node lacks.
  void OnBlocksReady(uint64_t key, int32_t first, int32_t count) {
    RequestState& s = states_[key];
    const int32_t from = std::max(first, s.decode_cached_blocks);
    const int64_t blocks = std::max(0, first + count - from);
    if (blocks == 0) return;
    ++s.writes;
    Link(s.prefill, s.decode).Start(blocks * block_bytes_, [this, key] {
      --states_[key].writes;
      MaybeComplete(key);
    });
  }

  // Every write landed and the first token is sampled: the completion notice, then admission.
  void MaybeComplete(uint64_t key) {
    RequestState& s = states_[key];
    if (!s.prefilled || s.writes > 0 || s.completed) return;
    s.completed = true;
    prefill_[s.prefill]->ReleaseExport(key);
    loop_.After(link_latency_, [this, key] { nodes_[states_[key].decode]->CompleteImport(key); });
  }

  KvLink& Link(int p, int d) {
    std::unique_ptr<KvLink>& link = links_[{p, d}];
    if (link == nullptr) {
      link = std::make_unique<KvLink>(&loop_, options_.kv_link_gbps * 1e9 / 8, link_latency_);
    }
    return *link;
  }

  void OnToken(uint64_t key, int64_t at) {
    states_[key].token_times.push_back(at + hop_ + router_half_ + hop_);
  }

  void OnFinished(uint64_t key, bool ok) {
    if (!ok) {
      Fail(key, "the request can never fit the node's KV pool or context");
      return;
    }
    RequestState& s = states_[key];
    s.done = true;
    s.ok = true;
    --remaining_;
  }

  void Fail(size_t i, std::string error) {
    RequestState& s = states_[i];
    s.done = true;
    s.ok = false;
    s.error = std::move(error);
    --remaining_;
  }

  bench::RequestResult Result(size_t i) const {
    const RequestState& s = states_[i];
    bench::RequestResult r;
    r.success = s.done && s.ok && !s.token_times.empty();
    r.error = s.done ? s.error : "never finished";
    r.start_s = Seconds(s.sent);
    r.prompt_tokens = static_cast<int32_t>(s.prompt.size());
    r.output_tokens = static_cast<int32_t>(s.token_times.size());
    if (!s.token_times.empty()) {
      r.ttft_s = Seconds(s.token_times.front() - s.sent);
      r.e2e_s = Seconds(s.token_times.back() - s.sent);
      for (size_t k = 1; k < s.token_times.size(); ++k) {
        r.itl_s.push_back(Seconds(s.token_times[k] - s.token_times[k - 1]));
      }
    }
    return r;
  }

  const SimClusterOptions options_;
  const StepTimeModel* const prefill_model_;
  const StepTimeModel* const decode_model_;
  ManualClock clock_;
  EventLoop loop_;
  Placer placer_;
  const int64_t router_half_;
  const int64_t hop_;
  const int64_t link_latency_;
  const int64_t block_bytes_;
  std::vector<std::unique_ptr<SimNode>> nodes_;  // decode (or colocated) nodes
  std::vector<NodeView> views_;
  std::vector<std::unique_ptr<SimNode>> prefill_;
  std::vector<NodeView> prefill_views_;
  std::map<std::pair<int, int>, std::unique_ptr<KvLink>> links_;
  std::vector<RequestState> states_;
  int64_t remaining_ = 0;
};

}  // namespace

absl::StatusOr<StepTimeModel> MakeStepTimeModel(const SimClusterOptions& options,
                                                int tensor_parallel) {
  ASSIGN_OR_RETURN(GpuSpec gpu, FindGpuSpec(options.gpu));
  ASSIGN_OR_RETURN(ModelConfig model, ModelShape(options.model));
  return StepTimeModel::Create(gpu, model,
                               tensor_parallel > 0 ? tensor_parallel : options.tensor_parallel);
}

absl::StatusOr<SimRun> RunSimulation(const SimClusterOptions& options,
                                     const std::vector<bench::BenchRequest>& requests,
                                     const std::vector<double>& arrival_s) {
  if (options.num_decode < 1) return absl::InvalidArgumentError("--decode must be >= 1");
  if (options.load_poll_ms < 1) return absl::InvalidArgumentError("--load-poll-ms must be >= 1");
  if (arrival_s.size() < requests.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(requests.size(), " requests but ", arrival_s.size(), " arrival times"));
  }
  if (options.tensor_parallel < 1 || options.prefill_tensor_parallel < 0 ||
      options.decode_tensor_parallel < 0) {
    return absl::InvalidArgumentError("tensor parallelism must be >= 1");
  }
  ASSIGN_OR_RETURN(StepTimeModel prefill_model,
                   MakeStepTimeModel(options, options.prefill_tensor_parallel));
  ASSIGN_OR_RETURN(StepTimeModel decode_model,
                   MakeStepTimeModel(options, options.decode_tensor_parallel));
  Cluster cluster(options, &prefill_model, &decode_model);
  RETURN_IF_ERROR(cluster.Build());
  return cluster.Run(requests, arrival_s);
}

}  // namespace tandem::sim
