#include "bench/chaos/chaos_run.h"

#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/chaos/chaos_cluster.h"
#include "bench/chaos/chaos_report.h"
#include "bench/chaos/expected_tokens.h"
#include "bench/chaos/fault_injector.h"
#include "bench/chaos/fault_plan.h"
#include "bench/chaos/metrics_scrape.h"
#include "bench/chaos/process_sampler.h"
#include "bench/serve/bench_client.h"
#include "bench/serve/load_runner.h"
#include "common/model/model_config.h"
#include "tools/cluster/cluster_runner.h"

namespace tandem::chaos {
namespace {

using json = nlohmann::ordered_json;

void Say(const std::string& message) {
  std::fprintf(stderr, "tandem-chaos: %s\n", message.c_str());
  std::fflush(stderr);
}

std::string ExecutableDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

std::optional<std::string> MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp", "/", prefix, "XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) return std::nullopt;
  return pattern;
}

ClusterOptions MakeClusterOptions(const ChaosOptions& o) {
  ClusterOptions c;
  c.model_dir = o.model_dir;
  c.num_prefill = o.num_prefill;
  c.num_decode = o.num_decode;
  c.ucx_tls = "tcp";  // across network namespaces; shared memory would bypass a cut
  c.lease_ms = o.lease_ms;
  c.startup_timeout_s = o.startup_timeout_s;
  std::vector<std::string> node = {"--drain-timeout-ms", absl::StrCat(o.node_drain_ms)};
  if (o.backend == "sim") {
    node.insert(node.end(),
                {"--backend", "sim", "--sim-gpu", o.sim_gpu, "--sim-model", o.sim_model,
                 "--sim-kv-scale", "128", "--sim-kv-blocks", absl::StrCat(o.sim_kv_blocks),
                 "--sim-time-scale", absl::StrCat(o.sim_time_scale)});
  } else {
    node.insert(node.end(), {"--threads", absl::StrCat(o.node_threads)});
  }
  node.insert(node.end(), o.node_args.begin(), o.node_args.end());
  c.prefill_args = node;
  c.decode_args = node;
  c.router_args = {"--request-timeout-ms", absl::StrCat(o.request_timeout_ms)};
  c.router_args.insert(c.router_args.end(), o.router_args.begin(), o.router_args.end());
  return c;
}

json ConfigJson(const ChaosOptions& o, const std::vector<FaultKind>& kinds) {
  json faults = json::array();
  for (FaultKind k : kinds) faults.push_back(FaultKindName(k));
  return {{"backend", o.backend},
          {"model", o.model_dir},
          {"prefill", o.num_prefill},
          {"decode", o.num_decode},
          {"sim", o.backend == "sim" ? json{{"gpu", o.sim_gpu},
                                            {"model", o.sim_model},
                                            {"time_scale", o.sim_time_scale},
                                            {"kv_blocks", o.sim_kv_blocks}}
                                     : json(nullptr)},
          {"duration_s", o.duration_s},
          {"rate", o.rate},
          {"num_prompts", o.num_prompts},
          {"prompt_len", {o.min_prompt_len, o.max_prompt_len}},
          {"max_tokens", o.max_tokens},
          {"faults", faults},
          {"fault_interval_s", o.fault_interval_s},
          {"hold_s", {o.min_hold_s, o.max_hold_s}},
          {"seed", o.seed},
          {"request_timeout_ms", o.request_timeout_ms},
          {"lost_after_s", o.request_timeout_ms / 1000.0 + o.lost_grace_s},
          {"lease_ms", o.lease_ms},
          {"node_drain_ms", o.node_drain_ms},
          {"settle_s", o.settle_s},
          {"router_args", o.router_args},
          {"node_args", o.node_args}};
}

// Node `i` died without a fault: reported, and started again so the run goes on.
void RestartIfDead(ChaosCluster& cluster, int i, absl::Time load_start, ChaosReport* report) {
  ChaosCluster::Node& node = cluster.node(i);
  if (node.process == nullptr || node.process->Running()) return;
  std::string what =
      absl::StrFormat("%s %s at %.1f s", node.plan.name, node.process->DescribeExit(),
                      absl::ToDoubleSeconds(absl::Now() - load_start));
  absl::Status restarted = cluster.Restart(i, absl::Seconds(120));
  absl::StrAppend(&what, restarted.ok() ? "; restarted"
                                        : absl::StrCat("; restart failed: ", restarted.message()));
  Say(absl::StrCat("unexpected exit: ", what));
  report->unexpected_exits.push_back(what);
}

