// The numbers `vllm bench serve` reports, computed from per-request results: throughput, TTFT,
// TPOT (first token excluded), ITL, end-to-end latency (mean, median, p90, p99), SLO attainment,
// and from a rate sweep DistServe's goodput: the highest rate at which >= 90% of requests meet
// both the TTFT and the TPOT limit.
#ifndef TANDEM_BENCH_SERVE_SERVING_METRICS_H_
#define TANDEM_BENCH_SERVE_SERVING_METRICS_H_

#include <optional>
#include <vector>

#include "bench/serve/bench_request.h"

namespace tandem::bench {

// The q-th percentile (q in [0, 100]) of `values` with linear interpolation between closest
// ranks (numpy's default). Empty input: 0.
double Percentile(std::vector<double> values, double q);
// The same of values already sorted ascending (no copy, no sort).
double PercentileOfSorted(const std::vector<double>& sorted, double q);

struct Distribution {
  int count = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0, min = 0, max = 0;  // all 0 when count == 0
};
Distribution Summarize(std::vector<double> values);

// (e2e - ttft) / (output_tokens - 1); nullopt for fewer than 2 output tokens or a failure.
std::optional<double> Tpot(const RequestResult& r);

struct SloLimits {
  std::optional<double> ttft_s;  // unset: no TTFT limit
  std::optional<double> tpot_s;  // unset: no TPOT limit
};

// A successful request within both limits. A request with one output token has no TPOT and
// meets the TPOT limit.
bool MeetsSlo(const RequestResult& r, const SloLimits& slo);

struct RunSummary {
  double offered_rate = 0;  // requests/s asked for (inf: all at once)
  double duration_s = 0;    // first send → last response
  int num_requests = 0;
  int completed = 0;
  int failed = 0;
  int64_t input_tokens = 0;                   // of completed requests
  int64_t output_tokens = 0;                  // of completed requests
  double request_throughput = 0;              // completed / duration
  double input_throughput = 0;                // tokens/s
  double output_throughput = 0;               // tokens/s
  Distribution ttft_s, tpot_s, itl_s, e2e_s;  // over completed requests (ITL: over all gaps)
  // Fraction of all requests meeting the SLO (MeetsSlo: failed ones count as misses, so without
  // limits it is the fraction that succeeded); 1 when there are no requests.
  double slo_attainment = 1.0;
  // Requests meeting the SLO per second of the run (vLLM's `--goodput` number at this rate).
  double good_request_rate = 0;
};

RunSummary SummarizeRun(const std::vector<RequestResult>& results, double duration_s,
                        double offered_rate, const SloLimits& slo);

struct SweepPoint {
  double rate = 0;
  RunSummary summary;
};

struct Goodput {
  // The highest swept rate whose attainment >= threshold; nullopt when none.
  std::optional<double> rate;
  // False when some lower rate missed the threshold (the curve is not monotonic: noisy runs).
  bool monotonic = true;
  double threshold = 0.9;
};
Goodput ComputeGoodput(const std::vector<SweepPoint>& points, double threshold = 0.9);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_SERVING_METRICS_H_
