// tandem-plan: the cluster configuration with the highest goodput per GPU for a GPU budget, a
// model, a workload and an SLO on latency percentiles, searched with tandem-sim as the inner loop
// (tools/plan/README.md). Prints the best configurations, why the others lose, the search's wall
// time; writes JSON and a Kustomize overlay of the best.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/serve/workload_flags.h"
#include "common/kv/kv_dtype.h"
#include "common/util/atomic_file.h"
#include "common/util/cli_flags.h"
#include "common/util/lazy_zero_array.h"
#include "common/util/mutex_checks.h"
#include "nlohmann/json.hpp"
#include "tools/plan/kustomize_patch.h"
#include "tools/plan/plan_report.h"
#include "tools/plan/plan_search.h"
#include "tools/plan/sim_evaluator.h"
#include "tools/sim/sim_cluster.h"

namespace {

using json = nlohmann::json;
using tandem::plan::PlanSearchOptions;
using tandem::plan::SloTarget;

constexpr char kIntro[] =
    R"(Usage: tandem-plan --gpus N --gpu NAME --model NAME [workload flags]
                   --slo-ttft-ms X --slo-tpot-ms Y [--slo-percentile 90] [options]

Searches cluster configurations for the highest goodput per GPU: colocated or disaggregated, the
prefill:decode split within --gpus, tensor parallelism per pool, the prefill chunk size, the
local prefill threshold and the placement policy. Each configuration's goodput is the highest
request rate at which the SLO's percentile of TTFT and of TPOT stay within the limits, found by
running the workload through tandem-sim at rates chosen by doubling and bisection. Prints the best
configurations and why the others lose; --out writes JSON, --kustomize-out a Kustomize overlay of
the best configuration over deploy/k8s/base.
)";

struct Options {
  PlanSearchOptions search;
  tandem::sim::SimClusterOptions cluster;
  tandem::bench::WorkloadFlags workload;
  std::optional<double> slo_ttft_ms, slo_tpot_ms;
  double run_duration_s = 0;
  bool no_prefix_caching = false;
  std::string modes = "colocated,disaggregated";
  std::string out, kustomize_out, kustomize_base = "../../base";
  bool quiet = false;
};

// The comma-separated items of `value`, spaces around them dropped, empty ones skipped.
std::vector<std::string> SplitList(std::string_view value) {
  std::vector<std::string> items;
  while (!value.empty()) {
    const size_t comma = std::min(value.find(','), value.size());
    std::string_view item = value.substr(0, comma);
    value.remove_prefix(std::min(comma + 1, value.size()));
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) items.emplace_back(item);
  }
  return items;
}

// "1,2,4" into `out`; "" when every item parses, else what is wrong.
template <typename T>
std::string ParseNumberList(std::string_view value, std::vector<T>* out) {
  out->clear();
  for (const std::string& item : SplitList(value)) {
    int64_t n = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (error != std::errc() || end != item.data() + item.size() || n < 0) {
      return absl::StrCat("expects non-negative integers separated by commas, got '", item, "'");
    }
    out->push_back(static_cast<T>(n));
  }
  return out->empty() ? "expects at least one value" : "";
}

