#include "bench/serve/bench_sweep.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/serve/load_runner.h"
#include "bench/serve/progress_bar.h"

namespace tandem::bench {
namespace {

std::string SweepRateLabel(double rate) {
  return std::isinf(rate) ? std::string("rate inf") : absl::StrFormat("rate %g", rate);
}

// Every request has a trace timestamp.
bool IsTrace(const std::vector<BenchRequest>& dataset) {
  return !dataset.empty() && std::all_of(dataset.begin(), dataset.end(), [](const BenchRequest& r) {
    return r.timestamp_s.has_value();
  });
}

}  // namespace

std::vector<BenchRequest> WarmupRequests(const std::vector<BenchRequest>& dataset, int n,
                                         const TokenIdRange& ids, uint64_t seed) {
  std::vector<BenchRequest> out;
  std::mt19937_64 rng(seed ^ 0x7761726d7570ULL);  // "warmup"
  std::uniform_int_distribution<int32_t> id(ids.min, std::max(ids.min, ids.max - 1));
  for (int i = 0; i < n && i < static_cast<int>(dataset.size()); ++i) {
    BenchRequest r;
    r.prompt_len = std::max(dataset[i].prompt_len, 1);
    r.output_len = dataset[i].output_len;
    r.prompt_ids.resize(r.prompt_len);
    for (int32_t& t : r.prompt_ids) t = id(rng);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::pair<std::string, int>> FailureCounts(const std::vector<RequestResult>& results,
                                                       int max) {
  std::map<std::string, int> counts;
  for (const RequestResult& r : results) {
    if (!r.success) ++counts[r.error.empty() ? std::string("(no reason given)") : r.error];
  }
  std::vector<std::pair<std::string, int>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (static_cast<int>(out.size()) > max) out.resize(std::max(max, 0));
  return out;
}

int RequestsForRun(int dataset_size, double rate, double run_duration_s) {
  if (!(run_duration_s > 0) || std::isinf(rate)) return dataset_size;
  const double wanted = std::ceil(rate * run_duration_s);
  return static_cast<int>(std::clamp(wanted, 1.0, static_cast<double>(dataset_size)));
}

std::vector<BenchRequest> PromptsForRun(const std::vector<BenchRequest>& dataset, int run,
                                        const TokenIdRange& ids) {
  std::vector<BenchRequest> out = dataset;
  const int64_t span = int64_t{ids.max} - ids.min;
  if (run == 0 || span < 2) return out;
  // A shift by a run-specific odd amount, modulo the range: a bijection on ids inside it.
  const int64_t shift = (int64_t{run} * 7919 * 2 + 1) % span;
  for (BenchRequest& r : out) {
    for (int32_t& id : r.prompt_ids) {
      if (id < ids.min || id >= ids.max) continue;
      id = static_cast<int32_t>(ids.min + (id - ids.min + shift) % span);
    }
  }
  return out;
}

absl::StatusOr<BenchReport> RunSweep(BenchClient& client, const std::vector<BenchRequest>& dataset,
                                     const SweepOptions& options, const RunCallback& on_run) {
  const bool trace = IsTrace(dataset);
  if (!trace && options.rates.empty()) return absl::InvalidArgumentError("no request rate given");
  for (double rate : options.rates) {
    if (!(rate > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("request rates must be > 0, got ", rate));
    }
  }
  if (!(options.goodput_threshold > 0 && options.goodput_threshold <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the goodput threshold must be in (0, 1], got ", options.goodput_threshold));
  }
  if (options.warmup < 0) return absl::InvalidArgumentError("warmup must be >= 0");

  LoadOptions load;
  load.arrivals.burstiness = options.burstiness;
  load.arrivals.seed = options.seed;
  load.max_concurrency = options.max_concurrency;
  load.time_scale = options.time_scale;

  if (options.warmup > 0) {
    std::vector<BenchRequest> warmup =
        WarmupRequests(dataset, options.warmup, options.warmup_ids, options.seed);
    LoadOptions warm = load;
    warm.arrivals.rate = std::numeric_limits<double>::infinity();
    ProgressBar bar(options.progress, "warmup", static_cast<int>(warmup.size()));
    warm.on_request_done = [&bar](int ended, int) { bar.Update(ended); };
    absl::StatusOr<LoadResult> warmed = RunLoad(client, warmup, warm);
    if (!warmed.ok()) return warmed.status();
    bar.Finish();
  }

  std::vector<double> rates = options.rates;
  if (trace) {
    // The trace's own pace, in the modelled time.
    double last = 0;
    for (const BenchRequest& r : dataset) last = std::max(last, *r.timestamp_s);
    rates = {last > 0 ? static_cast<double>(dataset.size()) / last
                      : std::numeric_limits<double>::infinity()};
  }

  BenchReport report;
  report.slo = options.slo;
  std::vector<SweepPoint> points;
  for (size_t run_index = 0; run_index < rates.size(); ++run_index) {
    const double rate = rates[run_index];
    load.arrivals.rate = rate;
    std::vector<BenchRequest> prompts =
        options.fresh_prompts_per_run
            ? PromptsForRun(dataset, static_cast<int>(run_index), options.warmup_ids)
            : dataset;
    if (!trace) {
      prompts.resize(
          RequestsForRun(static_cast<int>(prompts.size()), rate, options.run_duration_s));
    }
    ProgressBar bar(options.progress, SweepRateLabel(rate), static_cast<int>(prompts.size()));
    load.on_request_done = [&bar](int ended, int) { bar.Update(ended); };
    absl::StatusOr<LoadResult> result = RunLoad(client, prompts, load);
    if (!result.ok()) return result.status();
    bar.Finish();
    RunRecord run;
    run.rate = rate;
    run.summary = SummarizeRun(result->results, result->duration_s, rate, options.slo);
    run.results = std::move(result->results);
    run.started_unix_s = static_cast<double>(absl::ToUnixMicros(result->started)) / 1e6;
    points.push_back({rate, run.summary});
    if (on_run) on_run(run);
    report.runs.push_back(std::move(run));
  }
  report.goodput = ComputeGoodput(points, options.goodput_threshold);
  return report;
}

}  // namespace tandem::bench
