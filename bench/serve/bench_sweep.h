// A whole tandem-bench session over one dataset: optional warmup requests (not measured), then one
// open-loop run per request rate, each summarized against the SLO, and for a sweep the goodput.
#ifndef TANDEM_BENCH_SERVE_BENCH_SWEEP_H_
#define TANDEM_BENCH_SERVE_BENCH_SWEEP_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serve/bench_client.h"
#include "bench/serve/bench_report.h"
#include "bench/serve/bench_request.h"
#include "bench/serve/datasets.h"
#include "bench/serve/serving_metrics.h"

namespace tandem::bench {

struct SweepOptions {
  // One run per rate (requests/s, inf: all at once), in this order. Ignored (one run) when every
  // request carries a trace timestamp; that run's rate is then the trace's mean rate.
  std::vector<double> rates;
  double burstiness = 1.0;
  uint64_t seed = 0;  // the same arrival seed for every rate
  int max_concurrency = 0;
  double time_scale = 1.0;
  SloLimits slo;
  double goodput_threshold = 0.9;
  // Requests sent (all at once, within max_concurrency) before the first run and left out of
  // every result: the first `warmup` requests' lengths with fresh random ids from `warmup_ids`,
  // so the measured prompts find nothing of theirs in the server's prefix cache.
  int warmup = 0;
  TokenIdRange warmup_ids;
  // Every run after the first shifts the token-id prompts' ids inside `warmup_ids` by a
  // run-specific amount (a bijection: lengths and prefixes shared inside a run stay shared), so no
  // run finds the previous runs' prompts in the server's prefix cache. Text prompts are sent
  // as they are (start the servers with --no-prefix-caching to compare rates on them).
  bool fresh_prompts_per_run = true;
  // > 0: the run at rate r sends only the dataset's first ceil(r * run_duration_s) requests (at
  // least 1, at most all), so each run spans about the same arrival time.
  double run_duration_s = 0;
  std::FILE* progress = nullptr;  // a progress bar per run here; null: none
};

// Called after each run with its record (to print it before the next run starts).
using RunCallback = std::function<void(const RunRecord& run)>;

// Runs the session. `report.config` is left for the caller. Fails only on bad options (failed
// requests are in the results).
absl::StatusOr<BenchReport> RunSweep(BenchClient& client, const std::vector<BenchRequest>& dataset,
                                     const SweepOptions& options, const RunCallback& on_run = {});

// The warmup requests described above (exposed for tests).
std::vector<BenchRequest> WarmupRequests(const std::vector<BenchRequest>& dataset, int n,
                                         const TokenIdRange& ids, uint64_t seed);

// How many requests the run at `rate` sends under run_duration_s (for tests).
int RequestsForRun(int dataset_size, double rate, double run_duration_s);

// The prompts of run `run` (0: the dataset as it is) under fresh_prompts_per_run (for tests).
std::vector<BenchRequest> PromptsForRun(const std::vector<BenchRequest>& dataset, int run,
                                        const TokenIdRange& ids);

// The distinct errors of failed requests with their counts, most frequent first, at most `max`.
std::vector<std::pair<std::string, int>> FailureCounts(const std::vector<RequestResult>& results,
                                                       int max = 5);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_BENCH_SWEEP_H_
