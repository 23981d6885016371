#include "tools/plan/plan_report.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::plan {
namespace {

using json = nlohmann::json;

std::string Percent(double share) { return absl::StrFormat("%.1f%%", share * 100); }

// Three significant figures or more: "412", "96.8", "5.00", "0.625".
std::string Rate(double rate) {
  if (rate >= 100) return absl::StrFormat("%.0f", rate);
  if (rate >= 10) return absl::StrFormat("%.1f", rate);
  if (rate >= 1) return absl::StrFormat("%.2f", rate);
  return absl::StrFormat("%.3g", rate);
}

std::string Pool(int nodes, int tp) {
  return nodes > 0 ? absl::StrCat(nodes, " x TP", tp) : std::string("-");
}

std::string PercentileName(const SloTarget& slo) { return absl::StrFormat("p%g", slo.percentile); }

// The padded rows of a table, columns separated by two spaces.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

// "12.5 req/s (0.195/GPU)", or for a pruned configuration "< 12.5 req/s (< 0.195/GPU)".
std::string GoodputText(const ConfigResult& c) {
  const int gpus = c.config.Gpus();
  switch (c.bound) {
    case GoodputBound::kExact:
      return absl::StrCat(Rate(c.goodput), " req/s (", Rate(c.goodput / gpus), "/GPU)");
    case GoodputBound::kAboveMax:
      return absl::StrCat(">= ", Rate(c.goodput), " req/s (", Rate(c.goodput / gpus), "/GPU)");
    case GoodputBound::kBelowBar:
      return absl::StrCat("< ", Rate(c.above->rate), " req/s (< ", Rate(c.above->rate / gpus),
                          "/GPU)");
    case GoodputBound::kZero:
      return absl::StrCat("0 req/s (fails at ", Rate(c.above->rate), " req/s)");
  }
  return "";
}

json SecondsJson(double s) { return std::isinf(s) ? json("inf") : json(s); }

json ProbeJson(const std::optional<ProbeStats>& p) {
  if (!p.has_value()) return nullptr;
  return {{"rate", p->rate},
          {"share", p->share},
          {"requests", p->requests},
          {"failed", p->failed},
          {"ttft_s", SecondsJson(p->ttft_s)},
          {"tpot_s", SecondsJson(p->tpot_s)},
          {"attainment", p->attainment}};
}

}  // namespace

std::string FormatSeconds(double s) {
  if (std::isinf(s)) return "inf";
  if (s >= 10) return absl::StrFormat("%.1f s", s);
  if (s >= 1) return absl::StrFormat("%.3f s", s);
  if (s >= 0.1) return absl::StrFormat("%.1f ms", s * 1e3);
  return absl::StrFormat("%.2f ms", s * 1e3);
}

std::string DescribeBreach(const ProbeStats& probe, const SloTarget& slo) {
  const std::string p = PercentileName(slo);
  std::vector<std::string> parts;
  if (probe.ttft_s > slo.ttft_s) {
    parts.push_back(absl::StrCat("TTFT ", p, " ", FormatSeconds(probe.ttft_s), " > ",
                                 FormatSeconds(slo.ttft_s)));
  }
  if (probe.tpot_s > slo.tpot_s) {
    parts.push_back(absl::StrCat("TPOT ", p, " ", FormatSeconds(probe.tpot_s), " > ",
                                 FormatSeconds(slo.tpot_s)));
  }
  std::string text = parts.empty() ? "within the SLO" : parts[0];
  if (parts.size() > 1) absl::StrAppend(&text, " and ", parts[1]);
  if (probe.failed > 0) absl::StrAppend(&text, " (", probe.failed, " requests failed)");
  if (probe.share < 1) {
    absl::StrAppend(&text, " (screen: the first ", Percent(probe.share), " of the run)");
  }
  return text;
}

