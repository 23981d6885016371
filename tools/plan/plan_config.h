// What tandem-plan searches over and what it measures: one deployable cluster configuration
// (PlanConfig), the SLO as a percentile of per-request latencies (SloTarget), and what one
// simulated run of a configuration at one request rate showed (ProbeStats). Plain values and
// pure functions; tools/plan/README.md describes the search that uses them.
#ifndef TANDEM_TOOLS_PLAN_PLAN_CONFIG_H_
#define TANDEM_TOOLS_PLAN_PLAN_CONFIG_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serve/bench_request.h"
#include "router/placement.h"

namespace tandem::plan {

// One cluster: the pools, each node's engine limit and the router's placement.
struct PlanConfig {
  ServingMode mode = ServingMode::kColocated;
  int num_prefill = 0;                    // disaggregated: prefill nodes (colocated, auto: 0)
  int prefill_tp = 0;                     // disaggregated: GPUs per prefill node (else 0)
  int num_decode = 1;                     // decode nodes (colocated, auto: every node)
  int decode_tp = 1;                      // GPUs per decode node
  int32_t max_num_batched_tokens = 2048;  // each node's tokens per step (the prefill chunk)
  // Disaggregated and auto: shorter uncached prompts stay on D.
  int64_t local_prefill_threshold = 0;
  PlacementPolicy policy = PlacementPolicy::kLeastLoaded;
  // Speculative decoding on the nodes that decode: drafts per step (0: off).
  int32_t num_speculative_tokens = 0;

  int Gpus() const { return num_prefill * prefill_tp + num_decode * decode_tp; }
  // Total order over every field: the search's memo key and the report's last tie-break.
  auto Key() const {
    return std::tuple(mode, num_prefill, prefill_tp, num_decode, decode_tp, max_num_batched_tokens,
                      local_prefill_threshold, policy, num_speculative_tokens);
  }
  // The pools alone (what the knob search keeps fixed).
  auto ShapeKey() const { return std::tuple(mode, num_prefill, prefill_tp, num_decode, decode_tp); }
  bool operator==(const PlanConfig& other) const { return Key() == other.Key(); }
};

// A colocated cluster of `nodes` nodes of `tp` GPUs, a disaggregated one, or an auto one (`nodes`
// nodes that each decode and prefill for the others: tandem-decode --serve-prefill).
PlanConfig Colocated(int nodes, int tp);
PlanConfig Disaggregated(int num_prefill, int prefill_tp, int num_decode, int decode_tp);
PlanConfig Auto(int nodes, int tp);

// Whether the mode's router takes --local-prefill-threshold (disaggregated and auto).
inline bool HasLocalPrefillThreshold(ServingMode mode) { return mode != ServingMode::kColocated; }

// "colocated 8 x TP8" / "disaggregated 3 x TP8 + 5 x TP8" / "auto 8 x TP8"; ConfigName adds the
// knobs: ", chunk 2048, threshold 512, least_loaded" (no threshold when colocated), and
// ", 4 drafts" when it speculates.
std::string ShapeName(const PlanConfig& config);
std::string ConfigName(const PlanConfig& config);

// A shape as tandem-plan's --shapes and the study scripts write it: "colocated:8xTP8",
// "auto:8xTP8" or "disaggregated:20xTP2+3xTP8" (prefill first). InvalidArgument otherwise.
absl::StatusOr<PlanConfig> ParseShape(std::string_view text);

// The SLO: the `percentile` of TTFT and of TPOT over a run's requests within the limits.
struct SloTarget {
  double ttft_s = std::numeric_limits<double>::infinity();  // inf: no TTFT limit
  double tpot_s = std::numeric_limits<double>::infinity();  // inf: no TPOT limit
  double percentile = 90;                                   // in (0, 100]
};

// One simulated run of a configuration at one rate.
struct ProbeStats {
  double rate = 0;   // requests/s offered
  double share = 1;  // the part of the run's requests it sent (< 1: a screen, see PlanSearch)
  int requests = 0;
  int failed = 0;
  // The SLO's percentile over all requests, a failed request counting as infinitely late; +inf
  // when failed requests reach the percentile. A request with one output token has TPOT 0.
  double ttft_s = 0;
  double tpot_s = 0;
  // Share of requests that succeeded within both limits (bench::MeetsSlo).
  double attainment = 0;
};

// Summarizes a run's per-request results against `slo` (the percentile and the limits).
ProbeStats MeasureProbe(const std::vector<bench::RequestResult>& results, const SloTarget& slo,
                        double rate, double share = 1);

// Which limit a run's percentiles exceed.
enum class SloBreach { kNone, kTtft, kTpot, kBoth };
SloBreach JudgeProbe(const ProbeStats& probe, const SloTarget& slo);
// "none", "TTFT", "TPOT", "TTFT and TPOT".
std::string SloBreachName(SloBreach breach);

// The q-th percentile (linear interpolation between closest ranks, as bench::Percentile) of
// values that may hold +inf: +inf when the interpolation touches one. Empty: 0.
double PercentileWithInfinities(std::vector<double> values, double q);

}  // namespace tandem::plan

#endif  // TANDEM_TOOLS_PLAN_PLAN_CONFIG_H_
