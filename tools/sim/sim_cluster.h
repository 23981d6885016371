// A whole simulated tandem cluster in one process and in virtual time (tools/sim/README.md): the
// router's placement (the project's Placer, fed load reports polled every load_poll_ms and the
// router's own count of what it placed since, as RequestRunner::Place does; one or several
// router replicas, sim_router.h) in front of SimNodes,
// and the open-loop workload of tandem-bench (its datasets and arrival times). Runs until every
// request has ended and returns one RequestResult per request, in the workload's order, timed as
// tandem-bench's client would see them.
//
// What is not the project's code is modelled: the router's own cost and the network hops (one
// constant each, measured on the real router; README), and the KV links (kv_link.h).
//
// In auto mode (ServingMode::kAuto) there are no prefill nodes: every node decodes and prefills
// for the others (tandem-decode --serve-prefill), one SimNode in both roles, and the routers
// count a node's placements of either role in one view, as RequestRunner::Place does.
//
// Disaggregated requests follow RequestFlow's path: Reserve on the decode node (it may wait for
// blocks) → the handoff back through the router → Prefill on the prefill node, whose blocks go
// over the link as each chunk finishes (the ones the decode node's prefix cache holds are not
// sent) → once the last write and the completion notice have landed, the decode node admits the
// request and streams its first token.
#ifndef TANDEM_TOOLS_SIM_SIM_CLUSTER_H_
#define TANDEM_TOOLS_SIM_SIM_CLUSTER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serve/bench_request.h"
#include "common/backend/sim/step_time_model.h"
#include "router/placement.h"
#include "tools/sim/sim_faults.h"

