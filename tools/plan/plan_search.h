// tandem-plan's search: the cluster configuration with the highest goodput per GPU for a GPU
// budget, an SLO on latency percentiles and a workload, found by running configurations at
// request rates through a ConfigEvaluator (tandem-sim in the binary, a fake with known answers in
// the tests). Pure logic: no clock, no I/O; the same evaluator answers give the same search.
//
// Goodput of a configuration: the highest rate at which its run meets the SLO (JudgeProbe), found
// by a rate search; the figure of merit is goodput / GPUs used. The search:
//
//   0. Tensor-parallel sizes: each of space.tensor_parallel the model does not fit
//      (CheckTensorParallel) is skipped, with the evaluator's reason.
//   1. Shapes, at the base knobs (the middle chunk size, the first threshold and policy):
//      a. colocated: floor(gpus / tp) nodes of each usable tp; auto (when searched) the same
//         shapes, every node also prefilling for the others;
//      b. disaggregated, the same tp in both pools: the split coarse to fine: prefill nodes P at
//         1/8 .. 7/8 of the budget, D = floor((gpus - P tp) / tp); then around the best P, P +-
//         half the coarse spacing, halving down to 1;
//      c. disaggregated, mixed tp (tpP != tpD): P0 from the prefill share of GPUs of the best
//         disaggregated configuration so far; P0 - 1, P0, P0 + 1 for every pair; then, for each
//         pair whose best of those is not P0, on in that direction, one prefill node at a time,
//         while that improves (each batch takes two steps of every climbing pair, the second
//         kept only when the first improved, and a jump to the nearest count in that direction
//         at which the decode pool changes size, kept whenever it improves: between two such
//         counts only the prefill pool changes, a plateau for a decode-bound split).
//   2. Knobs, coordinate descent on the `refine_shapes` best shapes: each chunk size, then (if
//      disaggregated or auto) each local prefill threshold, then each policy, keeping the best of
//      each.
//      A variant's bar is at least its shape's best goodput so far times 1 + tolerance: a knob
//      that does not beat the current one by more than the tolerance is pruned at one probe.
//   3. Every configuration evaluated once (memo); the result lists them all.
// Configurations are evaluated in batches (each list above: a coarse grid, a pair of neighbours,
// the knob values of every shape), up to `parallelism` at once. Every configuration of a batch is
// searched against the bar and best as they stood when the batch began, and the results are kept
// in the batch's order, so the search is the same whatever the parallelism.
//
// The rate search of one configuration (numbered as in EvaluateConfig):
//   1. The bar: once `top` configurations have an exact goodput, a new one must reach the
//      top-th best goodput per GPU to enter the table; it is probed at that rate first, and a
//      failure ends its search (pruned: goodput below the bar, the breach at the bar recorded).
//      A pass is followed by a probe at the best goodput per GPU so far (when that is higher).
//   2. Without a bar: the first probe at the best goodput per GPU so far times its GPUs (none so
//      far: start_rate_per_gpu).
//   3. Expand up (after a pass) or down (after a fail) by a factor that starts at
//      (1 + tolerance)^2 (2 while no configuration has a goodput) and squares at each step, until
//      the SLO's verdict flips, above max_rate (goodput at least the last rate) or below min_rate
//      (goodput 0).
//   4. Bisect (geometric midpoint) until the failing rate is within 1 + tolerance of the passing
//      one. The goodput is the highest passing rate; the probe at the lowest failing rate says
//      which SLO breaks first.
// A probe with screen_share < 1 first runs that share of the requests (same arrivals, cut short);
// if that already breaks the SLO the rate fails without the full run (from an empty cluster,
// queues and latencies only grow over a run at a rate above capacity), else the full run decides.
#ifndef TANDEM_TOOLS_PLAN_PLAN_SEARCH_H_
#define TANDEM_TOOLS_PLAN_PLAN_SEARCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/plan/plan_config.h"

