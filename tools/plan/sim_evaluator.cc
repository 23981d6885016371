#include "tools/plan/sim_evaluator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/serve/arrivals.h"
#include "bench/serve/bench_sweep.h"
#include "common/util/status_macros.h"

namespace tandem::plan {

absl::StatusOr<std::unique_ptr<SimEvaluator>> SimEvaluator::Create(SimEvaluatorOptions options) {
  if (options.dataset.empty()) return absl::InvalidArgumentError("the dataset is empty");
  if (std::any_of(options.dataset.begin(), options.dataset.end(),
                  [](const bench::BenchRequest& r) { return r.timestamp_s.has_value(); })) {
    return absl::InvalidArgumentError(
        "the dataset carries trace timestamps; the planner sets the arrival rate itself");
  }
  if (options.run_duration_s < 0) {
    return absl::InvalidArgumentError("the run duration must be >= 0");
  }
  return std::unique_ptr<SimEvaluator>(new SimEvaluator(std::move(options)));
}

sim::SimClusterOptions SimEvaluator::ClusterOptions(const sim::SimClusterOptions& base,
                                                    const PlanConfig& config) {
  sim::SimClusterOptions o = base;
  o.mode = config.mode;
  o.num_prefill = config.mode == ServingMode::kDisaggregated ? config.num_prefill : 0;
  o.num_decode = config.num_decode;
  o.tensor_parallel = config.decode_tp;
  o.decode_tensor_parallel = config.decode_tp;
  o.prefill_tensor_parallel =
      config.mode == ServingMode::kDisaggregated ? config.prefill_tp : config.decode_tp;
  o.max_num_batched_tokens = config.max_num_batched_tokens;
  o.local_prefill_threshold =
      HasLocalPrefillThreshold(config.mode) ? config.local_prefill_threshold : 0;
  o.policy = config.policy;
  o.num_speculative_tokens = config.num_speculative_tokens;
  return o;
}

absl::Status SimEvaluator::CheckTensorParallel(int tp) {
  return RunSimulation(ClusterOptions(options_.cluster, Colocated(1, tp)), {}, {}).status();
}

absl::StatusOr<ProbeStats> SimEvaluator::Probe(const PlanConfig& config, double rate,
                                               double share) {
  if (!(rate > 0) || !(share > 0 && share <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("bad probe: rate ", rate, ", share ", share));
  }
  const int dataset_size = static_cast<int>(options_.dataset.size());
  const int full = bench::RequestsForRun(dataset_size, rate, options_.run_duration_s);
  const bool short_run = share == 1 && options_.run_duration_s > 0 &&
                         std::ceil(rate * options_.run_duration_s) > dataset_size;
  const int n = std::max(1, static_cast<int>(std::ceil(full * share)));
  ASSIGN_OR_RETURN(
      std::vector<double> arrivals,
      bench::ArrivalTimes({.rate = rate, .burstiness = options_.burstiness, .seed = options_.seed},
                          n));
  Requests requests = TakePrefix(n);
  absl::StatusOr<sim::SimRun> run =
      sim::RunSimulation(ClusterOptions(options_.cluster, config), requests, arrivals);
  ReturnPrefix(std::move(requests));
  if (!run.ok()) return run.status();
  {
    absl::MutexLock lock(&mu_);
    ++stats_.runs;
    stats_.requests += n;
    stats_.simulated_s += run->stats.simulated_s;
    stats_.wall_s += run->stats.wall_s;
    stats_.short_runs += short_run;
  }
  return MeasureProbe(run->results, options_.slo, rate, share);
}

SimEvaluatorStats SimEvaluator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

SimEvaluator::Requests SimEvaluator::TakePrefix(int n) {
  Requests prefix;
  {
    absl::MutexLock lock(&mu_);
    auto nearest = std::min_element(free_prefixes_.begin(), free_prefixes_.end(),
                                    [n](const Requests& a, const Requests& b) {
                                      return std::abs(static_cast<int>(a.size()) - n) <
                                             std::abs(static_cast<int>(b.size()) - n);
                                    });
    if (nearest != free_prefixes_.end()) {
      prefix = std::move(*nearest);
      free_prefixes_.erase(nearest);
    }
  }
  if (static_cast<int>(prefix.size()) > n) {
    prefix.resize(n);
  } else {
    prefix.insert(prefix.end(), options_.dataset.begin() + prefix.size(),
                  options_.dataset.begin() + n);
  }
  return prefix;
}

void SimEvaluator::ReturnPrefix(Requests prefix) {
  absl::MutexLock lock(&mu_);
  free_prefixes_.push_back(std::move(prefix));
}

}  // namespace tandem::plan