void AddPlanFlags(tandem::FlagSet& flags, Options* o) {
  tandem::plan::SearchSpace* space = &o->search.space;
  tandem::sim::SimClusterOptions& c = o->cluster;
  flags.Section("Hardware and model");
  flags.Number("gpus", &space->gpus, {"N", "the GPU budget (default 8)"});
  flags.String("gpu", &c.gpu, {"NAME", "h100, h200, a100, ... (default h100)"});
  flags.String("model", &c.model,
               {"NAME|DIR",
                "llama-3.1-8b, llama-3.1-70b, or a model directory (default "
                "llama-3.1-8b)"});
  flags.Number("memory-utilization", &c.memory_utilization,
               {"F", "share of each GPU's memory for weights + KV cache (default 0.9)"});
  flags.Custom("kv-cache-dtype",
               {"auto|bf16|fp8_e4m3|f32",
                "what every node's KV cache stores (default auto = bf16): KV blocks, decode KV "
                "reads and handoff bytes follow it"},
               [&c](std::string_view value) -> std::string {
                 std::optional<tandem::KvCacheDType> d = tandem::ParseKvCacheDType(value);
                 if (!d.has_value()) return "expects auto, bf16, fp8_e4m3 or f32";
                 c.kv_dtype = d->Or(tandem::DType::kBF16);
                 return "";
               });
  flags.Section("Search space");
  flags.Custom("tp", {"N,N,...", "tensor-parallel sizes per pool (default 1,2,4,8)"},
               [space](std::string_view v) { return ParseNumberList(v, &space->tensor_parallel); });
  flags.Custom("shapes",
               {"LIST",
                "evaluate these shapes instead of searching shapes (their knobs are still "
                "searched), e.g. colocated:8xTP8,disaggregated:20xTP2+3xTP8"},
               [space](std::string_view v) -> std::string {
                 for (const std::string& item : SplitList(v)) {
                   absl::StatusOr<tandem::plan::PlanConfig> shape = tandem::plan::ParseShape(item);
                   if (!shape.ok()) return std::string(shape.status().message());
                   space->shapes.push_back(*shape);
                 }
                 return "";
               });
  flags.String("modes", &o->modes,
               {"LIST",
                "colocated, disaggregated, auto (every node decodes and prefills for the "
                "others), or several (default colocated,disaggregated)"});
  flags.Custom("chunks",
               {"N,N,...",
                "prefill chunk sizes (--max-num-batched-tokens; default "
                "512,2048,8192; the middle one is the base)"},
               [space](std::string_view v) { return ParseNumberList(v, &space->chunk_sizes); });
  flags.Custom(
      "local-prefill-thresholds",
      {"N,N,...",
       "disaggregated: local prefill thresholds (default 0,512,2048; the first "
       "is the base)"},
      [space](std::string_view v) { return ParseNumberList(v, &space->local_prefill_thresholds); });
  flags.Custom("policies",
               {"LIST",
                "placement policies (default cost,round_robin,least_loaded,prefix_aware; "
                "the first is the base)"},
               [space](std::string_view v) -> std::string {
                 space->policies.clear();
                 for (const std::string& name : SplitList(v)) {
                   auto policy = tandem::ParsePlacementPolicy(name);
                   if (!policy.has_value()) return absl::StrCat("unknown policy '", name, "'");
                   space->policies.push_back(*policy);
                 }
                 return space->policies.empty() ? "expects at least one policy" : "";
               });
  flags.Custom(
      "speculative-tokens",
      {"N,N,...",
       "drafts per decode step searched (speculative decoding; default 0 = off; the "
       "first is the base), each draft right with probability --sim-acceptance-rate"},
      [space](std::string_view v) { return ParseNumberList(v, &space->speculative_tokens); });
  flags.Number("sim-acceptance-rate", &c.spec_acceptance_rate,
               {"P",
                "with --speculative-tokens: the chance that each draft is right, the quality "
                "of the drafts the cluster would run (default 0.7)"});
  flags.String("sim-draft-model", &c.draft_model,
               {"NAME|DIR",
                "with --speculative-tokens: the drafts come from this draft model (llama-3.2-1b, "
                "llama-3.2-3b, or a config.json's directory), its passes priced on the decode "
                "GPUs and its weights and KV taken from their memory (default: drafts are free, "
                "as prompt lookup's nearly are)"});
  flags.Section("Engine and router (as simulated, and as the Kustomize overlay sets them)");
  flags.Number("max-num-seqs", &c.max_num_seqs, {"N", "sequences per step (default 256)"});
  flags.Number("block-size", &c.block_size, {"N", "tokens per KV block (default 16)"});
  flags.Switch("no-prefix-caching", &o->no_prefix_caching, "turn the nodes' prefix cache off");
  flags.Number("kv-link-gbps", &c.kv_link_gbps,
               {"G", "KV link bandwidth per (prefill, decode) node pair, Gb/s (default 400)"});
  flags.Number("kv-link-latency-us", &c.kv_link_latency_us, {"US", "KV link latency (default 10)"});
  flags.Number("load-poll-ms", &c.load_poll_ms,
               {"MS", "the router's --health-interval-ms (default 500)"});
  flags.Number("router-overhead-us", &c.router_overhead_us,
               {"US", "the router's added time to first token (default 750)"});
  flags.Number("hop-latency-us", &c.hop_latency_us,
               {"US", "one network hop, one way (default 50)"});
  flags.Section("Search");
  flags.Number("top", &o->search.top,
               {"N",
                "configurations whose goodput is searched to the tolerance and shown in the "
                "table (default 5)"});
  flags.Number("refine-shapes", &o->search.refine_shapes,
               {"N", "best shapes whose chunk, threshold and policy are searched (default 3)"});
  flags.Number("rate-tolerance", &o->search.tolerance,
               {"F", "bisect each goodput to within this share (default 0.05)"});
  flags.Number("start-rate-per-gpu", &o->search.start_rate_per_gpu,
               {"R", "the first configuration's first rate, req/s per GPU (default 0.25)"});
  flags.Number("max-rate", &o->search.max_rate, {"R", "never probe above R req/s (default 1e5)"});
  flags.Number("screen-share", &o->search.screen_share,
               {"F",
                "run this share of a run's requests first and fail the rate when that already "
                "breaks the SLO (default 0.25; 0: off)"});
  tandem::bench::AddDatasetFlags(flags, &o->workload);
  flags.Section("Load");
  flags.Number("run-duration-s", &o->run_duration_s,
               {"S",
                "each run at rate r sends the dataset's first ceil(r * S) requests, so every "
                "run spans about S s of arrivals (default 0: every run sends all of them)"});
  flags.Number("burstiness", &o->workload.burstiness,
               {"F", "gamma arrivals' shape: 1 Poisson, < 1 burstier (default 1)"});
  flags.Section("SLO");
  flags.Number("slo-ttft-ms", &o->slo_ttft_ms, {"MS", "TTFT limit"});
  flags.Number("slo-tpot-ms", &o->slo_tpot_ms, {"MS", "TPOT limit"});
  flags.Number("slo-percentile", &o->search.slo.percentile,
               {"Q",
                "the SLO holds when the Q-th percentile of TTFT and of TPOT are within the "
                "limits (default 90)"});
  flags.Section("Output");
  flags.String("out", &o->out, {"FILE.json", "every configuration searched, ranked"});
  flags.String("kustomize-out", &o->kustomize_out,
               {"DIR", "write DIR/kustomization.yaml: the best configuration over the base"});
  flags.String("kustomize-base", &o->kustomize_base,
               {"PATH", "the overlay's base, relative to DIR (default ../../base)"});
  flags.Switch("quiet", &o->quiet, "no progress line per configuration on stderr");
  flags.Number("threads", &o->search.parallelism,
               {"N",
                "configurations simulated at once (default: the machine's cores); the "
                "result does not depend on it"});
}