namespace tandem::plan {

// Runs configurations. Deterministic implementations make the search deterministic. With
// PlanSearchOptions::parallelism > 1, Probe is called from that many threads at once.
class ConfigEvaluator {
 public:
  virtual ~ConfigEvaluator() = default;
  // OK when a node of `tp` GPUs holds the model (with room for KV); else why not.
  virtual absl::Status CheckTensorParallel(int tp) = 0;
  // Runs `config` at `rate` requests/s on the first `share` (in (0, 1]) of the run's requests and
  // measures it against the SLO. InvalidArgument / FailedPrecondition / NotFound: the
  // configuration cannot run (the search skips it); any other error ends the search.
  virtual absl::StatusOr<ProbeStats> Probe(const PlanConfig& config, double rate, double share) = 0;
};

struct SearchSpace {
  int gpus = 8;  // the budget: every configuration uses at most this many
  std::vector<int> tensor_parallel = {1, 2, 4, 8};
  bool colocated = true;
  bool disaggregated = true;
  bool auto_mode = false;  // auto clusters (ServingMode::kAuto): every node prefills for others
  std::vector<int32_t> chunk_sizes = {512, 2048, 8192};            // max_num_batched_tokens
  std::vector<int64_t> local_prefill_thresholds = {0, 512, 2048};  // the first is the base
  // First: the base, the router's default (the shapes are compared with it). least_loaded was the
  // base until 2026-11-27: it ranks decode nodes by free KV blocks first, which queues prompts on
  // colocated nodes whose decodes hold few blocks, so colocated shapes were judged by a policy
  // that serves them badly (64 H100s, 70B, 2k prompts, TPOT 25 ms: 0.65 against 1.16 req/s per
  // GPU with round_robin or cost).
  std::vector<PlacementPolicy> policies = {PlacementPolicy::kCost, PlacementPolicy::kRoundRobin,
                                           PlacementPolicy::kLeastLoaded,
                                           PlacementPolicy::kPrefixAware};
  // Drafts per decode step (speculative decoding; 0: off); the first is the base.
  std::vector<int32_t> speculative_tokens = {0};
  // Not empty: step 1 evaluates exactly these shapes (their mode and pools; the knobs are the
  // base ones) instead of searching shapes, and step 2 tunes their knobs as usual. Each must fit
  // the budget, and its TP sizes must be in tensor_parallel and fit the model.
  std::vector<PlanConfig> shapes;
};

struct PlanSearchOptions {
  SearchSpace space;
  SloTarget slo;
  int top = 5;            // configurations whose goodput is searched to the tolerance
  int refine_shapes = 3;  // shapes whose knobs step 2 searches
  double tolerance = 0.05;
  double start_rate_per_gpu = 0.25;
  double min_rate = 1e-3;      // requests/s: below it a configuration's goodput is 0
  double max_rate = 1e5;       // requests/s: the search does not probe above it
  double screen_share = 0.25;  // 0 or 1: no screening
  int parallelism = 1;         // configurations searched at once (threads)
};

// How far a configuration's rate search went.
enum class GoodputBound {
  kExact,     // within the tolerance: passes at `goodput`, fails at `above->rate`
  kBelowBar,  // pruned: failed at the bar (`above`), never entered the table
  kZero,      // failed even at min_rate
  kAboveMax,  // passed at max_rate: goodput at least that
};
std::string GoodputBoundName(GoodputBound bound);

struct ConfigResult {
  PlanConfig config;
  GoodputBound bound = GoodputBound::kExact;
  double goodput = 0;                // the highest passing rate (0: none passed)
  std::optional<ProbeStats> passed;  // the probe at `goodput`
  std::optional<ProbeStats> above;   // the lowest failing rate's probe: why it is not higher
  SloBreach breaks_first = SloBreach::kNone;  // JudgeProbe(*above)
  // At `goodput`, the larger of TTFT / its limit and TPOT / its limit (headroom: lower is better;
  // breaks ties in goodput).
  double slo_load = 0;
  int probes = 0;       // evaluator calls, screens included
  std::string skipped;  // not empty: the evaluator refused the configuration (this is why)

  double GoodputPerGpu() const { return goodput / config.Gpus(); }
  // The rate this configuration surely fails at, per GPU (upper bound of its goodput per GPU).
  double CeilingPerGpu() const;
  bool Ranked() const {  // has a goodput comparable with the others'
    return skipped.empty() && (bound == GoodputBound::kExact || bound == GoodputBound::kAboveMax);
  }
};

struct SkippedTensorParallel {
  int tp = 0;
  std::string reason;
};

struct PlanResult {
  std::vector<ConfigResult> configs;  // in the order they were evaluated
  std::vector<SkippedTensorParallel> skipped_tp;
  int probes = 0;         // evaluator calls
  int screen_probes = 0;  // of which screens
  int screens_failed = 0;
  int memo_hits = 0;  // configurations asked for again

  // Indices into `configs`: ranked ones by goodput per GPU (then fewer GPUs, then lower
  // slo_load, then evaluation order), then the others by CeilingPerGpu, the skipped last.
  std::vector<size_t> Ranking() const;
};

// Called after each configuration's search (progress output).
using ConfigCallback = std::function<void(const ConfigResult& result, const PlanResult& so_far)>;

// Why `options` cannot be searched ("" when they can).
std::string ValidatePlanSearchOptions(const PlanSearchOptions& options);

// Runs the search. InvalidArgument for unusable options; the evaluator's errors other than the
// three it uses to refuse a configuration end it.
absl::StatusOr<PlanResult> RunPlanSearch(const PlanSearchOptions& options,
                                         ConfigEvaluator& evaluator,
                                         const ConfigCallback& on_config = {});

}  // namespace tandem::plan

#endif  // TANDEM_TOOLS_PLAN_PLAN_SEARCH_H_
