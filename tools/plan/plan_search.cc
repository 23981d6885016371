#include "tools/plan/plan_search.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/engine/speculative.h"
#include "common/util/status_macros.h"

namespace tandem::plan {

namespace {

// The evaluator's ways of saying "this configuration cannot run".
bool IsRefusal(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsFailedPrecondition(status) ||
         absl::IsNotFound(status);
}

// Calls fn(i) for every i in [0, n) on up to `threads` threads (the caller's included), each
// taking the next index as it becomes free.
void ParallelForEach(size_t n, int threads, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads && static_cast<size_t>(t) < n; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& helper : helpers) helper.join();
}

// What a batch's configurations are searched against: the table as the batch began.
struct Standing {
  double bar_per_gpu = 0;   // 0: no bar yet
  double best_per_gpu = 0;  // 0: no goodput yet
};

struct ProbeCounts {
  int probes = 0;
  int screens = 0;
  int screens_failed = 0;
};

class PlanSearch {
 public:
  PlanSearch(const PlanSearchOptions& options, ConfigEvaluator& evaluator,
             const ConfigCallback& on_config)
      : options_(options), space_(options.space), evaluator_(evaluator), on_config_(on_config) {
    std::vector<int32_t> chunks = space_.chunk_sizes;
    std::sort(chunks.begin(), chunks.end());
    base_chunk_ = chunks[chunks.size() / 2];
  }

  absl::StatusOr<PlanResult> Run() {
    RETURN_IF_ERROR(CheckTensorParallelSizes());
    RETURN_IF_ERROR(SearchShapes());
    RETURN_IF_ERROR(SearchKnobs());
    return std::move(result_);
  }

 private:
  // Step 0.
  absl::Status CheckTensorParallelSizes() {
    for (int tp : space_.tensor_parallel) {
      if (tp > space_.gpus) {
        result_.skipped_tp.push_back(
            {tp, absl::StrCat("more GPUs than the budget of ", space_.gpus)});
        continue;
      }
      absl::Status fits = evaluator_.CheckTensorParallel(tp);
      if (fits.ok()) {
        usable_tp_.push_back(tp);
      } else if (IsRefusal(fits)) {
        result_.skipped_tp.push_back({tp, std::string(fits.message())});
      } else {
        return fits;
      }
    }
    return absl::OkStatus();
  }

  // Step 1.
  absl::Status SearchShapes() {
    if (!space_.shapes.empty()) return EvaluateGivenShapes();
    if (space_.colocated) {
      std::vector<PlanConfig> colocated;
      for (int tp : usable_tp_) colocated.push_back(WithBaseKnobs(Colocated(space_.gpus / tp, tp)));
      RETURN_IF_ERROR(EvaluateBatch(colocated).status());
    }
    if (space_.auto_mode) {
      std::vector<PlanConfig> shapes;
      for (int tp : usable_tp_) shapes.push_back(WithBaseKnobs(Auto(space_.gpus / tp, tp)));
      RETURN_IF_ERROR(EvaluateBatch(shapes).status());
    }
    if (!space_.disaggregated) return absl::OkStatus();
    for (int tp : usable_tp_) RETURN_IF_ERROR(SearchSplit(tp, tp));
    const std::optional<double> share = BestPrefillShare();
    if (!share.has_value()) return absl::OkStatus();
    return SearchMixedSplits(*share);
  }

  // Step 1 with SearchSpace::shapes: those, one batch.
  absl::Status EvaluateGivenShapes() {
    std::vector<PlanConfig> configs;
    for (const PlanConfig& shape : space_.shapes) {
      for (int tp : {shape.prefill_tp, shape.decode_tp}) {
        if (tp == 0 || absl::c_linear_search(usable_tp_, tp)) continue;
        return absl::InvalidArgumentError(absl::StrCat(
            ShapeName(shape), ": TP ", tp, " is not searched or not usable", SkippedReason(tp)));
      }
      configs.push_back(WithBaseKnobs(shape));
    }
    return EvaluateBatch(configs).status();
  }

