// The workload flags tandem-bench and tandem-sim share (the same names, meanings and defaults, so
// one command line describes the same requests to both): the dataset, the arrival rates and the
// SLO. Same flags and seed, same requests.
#ifndef TANDEM_BENCH_SERVE_WORKLOAD_FLAGS_H_
#define TANDEM_BENCH_SERVE_WORKLOAD_FLAGS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serve/bench_request.h"
#include "bench/serve/serving_metrics.h"
#include "common/util/cli_flags.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {

struct WorkloadFlags {
  std::string dataset = "random";
  std::optional<int> num_prompts;
  uint64_t seed = 0;
  int random_input_len = 1024;
  int random_output_len = 128;
  double random_range_ratio = 0;
  std::string input_len_dist, output_len_dist;
  double input_len_sigma = 0.8, output_len_sigma = 0.8;
  int input_len_max = 0, output_len_max = 0;
  int token_id_min = 1000, token_id_max = 30000;
  std::string dataset_path;
  std::string tokenizer;
  std::optional<int> sharegpt_output_len;
  double trace_time_scale = 1.0;
  // Trace prompts described, not built (TraceOptions::defer_prompt_ids; tandem-sim).
  bool defer_trace_prompts = false;
  int prefix_num = 4, prefix_questions = 8, prefix_len = 1024, question_len = 64,
      prefix_output_len = 128;

  double request_rate = std::numeric_limits<double>::infinity();
  std::vector<double> request_rates;  // set: a sweep
  double burstiness = 1.0;

  std::optional<double> slo_ttft_ms, slo_tpot_ms;
  double goodput_threshold = 0.9;
};

// The sections "Dataset", "Dataset random", "Dataset sharegpt / trace", "Dataset shared-prefix".
void AddDatasetFlags(FlagSet& flags, WorkloadFlags* w);
// --request-rate, --request-rates, --burstiness (in the caller's current section).
void AddRateFlags(FlagSet& flags, WorkloadFlags* w);
// The section "SLO": --slo-ttft-ms, --slo-tpot-ms, --goodput-threshold.
void AddSloFlags(FlagSet& flags, WorkloadFlags* w);
// What single flags cannot check; "" when usable.
std::string ValidateWorkloadFlags(const WorkloadFlags& w);

// The rates to run: the sweep, or the one rate.
std::vector<double> Rates(const WorkloadFlags& w);
SloLimits SloOf(const WorkloadFlags& w);
absl::StatusOr<std::vector<BenchRequest>> BuildDataset(const WorkloadFlags& w);
// The dataset's settings as given, for a result file's "config".
void AddDatasetConfig(const WorkloadFlags& w, nlohmann::json* config);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_WORKLOAD_FLAGS_H_
