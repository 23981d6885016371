// Drives one open-loop run: each request is sent at its arrival time (from the arrival process, or
// its trace timestamp) on a thread of its own, whether or not earlier ones have finished, unless
// max_concurrency is reached (then it waits for a slot, as `vllm bench serve
// --max-concurrency` does). Returns when every request has ended.
#ifndef TANDEM_BENCH_SERVE_LOAD_RUNNER_H_
#define TANDEM_BENCH_SERVE_LOAD_RUNNER_H_

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/serve/arrivals.h"
#include "bench/serve/bench_client.h"
#include "bench/serve/bench_request.h"

namespace tandem::bench {

struct LoadOptions {
  ArrivalOptions arrivals;  // ignored for requests that carry a timestamp
  int max_concurrency = 0;  // 0: unlimited
  // The server runs `time_scale` times slower than the time it stands for (the sim backend's
  // --sim-time-scale): arrival times are stretched by it, and every time measured (start, TTFT,
  // ITL, E2E, the run's duration) is divided by it, so results read in the modelled time.
  double time_scale = 1.0;
  // Called after each request ends with (ended, total), from the request's thread.
  std::function<void(int ended, int total)> on_request_done;
};

struct LoadResult {
  std::vector<RequestResult> results;  // in dataset order
  double duration_s = 0;               // first send → last end (divided by time_scale)
  absl::Time started;  // the clock's zero: request i is sent at started + its time × time_scale
};

absl::StatusOr<LoadResult> RunLoad(BenchClient& client, const std::vector<BenchRequest>& requests,
                                   const LoadOptions& options);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_LOAD_RUNNER_H_