  std::string SkippedReason(int tp) const {
    for (const SkippedTensorParallel& s : result_.skipped_tp) {
      if (s.tp == tp) return absl::StrCat(" (", s.reason, ")");
    }
    return "";
  }

  // Step 1b: coarse to fine over the prefill nodes of one (tpP, tpD) pair.
  absl::Status SearchSplit(int prefill_tp, int decode_tp) {
    const int max_prefill = MaxPrefill(prefill_tp, decode_tp);
    if (max_prefill < 1) return absl::OkStatus();
    const double eighth = space_.gpus / (8.0 * prefill_tp);
    std::vector<int> coarse;
    for (int k = 1; k <= 7; ++k) {
      const int prefill = std::clamp(static_cast<int>(std::lround(k * eighth)), 1, max_prefill);
      if (coarse.empty() || coarse.back() != prefill) coarse.push_back(prefill);
    }
    std::optional<size_t> best;
    int best_prefill = 0;
    RETURN_IF_ERROR(EvaluateSplits(coarse, prefill_tp, decode_tp, &best, &best_prefill));
    if (!best.has_value()) return absl::OkStatus();  // no split reached the table
    for (int step = static_cast<int>(std::lround(eighth)) / 2; step >= 1; step /= 2) {
      std::vector<int> around;
      for (int prefill : {best_prefill - step, best_prefill + step}) {
        if (prefill >= 1 && prefill <= max_prefill) around.push_back(prefill);
      }
      RETURN_IF_ERROR(EvaluateSplits(around, prefill_tp, decode_tp, &best, &best_prefill));
    }
    return absl::OkStatus();
  }

  // Evaluates the splits with `prefill` nodes (one batch) and moves *best to the best of them
  // that beats it.
  absl::Status EvaluateSplits(const std::vector<int>& prefill, int prefill_tp, int decode_tp,
                              std::optional<size_t>* best, int* best_prefill) {
    std::vector<PlanConfig> configs;
    for (int p : prefill) configs.push_back(Split(p, prefill_tp, decode_tp));
    ASSIGN_OR_RETURN(std::vector<size_t> indices, EvaluateBatch(configs));
    for (size_t i = 0; i < indices.size(); ++i) {
      if (Better(indices[i], *best)) {
        *best = indices[i];
        *best_prefill = prefill[i];
      }
    }
    return absl::OkStatus();
  }

