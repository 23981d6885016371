// tandem-plan's outputs: the table of the best configurations, why each other one loses (the SLO
// that breaks first at the rate just above its goodput), and the JSON of every configuration.
#ifndef TANDEM_TOOLS_PLAN_PLAN_REPORT_H_
#define TANDEM_TOOLS_PLAN_PLAN_REPORT_H_

#include <string>

#include "nlohmann/json.hpp"
#include "tools/plan/plan_config.h"
#include "tools/plan/plan_search.h"

namespace tandem::plan {

// The `top` best ranked configurations as a table (mode, prefill and decode pools, GPUs, chunk,
// threshold, policy, goodput, per GPU, the SLO's percentiles and attainment at the goodput, the
// SLO that breaks first above it); then one line per other configuration saying why it loses;
// then the skipped tensor-parallel sizes and configurations.
std::string FormatPlanReport(const PlanResult& result, const SloTarget& slo, int top);

// "TTFT p90 2.31 s > 2 s and TPOT p90 61.0 ms > 50 ms" for the limits `probe` breaks.
std::string DescribeBreach(const ProbeStats& probe, const SloTarget& slo);

// Seconds to four figures: "23.45 ms", "812.4 ms", "2.312 s", "41.3 s", or "inf".
std::string FormatSeconds(double seconds);

// {"slo": {...}, "skipped_tp": [{"tp", "reason"}], "configs": [ranked, each {"rank", "mode",
// "prefill", "prefill_tp", "decode", "decode_tp", "gpus", "max_num_batched_tokens",
// "local_prefill_threshold", "policy", "goodput_rps", "goodput_per_gpu", "bound", "breaks_first",
// "probes", "passed": probe, "above": probe, "skipped"}]}, a probe being {"rate", "share",
// "requests", "failed", "ttft_s", "tpot_s", "attainment"} (infinite seconds as the string "inf").
nlohmann::json PlanToJson(const PlanResult& result, const SloTarget& slo);

}  // namespace tandem::plan

#endif  // TANDEM_TOOLS_PLAN_PLAN_REPORT_H_