// After the load: waits (bounded by settle_s from `load_end`) for each node's blocks to be free.
void CheckKv(ChaosCluster& cluster, absl::Time load_end, double settle_s, ChaosReport* report) {
  const absl::Time deadline = load_end + absl::Seconds(settle_s);
  for (int i = 0; i < cluster.num_nodes(); ++i) {
    NodeKv kv;
    kv.name = cluster.node(i).plan.name;
    for (int attempt = 0;; ++attempt) {
      absl::StatusOr<v1::NodeLoad> load = cluster.Load(i, absl::Seconds(3));
      kv.settled_s = absl::ToDoubleSeconds(absl::Now() - load_end);
      kv.reachable = load.ok();
      if (load.ok()) {
        kv.kv_blocks = load->num_kv_blocks();
        kv.free_blocks = load->num_free_kv_blocks();
        kv.held_blocks = load->num_held_kv_blocks();
        kv.awaiting_kv = load->num_awaiting_kv();
        kv.running = load->num_running();
        kv.leaked = kv.kv_blocks - kv.free_blocks + kv.held_blocks;
        kv.error.clear();
      } else {
        kv.error = std::string(load.status().message());
      }
      const bool settled = load.ok() && kv.leaked == 0 && kv.awaiting_kv == 0 && kv.running == 0;
      if (settled || absl::Now() >= deadline || attempt >= 10000) break;
      absl::SleepFor(absl::Milliseconds(250));
    }
    report->kv.push_back(kv);
  }
}

}  // namespace