namespace tandem::sim {

struct SimClusterOptions {
  // The hardware and model every node stands for.
  std::string gpu = "h100";            // common/backend/sim/gpu_spec.h
  std::string model = "llama-3.1-8b";  // a preset (sim_model_presets.h) or a model directory
  int tensor_parallel = 1;
  // Per pool (disaggregated): GPUs per prefill node and per decode node; 0: tensor_parallel.
  int prefill_tensor_parallel = 0;
  int decode_tensor_parallel = 0;
  double memory_utilization = 0.9;
  int32_t num_kv_blocks = 0;  // > 0: this many per node instead of what fits
  // What the KV cache stores: its bytes per token set the block count, the decode steps' KV reads
  // and the bytes each handoff moves.
  DType kv_dtype = DType::kBF16;
  // The cluster.
  ServingMode mode = ServingMode::kColocated;
  int num_prefill = 0;  // disaggregated: prefill nodes (auto: none)
  int num_decode = 1;   // decode nodes (colocated and auto: every node)
  // Disaggregated: prompts whose uncached part is shorter prefill on the decode node.
  int64_t local_prefill_threshold = 0;
  // The KV links, one per (prefill, decode) node pair.
  double kv_link_gbps = 400;
  double kv_link_latency_us = 10;
  // Each node's engine.
  int32_t block_size = 16;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_num_seqs = 256;
  bool prefix_caching = true;
  // Speculative decoding on the nodes that decode (SimNodeConfig): drafts per step (0: off), and
  // the chance that each is right.
  int32_t num_speculative_tokens = 0;
  double spec_acceptance_rate = 0.7;
  // With num_speculative_tokens: the drafts come from this draft model (a preset or a model
  // directory), whose passes the decode nodes' steps pay for (SimNodeConfig::draft_model) and
  // whose weights and KV share their GPUs' memory (fewer KV blocks). Empty: drafts are free.
  std::string draft_model;
  // The router.
  PlacementPolicy policy = PlacementPolicy::kLeastLoaded;
  int64_t load_poll_ms = 500;  // the router's --health-interval-ms: how stale load reports are
  // The times (modelled ns, ascending) of the router's polls after the first at 0, as a real
  // router's log recorded them (tools/sim/validate.py), instead of one every load_poll_ms; after
  // the last, every load_poll_ms again. Only with num_routers == 1.
  std::vector<int64_t> load_poll_times_ns;
  // Router replicas: requests go to them in turn; each polls the nodes on its own phase and
  // places on its own view (sim_router.h), seeded placement_seed + its index.
  int num_routers = 1;
  uint64_t placement_seed = 0;
  // In-flight accounting by receipts (sim_router.h); false: each load report forgets what was
  // placed before it.
  bool placement_receipts = true;
  // The targets the cost policy places against (PlacementOptions::slo_*).
  double placement_slo_ttft_ms = 2000;
  double placement_slo_tpot_ms = 100;
  // The router's added latency to the first token (both directions: request in, token out),
  // split evenly between the two; and one network hop's one-way latency (client-router,
  // router-node).
  double router_overhead_us = 750;
  double hop_latency_us = 50;
  // Step over runs of decode steps in one jump (sim_node.h); false: every step an event. The
  // results are the same either way.
  bool step_jumps = true;
  // Nodes killed during the run (sim_faults.h).
  FaultOptions faults;
};

struct SimRunStats {
  int64_t events = 0;
  int64_t steps = 0;
  int64_t jumped_steps = 0;  // of `steps`, those inside runs stepped over in one jump
  int64_t decode_runs = 0;
  int64_t preemptions = 0;
  // Speculative decoding: sequences' steps that verified drafts, the drafts, the accepted ones.
  int64_t spec_verifications = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  // Draft model: its passes, and the virtual seconds they took (within the nodes' busy time).
  int64_t draft_passes = 0;
  double draft_busy_s = 0;
  int32_t decode_kv_blocks = 0;  // KV blocks of each decode (or colocated) node
  int64_t kv_bytes = 0;          // over the KV links
  int64_t kills = 0;             // nodes killed
  int64_t retries = 0;           // attempts retried from the prompt after a node died
  int64_t migrations = 0;        // requests moved on with their tokens so far after a node died
  int64_t load_polls = 0;        // rounds of load reports, over every router replica
  // Attempts placed, by PlacementReasonName (tandem_router_placements_total's reasons).
  std::map<std::string, int64_t> placements;
  // Attempts placed on each node (by pool index): a prefill node's disaggregated attempts, a
  // decode node's every attempt.
  std::vector<int64_t> placed_on_prefill;
  std::vector<int64_t> placed_on_decode;
  double simulated_s = 0;  // first arrival to the last event
  double wall_s = 0;
};

struct SimRun {
  std::vector<bench::RequestResult> results;  // in the workload's order
  SimRunStats stats;
};

// Runs `requests` (sent at `arrival_s[i]` seconds, or at their own timestamp_s when set) on a
// cluster built from `options`. InvalidArgument / NotFound for bad options (unknown GPU or model,
// a model that does not fit, sizes < 1).
absl::StatusOr<SimRun> RunSimulation(const SimClusterOptions& options,
                                     const std::vector<bench::BenchRequest>& requests,
                                     const std::vector<double>& arrival_s);

// Errors for options no cluster can run with (sizes < 1, poll times out of order, fewer arrival
// times than requests).
absl::Status ValidateSimClusterOptions(const SimClusterOptions& options, size_t num_requests,
                                       size_t num_arrivals);

// The step time model of `options`' GPU and model on `tensor_parallel` GPUs (0: the options').
absl::StatusOr<StepTimeModel> MakeStepTimeModel(const SimClusterOptions& options,
                                                int tensor_parallel = 0);
// The draft model's, on the decode nodes' GPUs (split as the target is); nullopt when the options
// speculate without one (or do not speculate).
absl::StatusOr<std::optional<StepTimeModel>> MakeDraftStepTimeModel(
    const SimClusterOptions& options);
// KV blocks per node of a pool on `model`'s GPUs (options.num_kv_blocks when set); with a draft
// model beside it, less the draft's weights, each block's tokens holding the draft's KV too.
absl::StatusOr<int32_t> KvBlocksPerNode(const SimClusterOptions& options,
                                        const StepTimeModel& model, const StepTimeModel* draft);

}  // namespace tandem::sim

#endif  // TANDEM_TOOLS_SIM_SIM_CLUSTER_H_