std::string CompleteOptions(Options* o) {
  tandem::plan::SearchSpace& space = o->search.space;
  space.colocated = space.disaggregated = space.auto_mode = false;
  for (const std::string& mode : SplitList(o->modes)) {
    std::optional<tandem::ServingMode> parsed = tandem::ParseServingMode(mode);
    if (!parsed.has_value()) return "--modes takes colocated, disaggregated and/or auto";
    switch (*parsed) {
      case tandem::ServingMode::kColocated:
        space.colocated = true;
        break;
      case tandem::ServingMode::kDisaggregated:
        space.disaggregated = true;
        break;
      case tandem::ServingMode::kAuto:
        space.auto_mode = true;
        break;
    }
  }
  if (!o->slo_ttft_ms.has_value() && !o->slo_tpot_ms.has_value()) {
    return "give --slo-ttft-ms, --slo-tpot-ms or both";
  }
  if (o->slo_ttft_ms.has_value()) o->search.slo.ttft_s = *o->slo_ttft_ms / 1e3;
  if (o->slo_tpot_ms.has_value()) o->search.slo.tpot_s = *o->slo_tpot_ms / 1e3;
  // The cost policy places against the targets the plan is judged by.
  if (o->slo_ttft_ms.has_value()) o->cluster.placement_slo_ttft_ms = *o->slo_ttft_ms;
  if (o->slo_tpot_ms.has_value()) o->cluster.placement_slo_tpot_ms = *o->slo_tpot_ms;
  o->cluster.prefix_caching = !o->no_prefix_caching;
  if (o->workload.dataset == "trace") {
    return "--dataset trace sends at the trace's times; the planner needs to set the rate";
  }
  if (!(o->run_duration_s >= 0)) return "--run-duration-s must be >= 0";
  if (!(o->workload.burstiness > 0)) return "--burstiness must be > 0";
  return tandem::bench::ValidateWorkloadFlags(o->workload);
}

