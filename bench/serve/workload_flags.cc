#include "bench/serve/workload_flags.h"

#include <memory>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/serve/datasets.h"
#include "common/tokenizer/tokenizer.h"

namespace tandem::bench {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A rate: a positive number or inf.
std::string ParseRate(std::string_view text, double* out) {
  if (text == "inf" || text == "infinity" || text == "Inf") {
    *out = kInf;
    return "";
  }
  double v = 0;
  if (!ParseFlagDouble(text, &v) || !(v > 0)) return "expects a rate > 0 or inf";
  *out = v;
  return "";
}

}  // namespace

void AddDatasetFlags(FlagSet& flags, WorkloadFlags* w) {
  flags.Section("Dataset");
  flags.String("dataset", &w->dataset,
               {"NAME", "random | sharegpt | shared-prefix | trace (default random)"});
  flags.Number("num-prompts", &w->num_prompts,
               {"N", "requests (default 1000; trace: every line unless given)"});
  flags.Number("seed", &w->seed, {"N", "seed of the dataset and the arrivals (default 0)"});
  flags.Section("Dataset random");
  flags.Number("random-input-len", &w->random_input_len,
               {"N", "mean prompt length in tokens (default 1024)"});
  flags.Number("random-output-len", &w->random_output_len,
               {"N", "mean output length in tokens (default 128)"});
  flags.Number("random-range-ratio", &w->random_range_ratio,
               {"R", "uniform lengths in [mean*(1-R), mean*(1+R)] (default 0)"});
  flags.String("input-len-dist", &w->input_len_dist,
               {"D",
                "fixed | uniform | lognormal (default: uniform when the range ratio is > 0, else "
                "fixed)"});
  flags.String("output-len-dist", &w->output_len_dist, {"D", "the same for output lengths"});
  flags.Number("input-len-sigma", &w->input_len_sigma,
               {"S", "lognormal log-space sigma (default 0.8)"});
  flags.Number("output-len-sigma", &w->output_len_sigma,
               {"S", "the same for output lengths (default 0.8)"});
  flags.Number("input-len-max", &w->input_len_max,
               {"N", "clip drawn lengths to N (default 0: no clip)"});
  flags.Number("output-len-max", &w->output_len_max,
               {"N", "the same for output lengths (default 0: no clip)"});
  flags.Number("token-id-min", &w->token_id_min,
               {"N", "prompt token ids are drawn from [N, --token-id-max) (default 1000)"});
  flags.Number("token-id-max", &w->token_id_max,
               {"N", "prompt token ids are drawn below N (default 30000)"});
  flags.Section("Dataset sharegpt / trace");
  flags.String("dataset-path", &w->dataset_path,
               {"FILE", "ShareGPT JSON file / Mooncake-format JSON-lines trace"});
  flags.String("tokenizer", &w->tokenizer,
               {"DIR", "model dir with tokenizer.json (sharegpt: counts tokens)"});
  flags.Number("sharegpt-output-len", &w->sharegpt_output_len,
               {"N", "fixed output length instead of the reply's"});
  flags.Number("trace-time-scale", &w->trace_time_scale,
               {"X", "multiply trace timestamps by X (0.5: twice as fast; default 1)"});
  flags.Section("Dataset shared-prefix (prefix-num x prefix-questions requests)");
  flags.Number("prefix-num", &w->prefix_num, {"N", "system prompts (default 4)"});
  flags.Number("prefix-questions", &w->prefix_questions,
               {"N", "questions per system prompt (default 8)"});
  flags.Number("prefix-len", &w->prefix_len, {"N", "system prompt tokens (default 1024)"});
  flags.Number("question-len", &w->question_len, {"N", "question tokens (default 64)"});
  flags.Number("prefix-output-len", &w->prefix_output_len, {"N", "output tokens (default 128)"});
}

void AddRateFlags(FlagSet& flags, WorkloadFlags* w) {
  flags.Custom("request-rate", {"R", "requests/s, or inf: all at once (default inf)"},
               [w](std::string_view v) { return ParseRate(v, &w->request_rate); });
  flags.Custom(
      "request-rates", {"R1,R2,...", "a sweep: one run per rate, goodput computed"},
      [w](std::string_view v) -> std::string {
        w->request_rates.clear();
        for (absl::string_view part : absl::StrSplit(absl::string_view(v.data(), v.size()), ',')) {
          part = absl::StripAsciiWhitespace(part);
          double rate = 0;
          std::string error = ParseRate(std::string_view(part.data(), part.size()), &rate);
          if (!error.empty()) return "expects comma-separated rates > 0 (or inf)";
          w->request_rates.push_back(rate);
        }
        return "";
      });
  flags.Number("burstiness", &w->burstiness,
               {"B", "gamma arrivals: 1 Poisson, < 1 burstier, > 1 steadier (default 1)"});
}

void AddSloFlags(FlagSet& flags, WorkloadFlags* w) {
  flags.Section("SLO");
  flags.Number("slo-ttft-ms", &w->slo_ttft_ms, {"MS", "TTFT limit"});
  flags.Number("slo-tpot-ms", &w->slo_tpot_ms, {"MS", "TPOT limit"});
  flags.Number("goodput-threshold", &w->goodput_threshold,
               {"F", "attainment the goodput rate must reach (default 0.9)"});
}

