// tandem-bench: a serving benchmark for tandem's router (or any OpenAI-compatible server), after
// `vllm bench serve`: open-loop load from a dataset at one request rate or a sweep of rates,
// TTFT / TPOT / ITL / E2E distributions, SLO attainment and goodput, a JSON result file and an
// SVG plot.
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "bench/serve/bench_client.h"
#include "bench/serve/bench_report.h"
#include "bench/serve/bench_sweep.h"
#include "bench/serve/workload_flags.h"
#include "common/util/cli_flags.h"
#include "nlohmann/json.hpp"

namespace {

using namespace tandem::bench;  // NOLINT: this file is the command line of that namespace
using json = nlohmann::json;

constexpr char kIntro[] =
    R"(Usage: tandem-bench --address HOST:PORT [options]

Sends a dataset of requests to a server at a request rate (open loop: each request at its
arrival time, whether or not earlier ones finished) and reports throughput, TTFT, TPOT, ITL and
end-to-end latency, SLO attainment and, for a sweep of rates, the goodput (the highest rate at
which the SLO attainment stays >= the threshold). Every request asks for exactly its output
length (max_tokens with ignore_eos).
)";

constexpr char kOutro[] = R"(
Exit status: 0 when every run completed (failed requests are reported), 1 on an error (or a
failed request with --fail-on-error), 2 for bad flags.
)";

struct Options {
  ClientOptions client;
  std::string base_url;
  double timeout_s = 600;

  WorkloadFlags workload;
  int max_concurrency = 0;
  int warmup = 0;
  bool fresh_prompts_per_run = true;
  double run_duration_s = 0;
  double time_scale = 1.0;

  std::string out, plot, title = "tandem-bench";
  bool no_progress = false;
  bool no_requests_in_json = false;
  bool fail_on_error = false;
};

// Declares every flag against `o` with its --help line.
void AddBenchFlags(tandem::FlagSet& flags, Options* o) {
  flags.Section("Server");
  flags.String("api", &o->client.api,
               {"http|grpc",
                "OpenAI-compatible HTTP (POST /v1/completions, streamed) or the router's gRPC "
                "Generate API (default http)"});
  flags.String(
      "address", &o->client.address,
      {"HOST:PORT", "the server (tandem-router: --http-listen for http, --listen for grpc)"});
  flags.String("base-url", &o->base_url,
               {"http://HOST:PORT", "the same for http (a trailing /v1 is ignored)"});
  flags.String("model", &o->client.model,
               {"NAME", "model name to send (default: http asks GET /v1/models; grpc: none)"});
  flags.String("api-key", &o->client.api_key, {"KEY", "HTTP: send \"Authorization: Bearer KEY\""});
  flags.Custom("temperature", {"T", "sampling temperature (default 0)"},
               [o](std::string_view v) -> std::string {
                 double t = 0;
                 if (!tandem::ParseFlagDouble(v, &t) || t < 0) return "expects a number >= 0";
                 o->client.temperature = static_cast<float>(t);
                 return "";
               });
  flags.Number("timeout-s", &o->timeout_s, {"N", "per-request timeout (default 600)"});
  AddDatasetFlags(flags, &o->workload);
  flags.Section("Load");
  AddRateFlags(flags, &o->workload);
  flags.Number("max-concurrency", &o->max_concurrency,
               {"N", "at most N requests in flight (default: unlimited)"});
  flags.Number("warmup", &o->warmup,
               {"N",
                "send N requests (fresh prompts of the first N's lengths) before measuring; they "
                "are not counted (default 0)"});
  flags.Number("run-duration-s", &o->run_duration_s,
               {"S",
                "each rate's run sends rate x S requests (the first of the dataset; at most "
                "--num-prompts), so every run lasts about S seconds of arrivals (default 0: the "
                "whole dataset at every rate)"});
  flags.Switch("same-prompts-per-rate", &o->fresh_prompts_per_run,
               "send the same token ids at every rate of a sweep (default: each run after the "
               "first shifts the ids, so no run hits the prefix cache the previous runs filled)",
               false);
  flags.Number("time-scale", &o->time_scale,
               {"X",
                "the server runs X times slower than the time it models (sim backend's "
                "--sim-time-scale): arrivals stretched, times divided"});
  AddSloFlags(flags, &o->workload);
  flags.Section("Output");
  flags.String("out", &o->out,
               {"FILE.json", "results (config, per-run summaries, per-request records)"});
  flags.Switch("no-requests-in-json", &o->no_requests_in_json,
               "leave the per-request records out of the JSON");
  flags.String("plot", &o->plot,
               {"FILE.svg", "latency CDFs (and, for a sweep, attainment against the rate)"});
  flags.String("title", &o->title, {"TEXT", "the plot's title"});
  flags.Switch("no-progress", &o->no_progress, "no progress bar on stderr");
  flags.Switch("fail-on-error", &o->fail_on_error,
               "exit 1 when any request failed (default: report them, exit 0)");
}