  // Step 1c: every mixed pair around `share` of the GPUs in prefill nodes (one batch), then the
  // climbs of all pairs whose best is not P0 together, two steps ahead per batch.
  absl::Status SearchMixedSplits(double share) {
    struct Climb {
      int prefill_tp, decode_tp, max_prefill, start;
      std::optional<size_t> best;
      int direction = 0;  // 0: done
    };
    std::vector<Climb> climbs;
    std::vector<PlanConfig> configs;
    std::vector<size_t> owner;  // the climb of each config
    for (int prefill_tp : usable_tp_) {
      for (int decode_tp : usable_tp_) {
        const int max_prefill = MaxPrefill(prefill_tp, decode_tp);
        if (prefill_tp == decode_tp || max_prefill < 1) continue;
        const int start = std::clamp(
            static_cast<int>(std::lround(share * space_.gpus / prefill_tp)), 1, max_prefill);
        for (int p = std::max(1, start - 1); p <= std::min(max_prefill, start + 1); ++p) {
          configs.push_back(Split(p, prefill_tp, decode_tp));
          owner.push_back(climbs.size());
        }
        climbs.push_back({prefill_tp, decode_tp, max_prefill, start});
      }
    }
    ASSIGN_OR_RETURN(std::vector<size_t> indices, EvaluateBatch(configs));
    for (size_t i = 0; i < indices.size(); ++i) {
      if (Better(indices[i], climbs[owner[i]].best)) climbs[owner[i]].best = indices[i];
    }
    for (Climb& climb : climbs) {
      if (!climb.best.has_value()) continue;
      const int prefill = result_.configs[*climb.best].config.num_prefill;
      climb.direction = prefill == climb.start ? 0 : prefill < climb.start ? -1 : +1;
    }
    while (true) {
      configs.clear();
      owner.clear();
      std::vector<bool> is_jump;
      for (size_t k = 0; k < climbs.size(); ++k) {
        const Climb& climb = climbs[k];
        if (climb.direction == 0) continue;
        const int from = result_.configs[*climb.best].config.num_prefill;
        for (int step = 1; step <= 2; ++step) {  // the second in case the first improves
          const int p = from + step * climb.direction;
          if (p < 1 || p > climb.max_prefill) break;
          configs.push_back(Split(p, climb.prefill_tp, climb.decode_tp));
          owner.push_back(k);
          is_jump.push_back(false);
        }
        const std::optional<int> jump =
            NextDecodeCount(from, climb.direction, climb.prefill_tp, climb.decode_tp);
        if (jump.has_value() && *jump != from + climb.direction) {
          configs.push_back(Split(*jump, climb.prefill_tp, climb.decode_tp));
          owner.push_back(k);
          is_jump.push_back(true);
        }
      }
      if (configs.empty()) return absl::OkStatus();
      ASSIGN_OR_RETURN(indices, EvaluateBatch(configs));
      std::vector<bool> moved(climbs.size(), false), stopped(climbs.size(), false);
      for (size_t i = 0; i < indices.size(); ++i) {
        Climb& climb = climbs[owner[i]];
        if (is_jump[i]) {
          // The next decode count is the way off a plateau of equal goodput per GPU (the steps
          // change only the pool that is not the bottleneck): taken whenever it is better.
          if (Better(indices[i], climb.best)) {
            climb.best = indices[i];
            moved[owner[i]] = true;
            stopped[owner[i]] = false;
          }
          continue;
        }
        if (stopped[owner[i]]) continue;
        if (Better(indices[i], climb.best)) {
          climb.best = indices[i];
          moved[owner[i]] = true;
        } else {
          stopped[owner[i]] = true;
        }
      }
      for (size_t k = 0; k < climbs.size(); ++k) {
        if (stopped[k] || !moved[k]) climbs[k].direction = 0;
      }
    }
  }

  // Step 1c's jump: from `prefill` nodes, the nearest prefill count in `direction` at which the
  // decode pool changes size (one more decode node going down, one fewer going up; the prefill
  // pool as large as the budget then allows going down, as small as it forces going up), or
  // nullopt past the budget's ends. Between two such counts only the prefill pool changes, so
  // the goodput per GPU of a decode-bound split stays flat there and a climb by single steps
  // stops on it.
  std::optional<int> NextDecodeCount(int prefill, int direction, int prefill_tp,
                                     int decode_tp) const {
    const int decode = (space_.gpus - prefill * prefill_tp) / decode_tp;
    if (direction < 0) {
      const int next = (space_.gpus - (decode + 1) * decode_tp) / prefill_tp;
      if (next < 1 || next >= prefill) return std::nullopt;
      return next;
    }
    if (decode <= 1) return std::nullopt;
    const int next = (space_.gpus - decode * decode_tp) / prefill_tp + 1;
    if (next > MaxPrefill(prefill_tp, decode_tp)) return std::nullopt;
    return next;
  }

