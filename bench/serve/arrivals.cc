#include "bench/serve/arrivals.h"

#include <cmath>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::bench {

absl::StatusOr<std::vector<double>> ArrivalTimes(const ArrivalOptions& options, int n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("request count must be >= 0, got ", n));
  // NaN fails `> 0`, so both checks reject it.
  if (!(options.rate > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request rate must be > 0 (or inf), got ", options.rate));
  }
  if (!(options.burstiness > 0) || !std::isfinite(options.burstiness)) {
    return absl::InvalidArgumentError(
        absl::StrCat("burstiness must be a finite number > 0, got ", options.burstiness));
  }
  std::vector<double> times(n, 0.0);
  if (std::isinf(options.rate)) return times;  // everything at once

  std::mt19937_64 rng(options.seed);
  // Mean gap = shape * scale = 1 / rate; coefficient of variation = 1 / sqrt(shape).
  std::gamma_distribution<double> gap(options.burstiness,
                                      1.0 / (options.rate * options.burstiness));
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += gap(rng);
    times[i] = t;
  }
  return times;
}

}  // namespace tandem::bench
