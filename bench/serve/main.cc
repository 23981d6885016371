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
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/serve/bench_client.h"
#include "bench/serve/bench_report.h"
#include "bench/serve/bench_sweep.h"
#include "bench/serve/datasets.h"
#include "common/tokenizer/tokenizer.h"
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

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Options {
  ClientOptions client;
  std::string base_url;
  double timeout_s = 600;

  std::string dataset = "random";
  std::optional<int> num_prompts;
  uint64_t seed = 0;
  int random_input_len = 1024;
  int random_output_len = 128;
  double random_range_ratio = 0;
  std::string input_len_dist, output_len_dist;
  double input_len_sigma = 0.8, output_len_sigma = 0.8;
  int input_len_max = 0, output_len_max = 0;
  int token_id_min = 1000, token_id_max = 30000;
  std::string dataset_path;
  std::string tokenizer;
  std::optional<int> sharegpt_output_len;
  double trace_time_scale = 1.0;
  int prefix_num = 4, prefix_questions = 8, prefix_len = 1024, question_len = 64,
      prefix_output_len = 128;

  double request_rate = kInf;
  std::vector<double> request_rates;  // set: a sweep
  double burstiness = 1.0;
  int max_concurrency = 0;
  int warmup = 0;
  bool fresh_prompts_per_run = true;
  double run_duration_s = 0;
  double time_scale = 1.0;

  std::optional<double> slo_ttft_ms, slo_tpot_ms;
  double goodput_threshold = 0.9;

  std::string out, plot, title = "tandem-bench";
  bool no_progress = false;
  bool no_requests_in_json = false;
  bool fail_on_error = false;
};

// A rate: a positive number or inf.
std::string ParseRate(std::string_view text, double* out) {
  if (text == "inf" || text == "infinity" || text == "Inf") {
    *out = kInf;
    return "";
  }
  double v = 0;
  if (!tandem::ParseFlagDouble(text, &v) || !(v > 0)) return "expects a rate > 0 or inf";
  *out = v;
  return "";
}

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
  flags.Section("Dataset");
  flags.String("dataset", &o->dataset,
               {"NAME", "random | sharegpt | shared-prefix | trace (default random)"});
  flags.Number("num-prompts", &o->num_prompts,
               {"N", "requests (default 1000; trace: every line unless given)"});
  flags.Number("seed", &o->seed, {"N", "seed of the dataset and the arrivals (default 0)"});
  flags.Section("Dataset random");
  flags.Number("random-input-len", &o->random_input_len,
               {"N", "mean prompt length in tokens (default 1024)"});
  flags.Number("random-output-len", &o->random_output_len,
               {"N", "mean output length in tokens (default 128)"});
  flags.Number("random-range-ratio", &o->random_range_ratio,
               {"R", "uniform lengths in [mean*(1-R), mean*(1+R)] (default 0)"});
  flags.String("input-len-dist", &o->input_len_dist,
               {"D",
                "fixed | uniform | lognormal (default: uniform when the range ratio is > 0, else "
                "fixed)"});
  flags.String("output-len-dist", &o->output_len_dist, {"D", "the same for output lengths"});
  flags.Number("input-len-sigma", &o->input_len_sigma,
               {"S", "lognormal log-space sigma (default 0.8)"});
  flags.Number("output-len-sigma", &o->output_len_sigma,
               {"S", "the same for output lengths (default 0.8)"});
  flags.Number("input-len-max", &o->input_len_max,
               {"N", "clip drawn lengths to N (default 0: no clip)"});
  flags.Number("output-len-max", &o->output_len_max,
               {"N", "the same for output lengths (default 0: no clip)"});
  flags.Number("token-id-min", &o->token_id_min,
               {"N", "prompt token ids are drawn from [N, --token-id-max) (default 1000)"});
  flags.Number("token-id-max", &o->token_id_max,
               {"N", "prompt token ids are drawn below N (default 30000)"});
  flags.Section("Dataset sharegpt / trace");
  flags.String("dataset-path", &o->dataset_path,
               {"FILE", "ShareGPT JSON file / Mooncake-format JSON-lines trace"});
  flags.String("tokenizer", &o->tokenizer,
               {"DIR", "model dir with tokenizer.json (sharegpt: counts tokens)"});
  flags.Number("sharegpt-output-len", &o->sharegpt_output_len,
               {"N", "fixed output length instead of the reply's"});
  flags.Number("trace-time-scale", &o->trace_time_scale,
               {"X", "multiply trace timestamps by X (0.5: twice as fast; default 1)"});
  flags.Section("Dataset shared-prefix (prefix-num x prefix-questions requests)");
  flags.Number("prefix-num", &o->prefix_num, {"N", "system prompts (default 4)"});
  flags.Number("prefix-questions", &o->prefix_questions,
               {"N", "questions per system prompt (default 8)"});
  flags.Number("prefix-len", &o->prefix_len, {"N", "system prompt tokens (default 1024)"});
  flags.Number("question-len", &o->question_len, {"N", "question tokens (default 64)"});
  flags.Number("prefix-output-len", &o->prefix_output_len, {"N", "output tokens (default 128)"});
  flags.Section("Load");
  flags.Custom("request-rate", {"R", "requests/s, or inf: all at once (default inf)"},
               [o](std::string_view v) { return ParseRate(v, &o->request_rate); });
  flags.Custom(
      "request-rates", {"R1,R2,...", "a sweep: one run per rate, goodput computed"},
      [o](std::string_view v) -> std::string {
        o->request_rates.clear();
        for (absl::string_view part : absl::StrSplit(absl::string_view(v.data(), v.size()), ',')) {
          part = absl::StripAsciiWhitespace(part);
          double rate = 0;
          std::string error = ParseRate(std::string_view(part.data(), part.size()), &rate);
          if (!error.empty()) return "expects comma-separated rates > 0 (or inf)";
          o->request_rates.push_back(rate);
        }
        return "";
      });
  flags.Number("burstiness", &o->burstiness,
               {"B", "gamma arrivals: 1 Poisson, < 1 burstier, > 1 steadier (default 1)"});
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
  flags.Section("SLO");
  flags.Number("slo-ttft-ms", &o->slo_ttft_ms, {"MS", "TTFT limit"});
  flags.Number("slo-tpot-ms", &o->slo_tpot_ms, {"MS", "TPOT limit"});
  flags.Number("goodput-threshold", &o->goodput_threshold,
               {"F", "attainment the goodput rate must reach (default 0.9)"});
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
  if (o->num_prompts.has_value() && *o->num_prompts < 1) return "--num-prompts must be >= 1";
  if (o->max_concurrency < 0) return "--max-concurrency must be >= 0";
  if (o->warmup < 0) return "--warmup must be >= 0";
  if (!(o->burstiness > 0)) return "--burstiness must be > 0";
  if (!(o->time_scale > 0)) return "--time-scale must be > 0";
  if (!(o->run_duration_s >= 0)) return "--run-duration-s must be >= 0";
  if (!(o->goodput_threshold > 0 && o->goodput_threshold <= 1)) {
    return "--goodput-threshold must be in (0, 1]";
  }
  if (o->slo_ttft_ms.has_value() && !(*o->slo_ttft_ms > 0)) return "--slo-ttft-ms must be > 0";
  if (o->slo_tpot_ms.has_value() && !(*o->slo_tpot_ms > 0)) return "--slo-tpot-ms must be > 0";
  if (o->dataset == "trace" && !o->request_rates.empty()) {
    return "--request-rates does not apply to --dataset trace (requests go at their timestamps; "
           "use --trace-time-scale)";
  }
  if ((o->dataset == "sharegpt" || o->dataset == "trace") && o->dataset_path.empty()) {
    return "--dataset " + o->dataset + " needs --dataset-path";
  }
  if (o->dataset == "sharegpt" && o->tokenizer.empty()) {
    return "--dataset sharegpt needs --tokenizer DIR (to count tokens)";
  }
  return "";
}

