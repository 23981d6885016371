// Histogram bucket boundaries shared by every process, so dashboards can put the same quantiles
// of different processes side by side. Values are in base units (seconds, tokens).
#ifndef TANDEM_COMMON_METRICS_BUCKETS_H_
#define TANDEM_COMMON_METRICS_BUCKETS_H_

#include <vector>

namespace tandem {

// Request-level latencies (TTFT, end-to-end, queue time, prefill time): 1 ms to 10 minutes.
inline std::vector<double> RequestLatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3, 0.5, 0.75,
          1,     1.5,    2,     3,    5,     7.5,  10,    15,  20,   30,   60,  120, 300, 600};
}

// Per-token and per-step latencies (inter-token latency, TPOT, engine step, KV transfer):
// 0.1 ms to 10 s.
inline std::vector<double> StepLatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02,
          0.03,   0.05,    0.075,  0.1,   0.15,  0.2,   0.3,   0.5,    1,    2.5,   5,    10};
}

// Counts (batch sizes, tokens per step): powers of two from 1 to 65536.
inline std::vector<double> CountBuckets() {
  std::vector<double> b;
  for (double v = 1; v <= 65536; v *= 2) b.push_back(v);
  return b;
}

}  // namespace tandem

#endif  // TANDEM_COMMON_METRICS_BUCKETS_H_
