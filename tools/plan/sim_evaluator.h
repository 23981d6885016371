// tandem-plan's ConfigEvaluator on tandem-sim: each probe is one RunSimulation of the workload at
// a rate, its per-request results summarized against the SLO (MeasureProbe). Deterministic: the
// same options give the same probes (tandem-sim is, and the arrivals are seeded).
#ifndef TANDEM_TOOLS_PLAN_SIM_EVALUATOR_H_
#define TANDEM_TOOLS_PLAN_SIM_EVALUATOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "bench/serve/bench_request.h"
#include "tools/plan/plan_config.h"
#include "tools/plan/plan_search.h"
#include "tools/sim/sim_cluster.h"

namespace tandem::plan {

struct SimEvaluatorOptions {
  // Everything but the pools, the chunk size, the threshold and the policy (the hardware, the
  // model, the KV links, max_num_seqs, the router's costs...), which each PlanConfig sets.
  sim::SimClusterOptions cluster;
  std::vector<bench::BenchRequest> dataset;  // no trace timestamps: the planner sets the rate
  // > 0: the run at rate r sends the dataset's first ceil(r * run_duration_s) requests (at most
  // all), so every run spans about the same arrival time; 0: every run sends the whole dataset.
  double run_duration_s = 0;
  double burstiness = 1.0;  // bench::ArrivalOptions
  uint64_t seed = 0;        // of the arrival times (the same for every configuration)
  SloTarget slo;
};

struct SimEvaluatorStats {
  int64_t runs = 0;
  int64_t requests = 0;    // simulated, over all runs
  double simulated_s = 0;  // virtual seconds, over all runs
  double wall_s = 0;       // RunSimulation's own wall time, over all runs
  int64_t short_runs = 0;  // full runs that wanted more requests than the dataset holds
};

// Thread-safe: probes may run at once, each on its own thread.
class SimEvaluator : public ConfigEvaluator {
 public:
  // InvalidArgument for an empty dataset or one with trace timestamps.
  static absl::StatusOr<std::unique_ptr<SimEvaluator>> Create(SimEvaluatorOptions options);

  // Builds a one-node colocated cluster of `tp` GPUs (no requests): RunSimulation's own check.
  absl::Status CheckTensorParallel(int tp) override;
  absl::StatusOr<ProbeStats> Probe(const PlanConfig& config, double rate, double share) override;

  // The tandem-sim options of `config` over the base options.
  static sim::SimClusterOptions ClusterOptions(const sim::SimClusterOptions& base,
                                               const PlanConfig& config);

  SimEvaluatorStats stats() const;

 private:
  using Requests = std::vector<bench::BenchRequest>;
  explicit SimEvaluator(SimEvaluatorOptions options) : options_(std::move(options)) {}
  // The dataset's first `n` requests, in a buffer of the pool (the one nearest in size: a probe
  // copies only the requests it gains; prompts of thousands of tokens make full copies costly).
  Requests TakePrefix(int n);
  void ReturnPrefix(Requests prefix);

  const SimEvaluatorOptions options_;
  mutable absl::Mutex mu_;
  SimEvaluatorStats stats_ ABSL_GUARDED_BY(mu_);
  std::vector<Requests> free_prefixes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::plan

#endif  // TANDEM_TOOLS_PLAN_SIM_EVALUATOR_H_