std::string FormatPlanReport(const PlanResult& result, const SloTarget& slo, int top) {
  const std::string p = PercentileName(slo);
  const std::vector<size_t> ranking = result.Ranking();
  std::vector<std::vector<std::string>> rows = {{"#", "mode", "prefill", "decode", "GPUs", "chunk",
                                                 "threshold", "policy", "goodput req/s", "per GPU",
                                                 absl::StrCat("TTFT ", p), absl::StrCat("TPOT ", p),
                                                 "attainment", "breaks first above"}};
  size_t shown = 0;
  for (; shown < ranking.size() && static_cast<int>(shown) < top; ++shown) {
    const ConfigResult& c = result.configs[ranking[shown]];
    if (!c.Ranked()) break;
    const PlanConfig& k = c.config;
    const bool threshold = HasLocalPrefillThreshold(k.mode);
    rows.push_back({absl::StrCat(shown + 1), std::string(ServingModeName(k.mode)),
                    Pool(k.num_prefill, k.prefill_tp), Pool(k.num_decode, k.decode_tp),
                    absl::StrCat(k.Gpus()), absl::StrCat(k.max_num_batched_tokens),
                    threshold ? absl::StrCat(k.local_prefill_threshold) : "-",
                    std::string(PlacementPolicyName(k.policy)),
                    (c.bound == GoodputBound::kAboveMax ? ">= " : "") + Rate(c.goodput),
                    Rate(c.GoodputPerGpu()), FormatSeconds(c.passed->ttft_s),
                    FormatSeconds(c.passed->tpot_s), Percent(c.passed->attainment),
                    c.above.has_value() ? SloBreachName(c.breaks_first) : "-"});
  }
  std::string out =
      shown == 0 ? "No configuration meets the SLO at any rate searched.\n" : Table(rows);
  if (shown < ranking.size()) {
    absl::StrAppend(&out, "\nWhy the others lose");
    if (shown > 0) {
      absl::StrAppend(&out, " (#", shown, " has ",
                      Rate(result.configs[ranking[shown - 1]].GoodputPerGpu()), " req/s per GPU)");
    }
    absl::StrAppend(&out, ": the SLO that breaks at the rate just above their goodput\n");
  }
  for (size_t i = shown; i < ranking.size(); ++i) {
    const ConfigResult& c = result.configs[ranking[i]];
    if (!c.skipped.empty()) {
      absl::StrAppend(&out, "  ", ConfigName(c.config), ": skipped: ", c.skipped, "\n");
      continue;
    }
    absl::StrAppend(&out, "  ", ConfigName(c.config), ": ", GoodputText(c));
    if (c.above.has_value()) {
      absl::StrAppend(&out, "; ", SloBreachName(c.breaks_first), " breaks first: at ",
                      Rate(c.above->rate), " req/s ", DescribeBreach(*c.above, slo));
    }
    absl::StrAppend(&out, "\n");
  }
  for (const SkippedTensorParallel& s : result.skipped_tp) {
    absl::StrAppend(&out, "TP ", s.tp, " skipped: ", s.reason, "\n");
  }
  return out;
}

json PlanToJson(const PlanResult& result, const SloTarget& slo) {
  json configs = json::array();
  int rank = 0;
  for (size_t index : result.Ranking()) {
    const ConfigResult& c = result.configs[index];
    const PlanConfig& k = c.config;
    json entry = {{"rank", ++rank},
                  {"mode", ServingModeName(k.mode)},
                  {"prefill", k.num_prefill},
                  {"prefill_tp", k.prefill_tp},
                  {"decode", k.num_decode},
                  {"decode_tp", k.decode_tp},
                  {"gpus", k.Gpus()},
                  {"max_num_batched_tokens", k.max_num_batched_tokens},
                  {"local_prefill_threshold", k.local_prefill_threshold},
                  {"policy", PlacementPolicyName(k.policy)},
                  {"probes", c.probes}};
    if (!c.skipped.empty()) {
      entry["skipped"] = c.skipped;
    } else {
      entry["bound"] = GoodputBoundName(c.bound);
      entry["goodput_rps"] = c.goodput;
      entry["goodput_per_gpu"] = c.GoodputPerGpu();
      entry["breaks_first"] = c.above.has_value() ? json(SloBreachName(c.breaks_first)) : nullptr;
      entry["passed"] = ProbeJson(c.passed);
      entry["above"] = ProbeJson(c.above);
    }
    configs.push_back(std::move(entry));
  }
  json skipped = json::array();
  for (const SkippedTensorParallel& s : result.skipped_tp) {
    skipped.push_back({{"tp", s.tp}, {"reason", s.reason}});
  }
  return {{"slo",
           {{"ttft_s", SecondsJson(slo.ttft_s)},
            {"tpot_s", SecondsJson(slo.tpot_s)},
            {"percentile", slo.percentile}}},
          {"skipped_tp", skipped},
          {"configs", configs}};
}

}  // namespace tandem::plan
