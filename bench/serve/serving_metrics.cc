#include "bench/serve/serving_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace tandem::bench {

double Percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return PercentileOfSorted(values, q);
}

double PercentileOfSorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

namespace {

// PercentileOfSorted(sorted(v), q) without sorting v: the two order statistics it interpolates
// between, by selection (v is reordered). A run of a 1,000-GPU hour has 10^8 inter-token gaps,
// whose full sort was 5% of tandem-sim's time.
double SelectPercentile(std::vector<double>& v, double q) {
  const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(lo), v.end());
  const double low = v[lo];
  const double high =
      lo + 1 < v.size()
          ? *std::min_element(v.begin() + static_cast<std::ptrdiff_t>(lo) + 1, v.end())
          : low;
  return low + (high - low) * (pos - static_cast<double>(lo));
}

}  // namespace

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  d.count = static_cast<int>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(d.count);
  const auto [min, max] = std::minmax_element(values.begin(), values.end());
  d.min = *min;
  d.max = *max;
  d.median = SelectPercentile(values, 50);
  d.p90 = SelectPercentile(values, 90);
  d.p99 = SelectPercentile(values, 99);
  return d;
}

std::optional<double> Tpot(const RequestResult& r) {
  if (!r.success || r.output_tokens < 2) return std::nullopt;
  return (r.e2e_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1);
}

bool MeetsSlo(const RequestResult& r, const SloLimits& slo) {
  if (!r.success) return false;
  if (slo.ttft_s && r.ttft_s > *slo.ttft_s) return false;
  if (slo.tpot_s) {
    std::optional<double> tpot = Tpot(r);
    if (tpot && *tpot > *slo.tpot_s) return false;
  }
  return true;
}

RunSummary SummarizeRun(const std::vector<RequestResult>& results, double duration_s,
                        double offered_rate, const SloLimits& slo) {
  RunSummary s;
  s.offered_rate = offered_rate;
  s.duration_s = duration_s;
  s.num_requests = static_cast<int>(results.size());
  std::vector<double> ttft, tpot, itl, e2e;
  size_t num_itl = 0;
  for (const RequestResult& r : results) num_itl += r.itl_s.size();
  itl.reserve(num_itl);
  int good = 0;
  for (const RequestResult& r : results) {
    if (MeetsSlo(r, slo)) ++good;
    if (!r.success) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    if (std::optional<double> t = Tpot(r)) tpot.push_back(*t);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
  }
  if (duration_s > 0) {
    s.request_throughput = s.completed / duration_s;
    s.input_throughput = static_cast<double>(s.input_tokens) / duration_s;
    s.output_throughput = static_cast<double>(s.output_tokens) / duration_s;
    s.good_request_rate = good / duration_s;
  }
  s.ttft_s = Summarize(std::move(ttft));
  s.tpot_s = Summarize(std::move(tpot));
  s.itl_s = Summarize(std::move(itl));
  s.e2e_s = Summarize(std::move(e2e));
  s.slo_attainment =
      s.num_requests > 0 ? static_cast<double>(good) / static_cast<double>(s.num_requests) : 1.0;
  return s;
}

Goodput ComputeGoodput(const std::vector<SweepPoint>& points, double threshold) {
  Goodput g;
  g.threshold = threshold;
  for (const SweepPoint& p : points) {
    if (p.summary.slo_attainment >= threshold && (!g.rate || p.rate > *g.rate)) g.rate = p.rate;
  }
  if (g.rate) {
    for (const SweepPoint& p : points) {
      if (p.rate < *g.rate && p.summary.slo_attainment < threshold) g.monotonic = false;
    }
  }
  return g;
}

}  // namespace tandem::bench