int RunChaos(const ChaosOptions& o, const std::string& network_unavailable,
             SignalWatcher& signals) {
  std::vector<FaultKind> kinds = *ParseFaultKinds(o.faults);
  ChaosReport report;
  report.network_cuts = network_unavailable;
  if (!network_unavailable.empty()) {
    std::erase(kinds, FaultKind::kNetCut);
    Say(absl::StrCat("network cuts unavailable (", network_unavailable,
                     "); nodes share the machine's loopback"));
  }
  report.config = ConfigJson(o, kinds);
  std::error_code ec;
  ClusterDirs dirs;
  dirs.bin_dir = o.bin_dir.empty() ? ExecutableDir() : o.bin_dir;
  std::optional<std::string> log_dir =
      o.log_dir.empty() ? MakeTempDir("tandem-chaos-logs-") : std::optional<std::string>(o.log_dir);
  std::optional<std::string> ready_dir = MakeTempDir("tandem-chaos-ready-");
  if (!log_dir.has_value() || !ready_dir.has_value()) {
    Say(absl::StrCat("cannot create a temp directory: ", strerror(errno)));
    return 2;
  }
  std::filesystem::create_directories(*log_dir, ec);
  dirs.log_dir = *log_dir;
  dirs.ready_dir = *ready_dir;
  dirs.secret_file = *ready_dir + "/cluster-secret";
  if (absl::Status s = WriteClusterSecret(dirs.secret_file); !s.ok()) {
    Say(std::string(s.message()));
    return 2;
  }
  Say(absl::StrCat("logs in ", dirs.log_dir));

  // 1. Prompts and what they must produce.
  absl::StatusOr<ModelConfig> config = LoadModelConfig(o.model_dir);
  if (!config.ok()) {
    Say(absl::StrCat("--model: ", config.status().message()));
    return 2;
  }
  const std::vector<TokenIds> prompts = MakePrompts(
      o.num_prompts, o.min_prompt_len, o.max_prompt_len, config->vocab_size / 2, o.seed);
  absl::StatusOr<std::vector<TokenIds>> expected =
      o.backend == "sim"
          ? SimExpectedTokens(o.model_dir, prompts, o.max_tokens)
          : GenerateExpectedTokens(dirs.bin_dir + "/tandem-generate", o.model_dir, prompts,
                                   o.max_tokens, dirs.log_dir, absl::Minutes(10));
  if (!expected.ok()) {
    Say(absl::StrCat("expected tokens: ", expected.status().message()));
    return 2;
  }

  // 2. The cluster.
  ChaosCluster cluster(MakeClusterOptions(o), dirs, network_unavailable.empty());
  Say(absl::StrCat("starting ", o.num_prefill, " prefill + ", o.num_decode, " decode nodes (",
                   o.backend, ") and a router"));
  if (absl::Status s = cluster.Start(absl::Seconds(o.startup_timeout_s)); !s.ok()) {
    Say(absl::StrCat("the cluster did not start: ", s.message()));
    cluster.Stop(absl::Seconds(5));
    return 2;
  }

  // 3. Load and sampling.
  bench::ClientOptions client_options;
  client_options.api = "grpc";
  client_options.address = cluster.router_grpc();
  client_options.temperature = 0.0f;
  const double lost_after_s = o.request_timeout_ms / 1000.0 + o.lost_grace_s;
  client_options.timeout = absl::Seconds(lost_after_s);
  client_options.record_tokens = true;
  absl::StatusOr<std::unique_ptr<bench::BenchClient>> client =
      bench::CreateBenchClient(client_options);
  if (!client.ok()) {
    Say(std::string(client.status().message()));
    cluster.Stop(absl::Seconds(5));
    return 2;
  }
  const int num_requests = static_cast<int>(std::ceil(o.rate * o.duration_s));
  std::vector<bench::BenchRequest> requests(num_requests);
  std::vector<int> prompt_of(num_requests);
  for (int i = 0; i < num_requests; ++i) {
    prompt_of[i] = i % o.num_prompts;
    requests[i].prompt_ids = prompts[prompt_of[i]];
    requests[i].prompt_len = static_cast<int32_t>(prompts[prompt_of[i]].size());
    requests[i].output_len = o.max_tokens;
  }
  bench::LoadOptions load_options;
  load_options.arrivals.rate = o.rate;
  load_options.arrivals.seed = o.seed;
  const int max_samples =
      static_cast<int>((o.duration_s + lost_after_s + o.settle_s + 60) / o.sample_interval_s + 10);
  ProcessSampler sampler([&cluster] { return cluster.Processes(); },
                         absl::Seconds(o.sample_interval_s), max_samples);
  sampler.Start();
  std::atomic<bool> load_done{false};
  absl::StatusOr<bench::LoadResult> load = absl::UnknownError("not run");
  const absl::Time load_start = absl::Now();
  Say(absl::StrFormat("%d requests at %.1f/s over %.0f s; a fault every %.0f s", num_requests,
                      o.rate, o.duration_s, o.fault_interval_s));
  std::thread load_thread([&] {
    load = bench::RunLoad(**client, requests, load_options);
    load_done = true;
  });

  // 4. Faults, on this thread (restarted nodes die with the thread that started them).
  bool interrupted = false;
  InterruptibleSleep sleep = [&signals, &interrupted](absl::Duration d) {
    const absl::Time until = absl::Now() + d;
    for (absl::Time now = absl::Now(); now < until && !interrupted; now = absl::Now()) {
      if (signals.Wait(until - now)) interrupted = true;
    }
    return !interrupted;
  };
  FaultPlanOptions plan_options{o.seed, o.duration_s, o.fault_interval_s, cluster.num_nodes(),
                                kinds,  o.min_hold_s, o.max_hold_s};
  InjectorOptions injector;
  injector.drain_timeout = absl::Milliseconds(o.node_drain_ms) + absl::Seconds(15);
  for (const PlannedFault& fault : PlanFaults(plan_options)) {
    const absl::Duration wait = load_start + absl::Seconds(fault.at_s) - absl::Now();
    if (!sleep(std::max(wait, absl::ZeroDuration()))) break;
    if (!cluster.RouterRunning()) break;
    for (int i = 0; i < cluster.num_nodes(); ++i) RestartIfDead(cluster, i, load_start, &report);
    FaultRecord record = InjectFault(cluster, fault, load_start, injector, sleep);
    Say(absl::StrFormat("fault %d at %.1f s: %s %s: %s", fault.index, record.started_s,
                        FaultKindName(fault.kind), record.node, record.detail));
    report.faults.push_back(std::move(record));
  }
  if (interrupted) {
    Say("interrupted; stopping the cluster (requests in flight fail)");
    cluster.Stop(absl::Seconds(5));
  }
  while (!load_done) {
    if (signals.Wait(absl::Milliseconds(200)) && !interrupted) {
      interrupted = true;
      Say("interrupted; stopping the cluster (requests in flight fail)");
      cluster.Stop(absl::Seconds(5));
    }
  }
  load_thread.join();
  const absl::Time load_end = absl::Now();
  if (!load.ok()) {
    Say(absl::StrCat("the load did not run: ", load.status().message()));
    cluster.Stop(absl::Seconds(5));
    return 2;
  }
  report.load_s = load->duration_s;
  report.tally = TallyRequests(load->results, prompt_of, *expected, lost_after_s);

  // 5. After the load: blocks back, counters, stop.
  if (!interrupted) {
    if (!cluster.RouterRunning()) report.unexpected_exits.push_back("router exited");
    for (int i = 0; i < cluster.num_nodes(); ++i) RestartIfDead(cluster, i, load_start, &report);
    CheckKv(cluster, load_end, o.settle_s, &report);
    absl::StatusOr<std::string> scrape = ScrapeMetrics(cluster.router_metrics(), absl::Seconds(5));
    absl::StatusOr<RouterCounters> counters = scrape.ok()
                                                  ? ParseRouterCounters(*scrape)
                                                  : absl::StatusOr<RouterCounters>(scrape.status());
    if (counters.ok()) {
      report.router = *counters;
    } else {
      report.router_error = std::string(counters.status().message());
    }
  }
  sampler.Stop();
  report.samples = sampler.samples();
  cluster.Stop(absl::Seconds(10));

  // 6. The report.
  std::fputs(report.Table().c_str(), stdout);
  std::fflush(stdout);
  if (!o.out.empty()) {
    std::filesystem::path out(o.out);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
    std::ofstream file(o.out);
    json j = report.ToJson();
    j["log_dir"] = dirs.log_dir;
    j["interrupted"] = interrupted;
    file << j.dump(1) << "\n";
    if (!file) Say(absl::StrCat("cannot write ", o.out));
  }
  std::filesystem::remove_all(*ready_dir, ec);
  return !interrupted && report.GoalsMet() ? 0 : 1;
}

}  // namespace tandem::chaos
