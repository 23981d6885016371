#include "bench/serve/serving_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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

Distribution Summarize(const std::vector<double>& values) {
  Distribution d;
  if (values.empty()) return d;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  d.count = static_cast<int>(sorted.size());
  d.mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(d.count);
  d.median = PercentileOfSorted(sorted, 50);
  d.p90 = PercentileOfSorted(sorted, 90);
  d.p99 = PercentileOfSorted(sorted, 99);
  d.min = sorted.front();
  d.max = sorted.back();
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
  s.ttft_s = Summarize(ttft);
  s.tpot_s = Summarize(tpot);
  s.itl_s = Summarize(itl);
  s.e2e_s = Summarize(e2e);
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
