#include "tools/plan/plan_config.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/serve/serving_metrics.h"

namespace tandem::plan {

PlanConfig Colocated(int nodes, int tp) {
  PlanConfig c;
  c.mode = ServingMode::kColocated;
  c.num_decode = nodes;
  c.decode_tp = tp;
  return c;
}

PlanConfig Disaggregated(int num_prefill, int prefill_tp, int num_decode, int decode_tp) {
  PlanConfig c;
  c.mode = ServingMode::kDisaggregated;
  c.num_prefill = num_prefill;
  c.prefill_tp = prefill_tp;
  c.num_decode = num_decode;
  c.decode_tp = decode_tp;
  return c;
}

PlanConfig Auto(int nodes, int tp) {
  PlanConfig c = Colocated(nodes, tp);
  c.mode = ServingMode::kAuto;
  return c;
}

std::string ShapeName(const PlanConfig& c) {
  if (c.mode != ServingMode::kDisaggregated) {
    return absl::StrCat(std::string(ServingModeName(c.mode)), " ", c.num_decode, " x TP",
                        c.decode_tp);
  }
  return absl::StrCat("disaggregated ", c.num_prefill, " x TP", c.prefill_tp, " + ", c.num_decode,
                      " x TP", c.decode_tp);
}

namespace {

// "NxTPt" -> (N, t), both >= 1.
std::optional<std::pair<int, int>> ParsePool(std::string_view pool) {
  const size_t x = pool.find("xTP");
  int nodes = 0, tp = 0;
  if (x == std::string_view::npos || !absl::SimpleAtoi(std::string(pool.substr(0, x)), &nodes) ||
      !absl::SimpleAtoi(std::string(pool.substr(x + 3)), &tp) || nodes < 1 || tp < 1) {
    return std::nullopt;
  }
  return std::pair(nodes, tp);
}

}  // namespace

absl::StatusOr<PlanConfig> ParseShape(std::string_view text) {
  const auto error = [text] {
    return absl::InvalidArgumentError(
        absl::StrCat("shape '", std::string(text),
                     "': expected colocated:NxTPt, auto:NxTPt or disaggregated:PxTPa+DxTPb (e.g. "
                     "disaggregated:20xTP2+3xTP8)"));
  };
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return error();
  const std::optional<ServingMode> mode = ParseServingMode(text.substr(0, colon));
  if (!mode.has_value()) return error();
  const std::string_view pools = text.substr(colon + 1);
  if (*mode != ServingMode::kDisaggregated) {
    const auto pool = ParsePool(pools);
    if (!pool.has_value()) return error();
    return *mode == ServingMode::kAuto ? Auto(pool->first, pool->second)
                                       : Colocated(pool->first, pool->second);
  }
  const size_t plus = pools.find('+');
  if (plus == std::string_view::npos) return error();
  const auto prefill = ParsePool(pools.substr(0, plus));
  const auto decode = ParsePool(pools.substr(plus + 1));
  if (!prefill.has_value() || !decode.has_value()) return error();
  return Disaggregated(prefill->first, prefill->second, decode->first, decode->second);
}

std::string ConfigName(const PlanConfig& c) {
  std::string name = absl::StrCat(ShapeName(c), ", chunk ", c.max_num_batched_tokens);
  if (HasLocalPrefillThreshold(c.mode)) {
    absl::StrAppend(&name, ", threshold ", c.local_prefill_threshold);
  }
  absl::StrAppend(&name, ", ", std::string(PlacementPolicyName(c.policy)));
  if (c.num_speculative_tokens > 0)
    absl::StrAppend(&name, ", ", c.num_speculative_tokens, " drafts");
  return name;
}

double PercentileWithInfinities(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  if (std::isinf(values[lo]) || (frac > 0 && std::isinf(values[hi]))) {
    return std::numeric_limits<double>::infinity();
  }
  if (frac == 0) return values[lo];
  return values[lo] + (values[hi] - values[lo]) * frac;
}

ProbeStats MeasureProbe(const std::vector<bench::RequestResult>& results, const SloTarget& slo,
                        double rate, double share) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  ProbeStats probe{.rate = rate, .share = share, .requests = static_cast<int>(results.size())};
  const bench::SloLimits limits{
      .ttft_s = std::isinf(slo.ttft_s) ? std::nullopt : std::optional<double>(slo.ttft_s),
      .tpot_s = std::isinf(slo.tpot_s) ? std::nullopt : std::optional<double>(slo.tpot_s)};
  std::vector<double> ttft, tpot;
  ttft.reserve(results.size());
  tpot.reserve(results.size());
  int met = 0;
  for (const bench::RequestResult& r : results) {
    if (!r.success) {
      ++probe.failed;
      ttft.push_back(kInf);
      tpot.push_back(kInf);
      continue;
    }
    ttft.push_back(r.ttft_s);
    tpot.push_back(bench::Tpot(r).value_or(0));
    if (bench::MeetsSlo(r, limits)) ++met;
  }
  probe.ttft_s = PercentileWithInfinities(std::move(ttft), slo.percentile);
  probe.tpot_s = PercentileWithInfinities(std::move(tpot), slo.percentile);
  probe.attainment =
      results.empty() ? 1.0 : static_cast<double>(met) / static_cast<double>(results.size());
  return probe;
}

SloBreach JudgeProbe(const ProbeStats& probe, const SloTarget& slo) {
  const bool ttft = probe.ttft_s > slo.ttft_s;
  const bool tpot = probe.tpot_s > slo.tpot_s;
  if (ttft && tpot) return SloBreach::kBoth;
  if (ttft) return SloBreach::kTtft;
  if (tpot) return SloBreach::kTpot;
  return SloBreach::kNone;
}

std::string SloBreachName(SloBreach breach) {
  switch (breach) {
    case SloBreach::kNone:
      return "none";
    case SloBreach::kTtft:
      return "TTFT";
    case SloBreach::kTpot:
      return "TPOT";
    case SloBreach::kBoth:
      return "TTFT and TPOT";
  }
  return "none";
}

}  // namespace tandem::plan