// Results and plots go through the project's atomic writer (common/util/atomic_file.h): a reader
// never sees half a file.
bool WriteFile(const std::string& path, const std::string& contents) {
  const absl::Status written = tandem::WriteFileAtomically(path, contents);
  if (!written.ok()) std::fprintf(stderr, "tandem-plan: %s\n", written.ToString().c_str());
  return written.ok();
}

std::string SloText(const SloTarget& slo) {
  const std::string p = absl::StrFormat("p%g", slo.percentile);
  std::vector<std::string> parts;
  if (!std::isinf(slo.ttft_s)) {
    parts.push_back(absl::StrCat("TTFT ", p, " <= ", tandem::plan::FormatSeconds(slo.ttft_s)));
  }
  if (!std::isinf(slo.tpot_s)) {
    parts.push_back(absl::StrCat("TPOT ", p, " <= ", tandem::plan::FormatSeconds(slo.tpot_s)));
  }
  return absl::StrJoin(parts, ", ");
}

int Run(Options& o) {
  namespace plan = tandem::plan;
  absl::StatusOr<std::vector<tandem::bench::BenchRequest>> dataset =
      tandem::bench::BuildDataset(o.workload);
  if (!dataset.ok()) {
    std::fprintf(stderr, "tandem-plan: dataset: %s\n", dataset.status().ToString().c_str());
    return 1;
  }
  const int dataset_size = static_cast<int>(dataset->size());
  absl::StatusOr<std::unique_ptr<plan::SimEvaluator>> evaluator =
      plan::SimEvaluator::Create({.cluster = o.cluster,
                                  .dataset = *std::move(dataset),
                                  .run_duration_s = o.run_duration_s,
                                  .burstiness = o.workload.burstiness,
                                  .seed = o.workload.seed,
                                  .slo = o.search.slo});
  if (!evaluator.ok()) {
    std::fprintf(stderr, "tandem-plan: %s\n", evaluator.status().ToString().c_str());
    return 2;
  }
  const std::string hardware =
      absl::StrCat(o.search.space.gpus, " x ", o.cluster.gpu, ", ", o.cluster.model);
  std::printf("tandem-plan: %s; SLO %s; %d requests of %s%s\n", hardware.c_str(),
              SloText(o.search.slo).c_str(), dataset_size, o.workload.dataset.c_str(),
              o.run_duration_s > 0
                  ? absl::StrFormat(", each run %.0f s of arrivals", o.run_duration_s).c_str()
                  : ", all of them in every run");
  std::fflush(stdout);

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto progress = [&](const plan::ConfigResult& c, const plan::PlanResult& so_far) {
    if (o.quiet) return;
    std::string text;
    if (!c.skipped.empty()) {
      text = absl::StrCat("skipped: ", c.skipped);
    } else if (c.bound == plan::GoodputBound::kBelowBar) {
      text = absl::StrFormat("below the table: fails at %.3g req/s", c.above->rate);
    } else if (c.bound == plan::GoodputBound::kZero) {
      text = absl::StrFormat("no goodput: fails at %.3g req/s", c.above->rate);
    } else {
      text = absl::StrFormat("%.3g req/s (%.3g/GPU)", c.goodput, c.GoodputPerGpu());
    }
    std::fprintf(stderr, "[%3zu %6.1f s] %s: %s, %d runs\n", so_far.configs.size(), elapsed(),
                 plan::ConfigName(c.config).c_str(), text.c_str(), c.probes);
  };
  absl::StatusOr<plan::PlanResult> result = plan::RunPlanSearch(o.search, **evaluator, progress);
  const double wall_s = elapsed();
  if (!result.ok()) {
    std::fprintf(stderr, "tandem-plan: %s\n", result.status().ToString().c_str());
    return result.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::fflush(stdout);
  const plan::SimEvaluatorStats sim = (*evaluator)->stats();
  std::fputs(plan::FormatPlanReport(*result, o.search.slo, o.search.top).c_str(), stdout);
  std::printf(
      "\nsearch: %zu configurations, %d runs (%d screens of %.0f%%, %d of them failing), %lld "
      "simulated requests, %.0f s simulated, in %.1f s of wall time on %d threads (the runs "
      "themselves: %.1f s)\n",
      result->configs.size(), result->probes, result->screen_probes, o.search.screen_share * 100,
      result->screens_failed, static_cast<long long>(sim.requests), sim.simulated_s, wall_s,
      o.search.parallelism, sim.wall_s);
  std::fflush(stdout);
  if (sim.short_runs > 0) {
    std::fprintf(stderr,
                 "tandem-plan: %lld runs wanted more requests than the dataset's %d and span less "
                 "than --run-duration-s: raise --num-prompts\n",
                 static_cast<long long>(sim.short_runs), dataset_size);
  }

  const std::vector<size_t> ranking = result->Ranking();
  const plan::ConfigResult* best = ranking.empty() || !result->configs[ranking[0]].Ranked()
                                       ? nullptr
                                       : &result->configs[ranking[0]];
  bool ok = true;
  if (!o.out.empty()) {
    json j = plan::PlanToJson(*result, o.search.slo);
    json config = {{"tool", "tandem-plan"},
                   {"gpus", o.search.space.gpus},
                   {"gpu", o.cluster.gpu},
                   {"model", o.cluster.model},
                   {"kv_cache_dtype", tandem::KvDTypeName(o.cluster.kv_dtype)},
                   {"tp", o.search.space.tensor_parallel},
                   {"max_num_seqs", o.cluster.max_num_seqs},
                   {"speculative_tokens", o.search.space.speculative_tokens},
                   {"spec_acceptance_rate", o.cluster.spec_acceptance_rate},
                   {"draft_model", o.cluster.draft_model},
                   {"block_size", o.cluster.block_size},
                   {"prefix_caching", o.cluster.prefix_caching},
                   {"run_duration_s", o.run_duration_s},
                   {"burstiness", o.workload.burstiness},
                   {"num_prompts", dataset_size}};
    tandem::bench::AddDatasetConfig(o.workload, &config);
    j["config"] = config;
    j["search"] = {{"wall_s", wall_s},
                   {"configurations", result->configs.size()},
                   {"runs", result->probes},
                   {"screens", result->screen_probes},
                   {"screens_failed", result->screens_failed},
                   {"simulated_requests", sim.requests},
                   {"simulated_s", sim.simulated_s},
                   {"sim_wall_s", sim.wall_s}};
    ok = WriteFile(o.out, j.dump(2) + "\n") && ok;
  }
  if (!o.kustomize_out.empty()) {
    if (best == nullptr) {
      std::fprintf(stderr, "tandem-plan: no configuration meets the SLO: no Kustomize overlay\n");
      return 1;
    }
    plan::KustomizeOptions k{.base = o.kustomize_base,
                             .max_num_seqs = o.cluster.max_num_seqs,
                             .block_size = o.cluster.block_size,
                             .prefix_caching = o.cluster.prefix_caching,
                             .load_poll_ms = o.cluster.load_poll_ms,
                             .slo_ttft_ms = o.cluster.placement_slo_ttft_ms,
                             .slo_tpot_ms = o.cluster.placement_slo_tpot_ms,
                             .kv_link_gbps = o.cluster.kv_link_gbps,
                             .disaggregation_hop_us = 2 * o.cluster.hop_latency_us,
                             .draft_model = o.cluster.draft_model};
    k.comment = {
        absl::StrCat("Written by tandem-plan: the best of ", result->configs.size(),
                     " configurations searched for ", hardware, "."),
        absl::StrCat(
            plan::ConfigName(best->config), ": goodput ",
            absl::StrFormat("%.3g req/s (%.3g per GPU)", best->goodput, best->GoodputPerGpu()),
            " at ", SloText(o.search.slo), "."),
        "GPUs per pod = the tensor-parallel size the plan assumed (the cuda backend runs a node on",
        "one GPU today; the sim backend models tensor parallelism with --sim-tp).",
        absl::StrCat("  kubectl apply -k ", o.kustomize_out)};
    absl::Status written = plan::WriteKustomization(o.kustomize_out, best->config, k);
    if (!written.ok()) {
      std::fprintf(stderr, "tandem-plan: %s\n", written.ToString().c_str());
      ok = false;
    }
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Every run the search simulates builds a cluster of KV pools: reuse the last one's memory
  // (lazy_zero_array.h; page faults were a fifth of a search's time on a paravirtual VM).
  tandem::KeepReleasedLazyZeroArrays(true);
  tandem::TurnOffMutexDeadlockDetection();
  Options options;
  options.search.parallelism = std::max(1u, std::thread::hardware_concurrency());
  tandem::FlagSet flags;
  AddPlanFlags(flags, &options);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = CompleteOptions(&options);
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-plan: %s\n", error.c_str());
    return 2;
  }
  return Run(options);
}
