// tandem-bench's outputs: the table printed to stdout, the JSON result file and the SVG plot
// (latency CDFs per run; SLO attainment and goodput against the request rate for a sweep).
#ifndef TANDEM_BENCH_SERVE_BENCH_REPORT_H_
#define TANDEM_BENCH_SERVE_BENCH_REPORT_H_

#include <string>
#include <vector>

#include "bench/serve/bench_request.h"
#include "bench/serve/serving_metrics.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {

// One rate's run: the summary and the raw results (for CDFs).
struct RunRecord {
  double rate = 0;
  RunSummary summary;
  std::vector<RequestResult> results;
  double started_unix_s = 0;  // wall time of the run's zero (0: not a real run)
};

struct BenchReport {
  nlohmann::json config;  // the command line's settings, echoed as given
  SloLimits slo;
  std::vector<RunRecord> runs;  // one per rate, in sweep order
  Goodput goodput;              // meaningful with more than one run
};

// vLLM-style "============ Serving Benchmark Result ============" block for one run, and a
// one-line-per-rate table for a sweep.
std::string FormatRunTable(const RunSummary& summary, const SloLimits& slo);
std::string FormatSweepTable(const BenchReport& report);

// {"config", "slo": {"ttft_s", "tpot_s"}, "runs": [{"rate", "summary": {...every RunSummary field,
// distributions as {"count","mean","median","p90","p99","min","max"}}, "requests": [per-request
// {"success","error","start_s","ttft_s","tpot_s","e2e_s","prompt_tokens","output_tokens"}]}],
// "goodput": {"rate" (null when none), "monotonic", "threshold"}}. Infinite rates are written as
// the string "inf" (JSON has no infinity).
nlohmann::json ReportToJson(const BenchReport& report, bool include_requests = true);

// A self-contained SVG a browser opens: one panel per metric (TTFT, TPOT, ITL, E2E) with the
// empirical CDF of each run (one line per rate, legend) and the SLO limit as a dashed line; with
// more than one run, a panel of SLO attainment against the rate with the 90% line and the goodput
// marked. `title` goes on top.
std::string RenderSvg(const BenchReport& report, const std::string& title);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_BENCH_REPORT_H_