// Checks what single flags cannot and derives the rest (the address from --base-url, ...); ""
// when the options are usable.
std::string CompleteOptions(Options* o) {
  if (!o->base_url.empty()) {
    if (!o->client.address.empty()) return "give --address or --base-url, not both";
    absl::string_view url = o->base_url;
    if (!absl::ConsumePrefix(&url, "http://")) {
      return "--base-url must be http://HOST:PORT (https is not supported)";
    }
    while (absl::ConsumeSuffix(&url, "/")) {
    }
    absl::ConsumeSuffix(&url, "/v1");
    if (url.empty() || url.find('/') != absl::string_view::npos) {
      return "--base-url must be http://HOST:PORT";
    }
    if (o->client.api != "http") return "--base-url is for --api http";
    o->client.address = std::string(url);
  }
  if (o->client.address.empty()) return "--address HOST:PORT (or --base-url) is required";
  if (o->client.api != "http" && o->client.api != "grpc") return "--api must be http or grpc";
  if (!(o->timeout_s > 0)) return "--timeout-s must be > 0";
  o->client.timeout = absl::Seconds(o->timeout_s);
  if (o->max_concurrency < 0) return "--max-concurrency must be >= 0";
  if (o->warmup < 0) return "--warmup must be >= 0";
  if (!(o->time_scale > 0)) return "--time-scale must be > 0";
  if (!(o->run_duration_s >= 0)) return "--run-duration-s must be >= 0";
  return ValidateWorkloadFlags(o->workload);
}

json RateJson(double rate) { return std::isinf(rate) ? json("inf") : json(rate); }

// The settings as given, for the JSON file.
json ConfigJson(const Options& o, int num_requests) {
  json rates = json::array();
  for (double r : Rates(o.workload)) rates.push_back(RateJson(r));
  json c = {{"api", o.client.api},
            {"address", o.client.address},
            {"model", o.client.model},
            {"temperature",
             o.client.temperature.has_value() ? json(*o.client.temperature) : json(nullptr)},
            {"num_requests", num_requests},
            {"request_rates", rates},
            {"burstiness", o.workload.burstiness},
            {"max_concurrency", o.max_concurrency},
            {"warmup", o.warmup},
            {"fresh_prompts_per_run", o.fresh_prompts_per_run},
            {"time_scale", o.time_scale},
            {"run_duration_s", o.run_duration_s},
            {"slo_ttft_ms",
             o.workload.slo_ttft_ms.has_value() ? json(*o.workload.slo_ttft_ms) : json(nullptr)},
            {"slo_tpot_ms",
             o.workload.slo_tpot_ms.has_value() ? json(*o.workload.slo_tpot_ms) : json(nullptr)},
            {"goodput_threshold", o.workload.goodput_threshold}};
  AddDatasetConfig(o.workload, &c);
  return c;
}

bool WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  if (!out) {
    std::fprintf(stderr, "tandem-bench: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

// Every request in flight holds a socket: lift the soft limit on open files to the hard one
// (as `vllm bench serve` does), so a high rate or `inf` does not fail on the default 1024.
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int Run(const Options& o) {
  RaiseOpenFileLimit();
  absl::StatusOr<std::vector<BenchRequest>> dataset = BuildDataset(o.workload);
  if (!dataset.ok()) {
    std::fprintf(stderr, "tandem-bench: dataset: %s\n", dataset.status().ToString().c_str());
    return 1;
  }
  if (dataset->empty()) {
    std::fprintf(stderr, "tandem-bench: the dataset has no requests\n");
    return 1;
  }
  absl::StatusOr<std::unique_ptr<BenchClient>> client = CreateBenchClient(o.client);
  if (!client.ok()) {
    std::fprintf(stderr, "tandem-bench: %s\n", client.status().ToString().c_str());
    return 1;
  }
  std::fprintf(stderr, "tandem-bench: %zu requests (%s) to %s %s, %zu run(s)\n", dataset->size(),
               o.workload.dataset.c_str(), o.client.api.c_str(), o.client.address.c_str(),
               Rates(o.workload).size());

  SweepOptions sweep;
  sweep.rates = Rates(o.workload);
  sweep.burstiness = o.workload.burstiness;
  sweep.seed = o.workload.seed;
  sweep.max_concurrency = o.max_concurrency;
  sweep.time_scale = o.time_scale;
  sweep.slo = SloOf(o.workload);
  sweep.goodput_threshold = o.workload.goodput_threshold;
  sweep.warmup = o.warmup;
  sweep.fresh_prompts_per_run = o.fresh_prompts_per_run;
  sweep.run_duration_s = o.run_duration_s;
  sweep.warmup_ids = {o.workload.token_id_min, o.workload.token_id_max};
  sweep.progress = o.no_progress ? nullptr : stderr;

  int failed = 0;
  auto on_run = [&](const RunRecord& run) {
    std::fputs(FormatRunTable(run.summary, sweep.slo).c_str(), stdout);
    std::fflush(stdout);
    failed += run.summary.failed;
    for (const auto& [error, count] : FailureCounts(run.results)) {
      std::fprintf(stderr, "tandem-bench: %d request(s) failed: %s\n", count, error.c_str());
    }
  };
  absl::StatusOr<BenchReport> report = RunSweep(**client, *dataset, sweep, on_run);
  if (!report.ok()) {
    std::fprintf(stderr, "tandem-bench: %s\n", report.status().ToString().c_str());
    return 1;
  }
  report->config = ConfigJson(o, static_cast<int>(dataset->size()));
  if (report->runs.size() > 1) std::fputs(FormatSweepTable(*report).c_str(), stdout);
  std::fflush(stdout);

  bool wrote = true;
  if (!o.out.empty()) {
    wrote = WriteFile(o.out, ReportToJson(*report, !o.no_requests_in_json).dump(2) + "\n") && wrote;
  }
  if (!o.plot.empty()) wrote = WriteFile(o.plot, RenderSvg(*report, o.title)) && wrote;
  if (!wrote) return 1;
  if (failed > 0 && o.fail_on_error) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  tandem::FlagSet flags;
  AddBenchFlags(flags, &options);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro, kOutro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = CompleteOptions(&options);
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-bench: %s\n", error.c_str());
    return 2;
  }
  return Run(options);
}
