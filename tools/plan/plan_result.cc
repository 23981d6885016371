// PlanResult's ranking and the names of its bounds, and the checks of a search's options: the
// parts of plan_search.h that are not the search.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/engine/speculative.h"
#include "tools/plan/plan_search.h"

namespace tandem::plan {

std::string GoodputBoundName(GoodputBound bound) {
  switch (bound) {
    case GoodputBound::kExact:
      return "exact";
    case GoodputBound::kBelowBar:
      return "below_bar";
    case GoodputBound::kZero:
      return "zero";
    case GoodputBound::kAboveMax:
      return "above_max";
  }
  return "exact";
}

double ConfigResult::CeilingPerGpu() const {
  return above.has_value() ? above->rate / config.Gpus() : std::numeric_limits<double>::infinity();
}

std::vector<size_t> PlanResult::Ranking() const {
  std::vector<size_t> order(configs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto group = [](const ConfigResult& c) { return c.Ranked() ? 0 : c.skipped.empty() ? 1 : 2; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ConfigResult& x = configs[a];
    const ConfigResult& y = configs[b];
    if (group(x) != group(y)) return group(x) < group(y);
    if (group(x) == 0) {
      if (x.GoodputPerGpu() != y.GoodputPerGpu()) return x.GoodputPerGpu() > y.GoodputPerGpu();
      if (x.config.Gpus() != y.config.Gpus()) return x.config.Gpus() < y.config.Gpus();
      return x.slo_load < y.slo_load;
    }
    if (group(x) == 1) return x.CeilingPerGpu() > y.CeilingPerGpu();
    return false;
  });
  return order;
}

std::string ValidatePlanSearchOptions(const PlanSearchOptions& o) {
  const SearchSpace& s = o.space;
  if (s.gpus < 1) return "the GPU budget must be >= 1";
  if (s.tensor_parallel.empty() || s.chunk_sizes.empty() || s.local_prefill_thresholds.empty() ||
      s.policies.empty() || s.speculative_tokens.empty()) {
    return "every list of the search space needs a value";
  }
  if (std::any_of(s.tensor_parallel.begin(), s.tensor_parallel.end(),
                  [](int t) { return t < 1; })) {
    return "tensor-parallel sizes must be >= 1";
  }
  if (std::any_of(s.chunk_sizes.begin(), s.chunk_sizes.end(), [](int32_t c) { return c < 1; })) {
    return "chunk sizes must be >= 1";
  }
  if (std::any_of(s.local_prefill_thresholds.begin(), s.local_prefill_thresholds.end(),
                  [](int64_t t) { return t < 0; })) {
    return "local prefill thresholds must be >= 0";
  }
  if (std::any_of(s.speculative_tokens.begin(), s.speculative_tokens.end(),
                  [](int32_t k) { return k < 0 || k > kMaxSpeculativeTokens; })) {
    return absl::StrCat("speculative tokens must be in [0, ", kMaxSpeculativeTokens, "]");
  }
  if (!s.colocated && !s.disaggregated && !s.auto_mode && s.shapes.empty()) {
    return "search colocated, disaggregated, auto or several";
  }
  for (const PlanConfig& shape : s.shapes) {
    if (shape.Gpus() > s.gpus) {
      return absl::StrCat(ShapeName(shape), " uses ", shape.Gpus(), " GPUs, over the budget of ",
                          s.gpus);
    }
  }
  if (!(o.slo.percentile > 0 && o.slo.percentile <= 100))
    return "the percentile must be in (0, 100]";
  if (std::isinf(o.slo.ttft_s) && std::isinf(o.slo.tpot_s)) return "give a TTFT or a TPOT limit";
  if (!(o.slo.ttft_s > 0) || !(o.slo.tpot_s > 0)) return "SLO limits must be > 0";
  if (!(o.tolerance > 0)) return "the rate tolerance must be > 0";
  if (!(o.start_rate_per_gpu > 0)) return "the start rate must be > 0";
  if (!(o.min_rate > 0 && o.min_rate < o.max_rate)) return "need 0 < min_rate < max_rate";
  if (!(o.screen_share >= 0 && o.screen_share <= 1)) return "the screen share must be in [0, 1]";
  if (o.top < 1 || o.refine_shapes < 0) return "top must be >= 1 and refine_shapes >= 0";
  if (o.parallelism < 1) return "parallelism must be >= 1";
  return "";
}

}  // namespace tandem::plan