std::vector<double> Rates(const Options& o) {
  return o.request_rates.empty() ? std::vector<double>{o.request_rate} : o.request_rates;
}

LengthDistribution Lengths(const std::string& kind, double mean, double ratio, double sigma,
                           int max) {
  LengthDistribution d;
  d.kind = !kind.empty() ? kind : (ratio > 0 ? "uniform" : "fixed");
  d.mean = mean;
  d.range_ratio = ratio;
  d.sigma = sigma;
  d.max = max;
  return d;
}

absl::StatusOr<std::vector<BenchRequest>> BuildDataset(const Options& o) {
  const TokenIdRange ids{o.token_id_min, o.token_id_max};
  if (o.dataset == "random") {
    RandomDatasetOptions r;
    r.num_prompts = o.num_prompts.value_or(1000);
    r.input = Lengths(o.input_len_dist, o.random_input_len, o.random_range_ratio, o.input_len_sigma,
                      o.input_len_max);
    r.output = Lengths(o.output_len_dist, o.random_output_len, o.random_range_ratio,
                       o.output_len_sigma, o.output_len_max);
    if (absl::Status s = ValidateLengthDistribution(r.input, "--random-input-len"); !s.ok()) {
      return s;
    }
    if (absl::Status s = ValidateLengthDistribution(r.output, "--random-output-len"); !s.ok()) {
      return s;
    }
    r.ids = ids;
    r.seed = o.seed;
    return RandomDataset(r);
  }
  if (o.dataset == "shared-prefix") {
    SharedPrefixOptions p;
    p.num_prefixes = o.prefix_num;
    p.questions_per_prefix = o.prefix_questions;
    p.prefix_len = o.prefix_len;
    p.question_len = o.question_len;
    p.output_len = o.prefix_output_len;
    p.ids = ids;
    p.seed = o.seed;
    return SharedPrefixDataset(p);
  }
  if (o.dataset == "trace") {
    TraceOptions t;
    t.path = o.dataset_path;
    t.num_prompts = o.num_prompts.value_or(0);
    t.time_scale = o.trace_time_scale;
    t.ids = ids;
    t.seed = o.seed;
    return LoadTrace(t);
  }
  if (o.dataset == "sharegpt") {
    std::string path = o.tokenizer;
    if (!absl::EndsWith(path, ".json")) path += "/tokenizer.json";
    absl::StatusOr<std::unique_ptr<tandem::Tokenizer>> tokenizer =
        tandem::Tokenizer::FromFile(path);
    if (!tokenizer.ok()) return tokenizer.status();
    const tandem::Tokenizer& tok = **tokenizer;
    ShareGptOptions s;
    s.path = o.dataset_path;
    s.num_prompts = o.num_prompts.value_or(1000);
    if (o.sharegpt_output_len.has_value()) s.fixed_output_len = *o.sharegpt_output_len;
    s.seed = o.seed;
    // The text's own tokens (no BOS): the same count for prompts and replies.
    return LoadShareGpt(s, [&tok](std::string_view text) -> absl::StatusOr<int32_t> {
      return static_cast<int32_t>(tok.Encode(text, /*add_special_tokens=*/false).size());
    });
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--dataset must be random, sharegpt, shared-prefix or trace, got '", o.dataset, "'"));
}

json RateJson(double rate) { return std::isinf(rate) ? json("inf") : json(rate); }

// The settings as given, for the JSON file.
json ConfigJson(const Options& o, int num_requests) {
  json rates = json::array();
  for (double r : Rates(o)) rates.push_back(RateJson(r));
  json c = {{"api", o.client.api},
            {"address", o.client.address},
            {"model", o.client.model},
            {"temperature",
             o.client.temperature.has_value() ? json(*o.client.temperature) : json(nullptr)},
            {"dataset", o.dataset},
            {"num_requests", num_requests},
            {"seed", o.seed},
            {"request_rates", rates},
            {"burstiness", o.burstiness},
            {"max_concurrency", o.max_concurrency},
            {"warmup", o.warmup},
            {"fresh_prompts_per_run", o.fresh_prompts_per_run},
            {"time_scale", o.time_scale},
            {"run_duration_s", o.run_duration_s},
            {"slo_ttft_ms", o.slo_ttft_ms.has_value() ? json(*o.slo_ttft_ms) : json(nullptr)},
            {"slo_tpot_ms", o.slo_tpot_ms.has_value() ? json(*o.slo_tpot_ms) : json(nullptr)},
            {"goodput_threshold", o.goodput_threshold},
            {"token_id_range", {o.token_id_min, o.token_id_max}}};
  if (o.dataset == "random") {
    c["random_input_len"] = o.random_input_len;
    c["random_output_len"] = o.random_output_len;
    c["random_range_ratio"] = o.random_range_ratio;
    c["input_len_dist"] = Lengths(o.input_len_dist, 0, o.random_range_ratio, 0, 0).kind;
    c["output_len_dist"] = Lengths(o.output_len_dist, 0, o.random_range_ratio, 0, 0).kind;
    c["input_len_sigma"] = o.input_len_sigma;
    c["output_len_sigma"] = o.output_len_sigma;
    c["input_len_max"] = o.input_len_max;
    c["output_len_max"] = o.output_len_max;
  } else if (o.dataset == "shared-prefix") {
    c["prefix_num"] = o.prefix_num;
    c["prefix_questions"] = o.prefix_questions;
    c["prefix_len"] = o.prefix_len;
    c["question_len"] = o.question_len;
    c["prefix_output_len"] = o.prefix_output_len;
  } else {
    c["dataset_path"] = o.dataset_path;
    if (o.dataset == "trace") c["trace_time_scale"] = o.trace_time_scale;
    if (o.dataset == "sharegpt") {
      c["tokenizer"] = o.tokenizer;
      c["sharegpt_output_len"] =
          o.sharegpt_output_len.has_value() ? json(*o.sharegpt_output_len) : json(nullptr);
    }
  }
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
  absl::StatusOr<std::vector<BenchRequest>> dataset = BuildDataset(o);
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
               o.dataset.c_str(), o.client.api.c_str(), o.client.address.c_str(), Rates(o).size());

  SweepOptions sweep;
  sweep.rates = Rates(o);
  sweep.burstiness = o.burstiness;
  sweep.seed = o.seed;
  sweep.max_concurrency = o.max_concurrency;
  sweep.time_scale = o.time_scale;
  if (o.slo_ttft_ms.has_value()) sweep.slo.ttft_s = *o.slo_ttft_ms / 1000.0;
  if (o.slo_tpot_ms.has_value()) sweep.slo.tpot_s = *o.slo_tpot_ms / 1000.0;
  sweep.goodput_threshold = o.goodput_threshold;
  sweep.warmup = o.warmup;
  sweep.fresh_prompts_per_run = o.fresh_prompts_per_run;
  sweep.run_duration_s = o.run_duration_s;
  sweep.warmup_ids = {o.token_id_min, o.token_id_max};
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