std::string ValidateWorkloadFlags(const WorkloadFlags& w) {
  if (w.num_prompts.has_value() && *w.num_prompts < 1) return "--num-prompts must be >= 1";
  if (!(w.burstiness > 0)) return "--burstiness must be > 0";
  if (!(w.goodput_threshold > 0 && w.goodput_threshold <= 1)) {
    return "--goodput-threshold must be in (0, 1]";
  }
  if (w.slo_ttft_ms.has_value() && !(*w.slo_ttft_ms > 0)) return "--slo-ttft-ms must be > 0";
  if (w.slo_tpot_ms.has_value() && !(*w.slo_tpot_ms > 0)) return "--slo-tpot-ms must be > 0";
  if (w.dataset == "trace" && !w.request_rates.empty()) {
    return "--request-rates does not apply to --dataset trace (requests go at their timestamps; "
           "use --trace-time-scale)";
  }
  if ((w.dataset == "sharegpt" || w.dataset == "trace") && w.dataset_path.empty()) {
    return "--dataset " + w.dataset + " needs --dataset-path";
  }
  if (w.dataset == "sharegpt" && w.tokenizer.empty()) {
    return "--dataset sharegpt needs --tokenizer DIR (to count tokens)";
  }
  return "";
}

std::vector<double> Rates(const WorkloadFlags& w) {
  return w.request_rates.empty() ? std::vector<double>{w.request_rate} : w.request_rates;
}

SloLimits SloOf(const WorkloadFlags& w) {
  SloLimits slo;
  if (w.slo_ttft_ms.has_value()) slo.ttft_s = *w.slo_ttft_ms / 1000.0;
  if (w.slo_tpot_ms.has_value()) slo.tpot_s = *w.slo_tpot_ms / 1000.0;
  return slo;
}

namespace {

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

}  // namespace

absl::StatusOr<std::vector<BenchRequest>> BuildDataset(const WorkloadFlags& w) {
  const TokenIdRange ids{w.token_id_min, w.token_id_max};
  if (w.dataset == "random") {
    RandomDatasetOptions r;
    r.num_prompts = w.num_prompts.value_or(1000);
    r.input = Lengths(w.input_len_dist, w.random_input_len, w.random_range_ratio, w.input_len_sigma,
                      w.input_len_max);
    r.output = Lengths(w.output_len_dist, w.random_output_len, w.random_range_ratio,
                       w.output_len_sigma, w.output_len_max);
    if (absl::Status s = ValidateLengthDistribution(r.input, "--random-input-len"); !s.ok()) {
      return s;
    }
    if (absl::Status s = ValidateLengthDistribution(r.output, "--random-output-len"); !s.ok()) {
      return s;
    }
    r.ids = ids;
    r.seed = w.seed;
    return RandomDataset(r);
  }
  if (w.dataset == "shared-prefix") {
    SharedPrefixOptions p;
    p.num_prefixes = w.prefix_num;
    p.questions_per_prefix = w.prefix_questions;
    p.prefix_len = w.prefix_len;
    p.question_len = w.question_len;
    p.output_len = w.prefix_output_len;
    p.ids = ids;
    p.seed = w.seed;
    return SharedPrefixDataset(p);
  }
  if (w.dataset == "trace") {
    TraceOptions t;
    t.path = w.dataset_path;
    t.num_prompts = w.num_prompts.value_or(0);
    t.time_scale = w.trace_time_scale;
    t.ids = ids;
    t.seed = w.seed;
    t.defer_prompt_ids = w.defer_trace_prompts;
    return LoadTrace(t);
  }
  if (w.dataset == "sharegpt") {
    std::string path = w.tokenizer;
    if (!absl::EndsWith(path, ".json")) path += "/tokenizer.json";
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromFile(path);
    if (!tokenizer.ok()) return tokenizer.status();
    const Tokenizer& tok = **tokenizer;
    ShareGptOptions s;
    s.path = w.dataset_path;
    s.num_prompts = w.num_prompts.value_or(1000);
    if (w.sharegpt_output_len.has_value()) s.fixed_output_len = *w.sharegpt_output_len;
    s.seed = w.seed;
    // The text's own tokens (no BOS): the same count for prompts and replies.
    return LoadShareGpt(s, [&tok](std::string_view text) -> absl::StatusOr<int32_t> {
      return static_cast<int32_t>(tok.Encode(text, /*add_special_tokens=*/false).size());
    });
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--dataset must be random, sharegpt, shared-prefix or trace, got '", w.dataset, "'"));
}

void AddDatasetConfig(const WorkloadFlags& w, nlohmann::json* config) {
  nlohmann::json& c = *config;
  c["dataset"] = w.dataset;
  c["seed"] = w.seed;
  c["token_id_range"] = {w.token_id_min, w.token_id_max};
  if (w.dataset == "random") {
    c["random_input_len"] = w.random_input_len;
    c["random_output_len"] = w.random_output_len;
    c["random_range_ratio"] = w.random_range_ratio;
    c["input_len_dist"] = Lengths(w.input_len_dist, 0, w.random_range_ratio, 0, 0).kind;
    c["output_len_dist"] = Lengths(w.output_len_dist, 0, w.random_range_ratio, 0, 0).kind;
    c["input_len_sigma"] = w.input_len_sigma;
    c["output_len_sigma"] = w.output_len_sigma;
    c["input_len_max"] = w.input_len_max;
    c["output_len_max"] = w.output_len_max;
  } else if (w.dataset == "shared-prefix") {
    c["prefix_num"] = w.prefix_num;
    c["prefix_questions"] = w.prefix_questions;
    c["prefix_len"] = w.prefix_len;
    c["question_len"] = w.question_len;
    c["prefix_output_len"] = w.prefix_output_len;
  } else {
    c["dataset_path"] = w.dataset_path;
    if (w.dataset == "trace") c["trace_time_scale"] = w.trace_time_scale;
    if (w.dataset == "sharegpt") {
      c["tokenizer"] = w.tokenizer;
      c["sharegpt_output_len"] = w.sharegpt_output_len.has_value()
                                     ? nlohmann::json(*w.sharegpt_output_len)
                                     : nlohmann::json(nullptr);
    }
  }
}

}  // namespace tandem::bench
