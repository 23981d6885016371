// Open-loop arrival times: Poisson, or gamma-distributed gaps with a burstiness factor (vLLM's
// `--burstiness`): gaps ~ Gamma(shape = burstiness, scale = 1 / (rate * burstiness)), so the mean
// rate is `rate` for any burstiness; burstiness 1 is Poisson, < 1 burstier, > 1 more regular.
#ifndef TANDEM_BENCH_SERVE_ARRIVALS_H_
#define TANDEM_BENCH_SERVE_ARRIVALS_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::bench {

struct ArrivalOptions {
  double rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  double burstiness = 1.0;                                // > 0
  uint64_t seed = 0;
};

// Send times of `n` requests in seconds from the start, non-decreasing; the first gap is drawn
// like the others (the first request is not at 0 unless the rate is infinite). Same options,
// same times. InvalidArgument for rate <= 0 or NaN, burstiness <= 0, n < 0.
absl::StatusOr<std::vector<double>> ArrivalTimes(const ArrivalOptions& options, int n);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_ARRIVALS_H_