  // Step 2: dimension by dimension, every shape's variants of its best so far in one batch.
  absl::Status SearchKnobs() {
    std::vector<size_t> best;  // the best configuration of each of the best shapes
    for (size_t index : result_.Ranking()) {
      if (static_cast<int>(best.size()) >= options_.refine_shapes) break;
      const ConfigResult& c = result_.configs[index];
      if (!c.Ranked()) break;
      const bool seen = std::any_of(best.begin(), best.end(), [&](size_t s) {
        return result_.configs[s].config.ShapeKey() == c.config.ShapeKey();
      });
      if (!seen) best.push_back(index);
    }
    auto dimension = [&](const auto& values, auto set, bool colocated_too) -> absl::Status {
      std::vector<PlanConfig> configs;
      std::vector<size_t> owner;  // the shape of each
      for (size_t s = 0; s < best.size(); ++s) {
        const PlanConfig& center = result_.configs[best[s]].config;
        if (!colocated_too && center.mode == ServingMode::kColocated) continue;
        for (const auto& value : values) {
          PlanConfig config = center;
          set(config, value);
          configs.push_back(config);
          owner.push_back(s);
        }
      }
      // A variant must beat its shape's best by more than the tolerance to be searched.
      std::vector<double> entry_per_gpu;
      for (size_t s : owner) {
        entry_per_gpu.push_back(result_.configs[best[s]].GoodputPerGpu() *
                                (1 + options_.tolerance));
      }
      ASSIGN_OR_RETURN(std::vector<size_t> indices, EvaluateBatch(configs, entry_per_gpu));
      for (size_t i = 0; i < indices.size(); ++i) {
        std::optional<size_t> current = best[owner[i]];
        if (Better(indices[i], current)) best[owner[i]] = indices[i];
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(dimension(
        space_.chunk_sizes, [](PlanConfig& c, int32_t v) { c.max_num_batched_tokens = v; }, true));
    RETURN_IF_ERROR(dimension(
        space_.local_prefill_thresholds,
        [](PlanConfig& c, int64_t v) { c.local_prefill_threshold = v; }, false));
    RETURN_IF_ERROR(dimension(
        space_.policies, [](PlanConfig& c, PlacementPolicy v) { c.policy = v; }, true));
    return dimension(
        space_.speculative_tokens, [](PlanConfig& c, int32_t v) { c.num_speculative_tokens = v; },
        true);
  }

  // Step 3: each configuration's result, searched once; the new ones of `configs` searched in
  // parallel against the standing as the batch began, kept in the batch's order.
  // `entry_per_gpu` (empty, or one per config): a bar of the config's own, used when higher.
  absl::StatusOr<std::vector<size_t>> EvaluateBatch(const std::vector<PlanConfig>& configs,
                                                    const std::vector<double>& entry_per_gpu = {}) {
    std::vector<size_t> indices(configs.size());
    std::vector<PlanConfig> fresh;
    std::vector<Standing> standing;
    const Standing table{BarPerGpu(), BestPerGpu()};
    for (size_t i = 0; i < configs.size(); ++i) {
      auto [it, inserted] =
          memo_.try_emplace(configs[i].Key(), result_.configs.size() + fresh.size());
      if (inserted) {
        fresh.push_back(configs[i]);
        standing.push_back(table);
        if (i < entry_per_gpu.size()) {
          standing.back().bar_per_gpu = std::max(table.bar_per_gpu, entry_per_gpu[i]);
        }
      } else {
        ++result_.memo_hits;
      }
      indices[i] = it->second;
    }
    std::vector<absl::StatusOr<ConfigResult>> searched(fresh.size());
    std::vector<ProbeCounts> counts(fresh.size());
    ParallelForEach(fresh.size(), options_.parallelism,
                    [&](size_t i) { searched[i] = SearchRate(fresh[i], standing[i], &counts[i]); });
    for (size_t i = 0; i < fresh.size(); ++i) {
      result_.probes += counts[i].probes;
      result_.screen_probes += counts[i].screens;
      result_.screens_failed += counts[i].screens_failed;
      if (!searched[i].ok() && !IsRefusal(searched[i].status())) return searched[i].status();
      if (searched[i].ok()) {
        searched[i]->probes = counts[i].probes;
      } else {
        searched[i] = ConfigResult{.config = fresh[i],
                                   .probes = counts[i].probes,
                                   .skipped = std::string(searched[i].status().message())};
      }
      result_.configs.push_back(*std::move(searched[i]));
      if (on_config_) on_config_(result_.configs.back(), result_);
    }
    return indices;
  }

  absl::StatusOr<size_t> Evaluate(const PlanConfig& config) {
    ASSIGN_OR_RETURN(std::vector<size_t> indices, EvaluateBatch({config}));
    return indices[0];
  }

  // The rate search (the header's numbered steps). Reads nothing of result_: batches run it on
  // several threads.
  absl::StatusOr<ConfigResult> SearchRate(const PlanConfig& config, const Standing& standing,
                                          ProbeCounts* counts) const {
    ConfigResult r{.config = config};
    std::optional<ProbeStats> pass, fail;
    auto probe = [&](double rate) -> absl::Status {
      ASSIGN_OR_RETURN(ProbeStats p, Probe(config, rate, counts));
      if (JudgeProbe(p, options_.slo) == SloBreach::kNone) {
        if (!pass.has_value() || rate > pass->rate) pass = p;
      } else if (!fail.has_value() || rate < fail->rate) {
        fail = p;
      }
      return absl::OkStatus();
    };
    const int gpus = config.Gpus();
    const double bar = standing.bar_per_gpu * gpus;
    if (bar > 0) {  // 1.
      RETURN_IF_ERROR(probe(std::min(bar, options_.max_rate)));
      if (fail.has_value()) return Finish(std::move(r), pass, fail, GoodputBound::kBelowBar);
      const double best = std::min(standing.best_per_gpu * gpus, options_.max_rate);
      if (best > pass->rate * (1 + options_.tolerance)) RETURN_IF_ERROR(probe(best));
    } else {  // 2.
      const double best = standing.best_per_gpu;
      const double start = (best > 0 ? best : options_.start_rate_per_gpu) * gpus;
      RETURN_IF_ERROR(probe(std::clamp(start, options_.min_rate, options_.max_rate)));
    }
    double factor = standing.best_per_gpu > 0  // 3.
                        ? (1 + options_.tolerance) * (1 + options_.tolerance)
                        : 2.0;
    while (!fail.has_value()) {
      if (pass->rate >= options_.max_rate) {
        return Finish(std::move(r), pass, fail, GoodputBound::kAboveMax);
      }
      RETURN_IF_ERROR(probe(std::min(pass->rate * factor, options_.max_rate)));
      factor *= factor;
    }
    while (!pass.has_value()) {
      if (fail->rate <= options_.min_rate) {
        return Finish(std::move(r), pass, fail, GoodputBound::kZero);
      }
      RETURN_IF_ERROR(probe(std::max(fail->rate / factor, options_.min_rate)));
      factor *= factor;
    }
    while (fail->rate > pass->rate * (1 + options_.tolerance)) {  // 4.
      RETURN_IF_ERROR(probe(std::sqrt(pass->rate * fail->rate)));
    }
    return Finish(std::move(r), pass, fail, GoodputBound::kExact);
  }

  ConfigResult Finish(ConfigResult r, const std::optional<ProbeStats>& pass,
                      const std::optional<ProbeStats>& fail, GoodputBound bound) const {
    r.bound = bound;
    r.passed = pass;
    r.goodput = pass.has_value() ? pass->rate : 0;
    r.above = fail;
    r.breaks_first = fail.has_value() ? JudgeProbe(*fail, options_.slo) : SloBreach::kNone;
    if (pass.has_value()) {
      r.slo_load = std::max(pass->ttft_s / options_.slo.ttft_s, pass->tpot_s / options_.slo.tpot_s);
    }
    return r;
  }

  // One rate, screened first when screen_share is in (0, 1).
  absl::StatusOr<ProbeStats> Probe(const PlanConfig& config, double rate,
                                   ProbeCounts* counts) const {
    const double share = options_.screen_share;
    if (share > 0 && share < 1) {
      ++counts->probes;
      ++counts->screens;
      ASSIGN_OR_RETURN(ProbeStats screen, evaluator_.Probe(config, rate, share));
      if (JudgeProbe(screen, options_.slo) != SloBreach::kNone) {
        ++counts->screens_failed;
        return screen;
      }
    }
    ++counts->probes;
    return evaluator_.Probe(config, rate, 1.0);
  }

  // Is configs[index] ranked and better per GPU than `best` (none: any ranked one is)?
  bool Better(size_t index, const std::optional<size_t>& best) const {
    const ConfigResult& c = result_.configs[index];
    if (!c.Ranked()) return false;
    return !best.has_value() || c.GoodputPerGpu() > result_.configs[*best].GoodputPerGpu();
  }

  // The top-th best goodput per GPU so far; 0 while fewer configurations are ranked.
  double BarPerGpu() const {
    std::vector<double> ranked;
    for (const ConfigResult& c : result_.configs) {
      if (c.Ranked()) ranked.push_back(c.GoodputPerGpu());
    }
    if (options_.top < 1 || static_cast<int>(ranked.size()) < options_.top) return 0;
    std::nth_element(ranked.begin(), ranked.begin() + (options_.top - 1), ranked.end(),
                     std::greater<>());
    return ranked[options_.top - 1];
  }

  double BestPerGpu() const {
    double best = 0;
    for (const ConfigResult& c : result_.configs) {
      if (c.Ranked()) best = std::max(best, c.GoodputPerGpu());
    }
    return best;
  }

  // The prefill share of GPUs of the best-ranked disaggregated configuration (else of the one
  // with the highest ceiling); none when no disaggregated configuration ran.
  std::optional<double> BestPrefillShare() const {
    for (size_t index : result_.Ranking()) {
      const PlanConfig& c = result_.configs[index].config;
      if (c.mode == ServingMode::kDisaggregated && result_.configs[index].skipped.empty()) {
        return static_cast<double>(c.num_prefill * c.prefill_tp) / space_.gpus;
      }
    }
    return std::nullopt;
  }

  // The most prefill nodes of prefill_tp GPUs that leave room for one decode node.
  int MaxPrefill(int prefill_tp, int decode_tp) const {
    return (space_.gpus - decode_tp) / prefill_tp;
  }

  PlanConfig Split(int num_prefill, int prefill_tp, int decode_tp) const {
    return WithBaseKnobs(Disaggregated(
        num_prefill, prefill_tp, (space_.gpus - num_prefill * prefill_tp) / decode_tp, decode_tp));
  }

  PlanConfig WithBaseKnobs(PlanConfig config) const {
    config.max_num_batched_tokens = base_chunk_;
    config.local_prefill_threshold =
        HasLocalPrefillThreshold(config.mode) ? space_.local_prefill_thresholds.front() : 0;
    config.policy = space_.policies.front();
    config.num_speculative_tokens = space_.speculative_tokens.front();
    return config;
  }

  const PlanSearchOptions& options_;
  const SearchSpace& space_;
  ConfigEvaluator& evaluator_;
  const ConfigCallback& on_config_;
  int32_t base_chunk_ = 0;
  std::vector<int> usable_tp_;
  std::map<decltype(PlanConfig().Key()), size_t> memo_;
  PlanResult result_;
};

}  // namespace

absl::StatusOr<PlanResult> RunPlanSearch(const PlanSearchOptions& options,
                                         ConfigEvaluator& evaluator,
                                         const ConfigCallback& on_config) {
  if (std::string error = ValidatePlanSearchOptions(options); !error.empty()) {
    return absl::InvalidArgumentError(error);
  }
  return PlanSearch(options, evaluator, on_config).Run();
}

}  // namespace tandem::plan
