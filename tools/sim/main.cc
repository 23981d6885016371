// tandem-sim: a tandem cluster simulated in virtual time (tools/sim/README.md). Takes the hardware,
// the cluster and tandem-bench's workload flags, and reports what tandem-bench would: TTFT, TPOT,
// ITL, E2E, SLO attainment and, for a sweep of rates, the goodput; the same JSON and SVG.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/serve/arrivals.h"
#include "bench/serve/bench_report.h"
#include "bench/serve/bench_sweep.h"
#include "bench/serve/workload_flags.h"
#include "common/engine/speculative.h"
#include "common/kv/kv_dtype.h"
#include "common/util/atomic_file.h"
#include "common/util/cli_flags.h"
#include "nlohmann/json.hpp"
#include "tools/sim/sim_cluster.h"

namespace {

using json = nlohmann::json;
using tandem::sim::SimClusterOptions;

constexpr char kIntro[] =
    R"(Usage: tandem-sim [options]

Simulates a tandem cluster in virtual time, in one process: each node's own Scheduler and
BlockManager (the project's code) decide every step, the sim backend's roofline model prices it,
the router's Placer places every request on load reports as stale as the real router's. Takes
tandem-bench's dataset, rate and SLO flags and reports what tandem-bench would, in seconds of the
modelled hardware.
)";

struct Options {
  SimClusterOptions cluster;
  std::string mode = "colocated";
  std::string policy = "cost";  // the router's default (router/placement.h)
  bool no_prefix_caching = false;
  bool no_step_jumps = false;
  bool no_placement_receipts = false;
  tandem::SpeculativeOptions speculative;
  std::string kill_node_at;
  tandem::bench::WorkloadFlags workload;
  std::string out, plot, title = "tandem-sim";
  bool no_requests_in_json = false;
};

void AddSimFlags(tandem::FlagSet& flags, Options* o) {
  SimClusterOptions& c = o->cluster;
  flags.Section("Hardware and model");
  flags.String("gpu", &c.gpu, {"NAME", "h100, h200, a100, ... (default h100)"});
  flags.String("model", &c.model,
               {"NAME|DIR",
                "llama-3.1-8b, llama-3.1-70b, or a model directory's config.json "
                "(default llama-3.1-8b)"});
  flags.Number("tp", &c.tensor_parallel, {"N", "GPUs per node, tensor-parallel (default 1)"});
  flags.Number("prefill-tp", &c.prefill_tensor_parallel,
               {"N", "disaggregated: GPUs per prefill node (default: --tp)"});
  flags.Number("decode-tp", &c.decode_tensor_parallel,
               {"N", "GPUs per decode node (default: --tp)"});
  flags.Number("memory-utilization", &c.memory_utilization,
               {"F", "share of each GPU's memory for weights + KV cache (default 0.9)"});
  flags.Number("kv-blocks", &c.num_kv_blocks,
               {"N", "KV blocks per node instead of what fits (default 0)"});
  flags.Custom("kv-cache-dtype",
               {"auto|bf16|fp8_e4m3|f32",
                "what the KV cache stores (default auto = bf16): sets KV blocks, decode KV reads "
                "and handoff bytes"},
               [&c](std::string_view value) -> std::string {
                 std::optional<tandem::KvCacheDType> d = tandem::ParseKvCacheDType(value);
                 if (!d.has_value()) return "expects auto, bf16, fp8_e4m3 or f32";
                 c.kv_dtype = d->Or(tandem::DType::kBF16);
                 return "";
               });
  flags.Section("Cluster");
  flags.String("mode", &o->mode,
               {"MODE",
                "colocated | disaggregated | auto (default colocated; auto: --decode nodes "
                "that each prefill for the others, or for themselves, by the policy's choice)"});
  flags.Number("prefill", &c.num_prefill, {"N", "disaggregated: prefill nodes (default 0)"});
  flags.Number("decode", &c.num_decode,
               {"N", "nodes that decode (colocated: all nodes; default 1)"});
  flags.Number("local-prefill-threshold", &c.local_prefill_threshold,
               {"N",
                "disaggregated: prompts whose uncached part is shorter prefill on the decode "
                "node (default 0: never)"});
  flags.Number("kv-link-gbps", &c.kv_link_gbps,
               {"G", "KV link bandwidth per (prefill, decode) node pair, Gb/s (default 400)"});
  flags.Number("kv-link-latency-us", &c.kv_link_latency_us, {"US", "KV link latency (default 10)"});
  flags.Number("block-size", &c.block_size, {"N", "tokens per KV block (default 16)"});
  flags.Number("max-num-batched-tokens", &c.max_num_batched_tokens,
               {"N", "tokens per step, each node (default 2048)"});
  flags.Number("max-num-seqs", &c.max_num_seqs, {"N", "sequences per step (default 256)"});
  flags.Switch("no-prefix-caching", &o->no_prefix_caching, "turn the nodes' prefix cache off");
  flags.Switch("no-step-jumps", &o->no_step_jumps,
               "simulate every decode step as its own event (the same results, slower)");
  flags.String("policy", &o->policy,
               {"NAME",
                "round_robin | least_loaded | prefix_aware | cost (default cost, as the "
                "router's)"});
  flags.Number("routers", &c.num_routers,
               {"N", "router replicas, each with its own view of the nodes (default 1)"});
  flags.Number("placement-seed", &c.placement_seed,
               {"N", "seeds the cost policy's choice among near-equal nodes (default 0)"});
  flags.Switch("no-placement-receipts", &o->no_placement_receipts,
               "each load report forgets what the router placed before it, instead of only what "
               "the node's receipt says it took in (the router before receipts)");
  flags.Number("load-poll-ms", &c.load_poll_ms,
               {"MS",
                "the router reads load reports this often (its --health-interval-ms; "
                "default 500)"});
  flags.Custom("load-poll-times",
               {"MS,MS,...",
                "the router's polls after the first at 0 at these modelled times (a real "
                "router's, from its --verbose log: tools/sim/validate.py), then every "
                "--load-poll-ms"},
               [&c](std::string_view value) -> std::string {
                 c.load_poll_times_ns.clear();
                 for (absl::string_view part : absl::StrSplit(std::string(value), ',')) {
                   double ms = 0;
                   if (!absl::SimpleAtod(part, &ms) || !std::isfinite(ms) || ms < 0) {
                     return "expects times in ms >= 0, separated by commas";
                   }
                   c.load_poll_times_ns.push_back(std::llround(ms * 1e6));
                 }
                 return "";
               });
  flags.Number("router-overhead-us", &c.router_overhead_us,
               {"US",
                "the router's added time to first token, both directions (default 750, "
                "measured by bench/router_overhead)"});
  flags.Number("hop-latency-us", &c.hop_latency_us,
               {"US", "one network hop, one way (default 50)"});
  tandem::AddSpeculativeFlags(flags, &o->speculative);
  flags.String("sim-draft-model", &c.draft_model,
               {"NAME|DIR",
                "with --speculative sim: the drafts come from this draft model (llama-3.2-1b, "
                "llama-3.2-3b, or a config.json's directory), whose passes each decode step pays "
                "for and whose weights and KV share the decode GPUs (default: drafts are free)"});
  flags.Section("Faults");
  flags.String("kill-node-at", &o->kill_node_at,
               {"T:NAME,...", "kill node NAME (prefill-N, decode-N) T seconds into the workload"});
  flags.Number("kill-random-node-every", &c.faults.kill_random_node_every_s,
               {"S", "kill a random live node every S seconds (default 0: never)"});
  flags.Number("node-restart-s", &c.faults.node_restart_s,
               {"S", "a killed node is back, empty, after S seconds (default 30; 0: never)"});
  flags.Number("max-retries", &c.faults.max_retries,
               {"N", "the router's --max-retries (default 2)"});
  flags.Number("migration-limit", &c.faults.migration_limit,
               {"N", "the router's --migration-limit (default 3)"});
  tandem::bench::AddDatasetFlags(flags, &o->workload);
  flags.Section("Load");
  tandem::bench::AddRateFlags(flags, &o->workload);
  tandem::bench::AddSloFlags(flags, &o->workload);
  flags.Section("Output");
  flags.String("out", &o->out, {"FILE.json", "results, as tandem-bench writes them, + \"sim\""});
  flags.Switch("no-requests-in-json", &o->no_requests_in_json,
               "leave the per-request records out of the JSON");
  flags.String("plot", &o->plot, {"FILE.svg", "latency CDFs (a sweep: attainment by rate)"});
  flags.String("title", &o->title, {"TEXT", "the plot's title"});
}

std::string CompleteOptions(Options* o) {
  std::optional<tandem::ServingMode> mode = tandem::ParseServingMode(o->mode);
  if (!mode.has_value()) return "--mode must be colocated, disaggregated or auto";
  o->cluster.mode = *mode;
  std::optional<tandem::PlacementPolicy> policy = tandem::ParsePlacementPolicy(o->policy);
  if (!policy.has_value()) {
    return "--policy must be round_robin, least_loaded, prefix_aware or cost";
  }
  o->cluster.policy = *policy;
  o->cluster.placement_receipts = !o->no_placement_receipts;
  // The cost policy places against the SLO the run is judged by.
  const tandem::bench::SloLimits slo = tandem::bench::SloOf(o->workload);
  if (slo.ttft_s.has_value()) o->cluster.placement_slo_ttft_ms = *slo.ttft_s * 1e3;
  if (slo.tpot_s.has_value()) o->cluster.placement_slo_tpot_ms = *slo.tpot_s * 1e3;
  o->cluster.prefix_caching = !o->no_prefix_caching;
  o->cluster.step_jumps = !o->no_step_jumps;
  if (absl::Status s = o->speculative.Validate(); !s.ok()) return std::string(s.message());
  if (o->speculative.method == tandem::SpeculativeMethod::kNgram) {
    return "--speculative ngram needs text; tandem-sim models a draft by how often it is right: "
           "--speculative sim --sim-acceptance-rate P";
  }
  if (o->speculative.method == tandem::SpeculativeMethod::kDraft) {
    return "--speculative draft: tandem-sim models a draft by how often it is right; for a draft "
           "model's passes: --speculative sim --sim-acceptance-rate P --sim-draft-model NAME";
  }
  if (!o->cluster.draft_model.empty() && o->speculative.method != tandem::SpeculativeMethod::kSim) {
    return "--sim-draft-model prices the drafts of --speculative sim (add --speculative sim "
           "--sim-acceptance-rate P)";
  }
  if (o->speculative.method == tandem::SpeculativeMethod::kSim) {
    o->cluster.num_speculative_tokens = o->speculative.num_speculative_tokens;
    o->cluster.spec_acceptance_rate = o->speculative.sim_acceptance_rate;
  }
  absl::StatusOr<std::vector<tandem::sim::NodeKill>> kills =
      tandem::sim::ParseNodeKills(o->kill_node_at);
  if (!kills.ok()) return std::string(kills.status().message());
  o->cluster.faults.kills = *std::move(kills);
  o->cluster.faults.seed = o->workload.seed + 1;
  if (o->cluster.tensor_parallel < 1 || o->cluster.prefill_tensor_parallel < 0 ||
      o->cluster.decode_tensor_parallel < 0) {
    return "--tp must be >= 1, --prefill-tp and --decode-tp >= 0";
  }
  if (!(o->cluster.memory_utilization > 0 && o->cluster.memory_utilization <= 1)) {
    return "--memory-utilization must be in (0, 1]";
  }
  if (!(o->cluster.kv_link_gbps > 0) || o->cluster.kv_link_latency_us < 0) {
    return "--kv-link-gbps must be > 0 and --kv-link-latency-us >= 0";
  }
  if (o->cluster.router_overhead_us < 0 || o->cluster.hop_latency_us < 0) {
    return "--router-overhead-us and --hop-latency-us must be >= 0";
  }
  // A trace's prompts are built when they are sent and freed when they end: an hour of a
  // thousand GPUs' traffic fits in memory.
  o->workload.defer_trace_prompts = true;
  return tandem::bench::ValidateWorkloadFlags(o->workload);
}

// Results and plots go through the project's atomic writer (common/util/atomic_file.h): a reader
// never sees half a file.
bool WriteFile(const std::string& path, const std::string& contents) {
  const absl::Status written = tandem::WriteFileAtomically(path, contents);
  if (!written.ok()) std::fprintf(stderr, "tandem-sim: %s\n", written.ToString().c_str());
  return written.ok();
}

int Run(const Options& o) {
  namespace bench = tandem::bench;
  absl::StatusOr<std::vector<bench::BenchRequest>> dataset = bench::BuildDataset(o.workload);
  if (!dataset.ok()) {
    std::fprintf(stderr, "tandem-sim: dataset: %s\n", dataset.status().ToString().c_str());
    return 1;
  }
  const bench::SloLimits slo = bench::SloOf(o.workload);
  bench::BenchReport report;
  report.slo = slo;
  json sim_runs = json::array();
  std::vector<bench::SweepPoint> points;
  for (double rate : bench::Rates(o.workload)) {
    absl::StatusOr<std::vector<double>> arrivals = bench::ArrivalTimes(
        {.rate = rate, .burstiness = o.workload.burstiness, .seed = o.workload.seed},
        static_cast<int>(dataset->size()));
    if (!arrivals.ok()) {
      std::fprintf(stderr, "tandem-sim: %s\n", arrivals.status().ToString().c_str());
      return 1;
    }
    absl::StatusOr<tandem::sim::SimRun> run =
        tandem::sim::RunSimulation(o.cluster, *dataset, *arrivals);
    if (!run.ok()) {
      std::fprintf(stderr, "tandem-sim: %s\n", run.status().ToString().c_str());
      return run.status().code() == absl::StatusCode::kInvalidArgument ||
                     run.status().code() == absl::StatusCode::kNotFound
                 ? 2
                 : 1;
    }
    double first = INFINITY, last = 0;
    for (const bench::RequestResult& r : run->results) {
      first = std::min(first, r.start_s);
      last = std::max(last, r.start_s + r.e2e_s);
    }
    const double duration = run->results.empty() ? 0 : last - first;
    bench::RunRecord record{.rate = rate,
                            .summary = bench::SummarizeRun(run->results, duration, rate, slo),
                            .results = std::move(run->results)};
    std::fputs(bench::FormatRunTable(record.summary, slo).c_str(), stdout);
    std::printf(
        "sim: %.1f s simulated in %.2f s of wall time, %lld events, %lld steps (%lld in %lld "
        "jumps), %lld preemptions\n",
        run->stats.simulated_s, run->stats.wall_s, static_cast<long long>(run->stats.events),
        static_cast<long long>(run->stats.steps), static_cast<long long>(run->stats.jumped_steps),
        static_cast<long long>(run->stats.decode_runs),
        static_cast<long long>(run->stats.preemptions));
    if (run->stats.spec_verifications > 0) {
      std::printf(
          "speculation: %lld verifications, %lld drafts, %lld accepted (%.1f%%), %.2f "
          "tokens per verification\n",
          static_cast<long long>(run->stats.spec_verifications),
          static_cast<long long>(run->stats.spec_draft_tokens),
          static_cast<long long>(run->stats.spec_accepted_tokens),
          100.0 * static_cast<double>(run->stats.spec_accepted_tokens) /
              static_cast<double>(std::max<int64_t>(1, run->stats.spec_draft_tokens)),
          1.0 + static_cast<double>(run->stats.spec_accepted_tokens) /
                    static_cast<double>(run->stats.spec_verifications));
    }
    if (run->stats.draft_passes > 0) {
      std::printf("draft model: %lld passes, %.2f s of the decode nodes' time\n",
                  static_cast<long long>(run->stats.draft_passes), run->stats.draft_busy_s);
    }
    std::string placed;
    for (const auto& [reason, count] : run->stats.placements) {
      absl::StrAppend(&placed, placed.empty() ? "" : ", ", count, " ", reason);
    }
    std::printf("placements: %s\n", placed.c_str());
    if (run->stats.kills > 0) {
      std::printf("faults: %lld node(s) killed, %lld attempt(s) retried, %lld migrated\n",
                  static_cast<long long>(run->stats.kills),
                  static_cast<long long>(run->stats.retries),
                  static_cast<long long>(run->stats.migrations));
    }
    for (const auto& [error, count] : bench::FailureCounts(record.results)) {
      std::fprintf(stderr, "tandem-sim: %d request(s) failed: %s\n", count, error.c_str());
    }
    sim_runs.push_back({{"rate", std::isinf(rate) ? json("inf") : json(rate)},
                        {"simulated_s", run->stats.simulated_s},
                        {"wall_s", run->stats.wall_s},
                        {"events", run->stats.events},
                        {"steps", run->stats.steps},
                        {"jumped_steps", run->stats.jumped_steps},
                        {"decode_runs", run->stats.decode_runs},
                        {"preemptions", run->stats.preemptions},
                        {"spec_verifications", run->stats.spec_verifications},
                        {"spec_draft_tokens", run->stats.spec_draft_tokens},
                        {"spec_accepted_tokens", run->stats.spec_accepted_tokens},
                        {"draft_passes", run->stats.draft_passes},
                        {"draft_busy_s", run->stats.draft_busy_s},
                        {"decode_kv_blocks", run->stats.decode_kv_blocks},
                        {"kv_bytes", run->stats.kv_bytes},
                        {"kills", run->stats.kills},
                        {"retries", run->stats.retries},
                        {"migrations", run->stats.migrations},
                        {"placements", run->stats.placements}});
    points.push_back({rate, record.summary});
    report.runs.push_back(std::move(record));
  }
  report.goodput = bench::ComputeGoodput(points, o.workload.goodput_threshold);
  if (report.runs.size() > 1) std::fputs(bench::FormatSweepTable(report).c_str(), stdout);
  const SimClusterOptions& c = o.cluster;
  report.config = {
      {"tool", "tandem-sim"},
      {"gpu", c.gpu},
      {"model", c.model},
      {"tp", c.tensor_parallel},
      {"kv_cache_dtype", tandem::KvDTypeName(c.kv_dtype)},
      {"prefill_tp", c.prefill_tensor_parallel > 0 ? c.prefill_tensor_parallel : c.tensor_parallel},
      {"decode_tp", c.decode_tensor_parallel > 0 ? c.decode_tensor_parallel : c.tensor_parallel},
      {"mode", o.mode},
      {"prefill", c.num_prefill},
      {"decode", c.num_decode},
      {"local_prefill_threshold", c.local_prefill_threshold},
      {"kv_link_gbps", c.kv_link_gbps},
      {"kv_link_latency_us", c.kv_link_latency_us},
      {"policy", o.policy},
      {"routers", c.num_routers},
      {"placement_seed", c.placement_seed},
      {"placement_receipts", c.placement_receipts},
      {"max_num_batched_tokens", c.max_num_batched_tokens},
      {"max_num_seqs", c.max_num_seqs},
      {"num_speculative_tokens", c.num_speculative_tokens},
      {"spec_acceptance_rate", c.spec_acceptance_rate},
      {"draft_model", c.draft_model},
      {"load_poll_ms", c.load_poll_ms},
      {"router_overhead_us", c.router_overhead_us},
      {"hop_latency_us", c.hop_latency_us}};
  bench::AddDatasetConfig(o.workload, &report.config);
  bool wrote = true;
  if (!o.out.empty()) {
    json j = bench::ReportToJson(report, !o.no_requests_in_json);
    j["sim"] = sim_runs;
    wrote = WriteFile(o.out, j.dump(2) + "\n") && wrote;
  }
  if (!o.plot.empty()) wrote = WriteFile(o.plot, bench::RenderSvg(report, o.title)) && wrote;
  return wrote ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  tandem::FlagSet flags;
  AddSimFlags(flags, &options);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = CompleteOptions(&options);
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-sim: %s\n", error.c_str());
    return 2;
  }
  return Run(options);
}
