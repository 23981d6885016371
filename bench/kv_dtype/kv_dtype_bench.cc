// tandem-bench-kv-dtype: the cpu backend's KV cache dtypes (f32, bf16, fp8_e4m3) side by side in
// one run, on one model directory.
//
//   tandem-bench-kv-dtype --model DIR [--threads 2] [--context 2048] [--batches 8,32]
//                         [--steps 16] [--repeats 3] [--json FILE]
//
// Per dtype: KV bytes per token, blocks (of 16 tokens) per GiB of pool, the bytes a prompt of
// --context tokens moves in a handoff, and decode throughput at each batch size with every
// sequence holding --context tokens: one prompt is prefilled (not timed) and its blocks copied to
// the other sequences, then --steps greedy decode steps of the whole batch are timed one by one,
// --repeats times, the dtypes taking turns within each repeat so that they see the same machine.
// Every step costs the same (the context grows by one token), so on a shared machine the fastest
// step is the least disturbed measurement: tok/s is batch / the fastest step (the median step's
// is in the JSON too). Beside it, the CPU time each step took (the process's, all threads; the
// thread pool blocks rather than spins), which time slices lost to other processes do not
// inflate: tokens per CPU-second of the median step. Prints a table and writes JSON.
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_tokens.h"
#include "common/backend/cpu_backend.h"
#include "common/kv/kv_dtype.h"
#include "common/model/model_weights.h"
#include "common/util/cli_flags.h"
#include "common/util/clock.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

constexpr int kBlockSize = 16;
constexpr DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kFP8E4M3};

struct Options {
  std::string model_dir;
  int threads = 2;
  int context = 2048;
  std::string batches = "8,32";
  int steps = 16;
  int repeats = 3;
  std::string json;
};

double Seconds() { return Clock::Real()->NowSeconds(); }

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One dtype's backend, sized for the largest batch, with sequence 0's prompt prefilled.
struct DTypeRun {
  DType dtype;
  std::unique_ptr<CpuBackend> backend;
  std::vector<TokenId> prompt;
  int blocks_per_seq = 0;
  std::map<int, std::vector<double>> step_s;      // batch -> every timed step's seconds
  std::map<int, std::vector<double>> step_cpu_s;  // and its CPU seconds
};

absl::Status Prepare(const ModelWeights& weights, const Options& o, int max_batch, DTypeRun& run) {
  run.blocks_per_seq = (o.context + o.steps + kBlockSize - 1) / kBlockSize;
  CpuBackendOptions options;
  options.num_threads = o.threads;
  options.block_size = kBlockSize;
  options.num_kv_blocks = max_batch * run.blocks_per_seq;
  options.max_batch_tokens = std::max(o.context, max_batch);
  options.kv_dtype = run.dtype;
  ASSIGN_OR_RETURN(run.backend, CpuBackend::Create(weights, options));
  const int vocab = run.backend->config().vocab_size;
  run.prompt = RandomTokens(o.context, vocab, 7);
  std::vector<int32_t> table(run.blocks_per_seq);
  for (int i = 0; i < run.blocks_per_seq; ++i) table[i] = i;
  ForwardItem item{run.prompt, 0, table, false};
  RETURN_IF_ERROR(run.backend->Forward(ForwardBatch{std::span(&item, 1)}, LogitsOutput{}));
  // Every other sequence starts from a copy of the prompt's KV.
  const int prompt_blocks = (o.context + kBlockSize - 1) / kBlockSize;
  for (int b = 1; b < max_batch; ++b) {
    for (int i = 0; i < prompt_blocks; ++i) {
      RETURN_IF_ERROR(run.backend->CopyBlock(i, b * run.blocks_per_seq + i));
    }
  }
  return absl::OkStatus();
}

// `steps` decode steps of `batch` sequences that each hold the prompt; appends each step's seconds.
absl::Status TimeDecode(DTypeRun& run, const Options& o, int batch) {
  const int vocab = run.backend->config().vocab_size;
  std::vector<std::vector<int32_t>> tables(batch);
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < run.blocks_per_seq; ++i) tables[b].push_back(b * run.blocks_per_seq + i);
  }
  std::vector<TokenId> next(batch);
  for (int b = 0; b < batch; ++b) next[b] = run.prompt[(b * 31) % o.context];
  std::vector<float> logits(static_cast<size_t>(batch) * vocab);
  std::vector<ForwardItem> items(batch);
  std::vector<double>& times = run.step_s[batch];
  std::vector<double>& cpu_times = run.step_cpu_s[batch];
  for (int step = 0; step < o.steps; ++step) {
    for (int b = 0; b < batch; ++b) {
      items[b] =
          ForwardItem{std::span<const TokenId>(&next[b], 1), o.context + step, tables[b], true};
    }
    const double start = Seconds();
    const double cpu_start = CpuSeconds();
    RETURN_IF_ERROR(run.backend->Forward(ForwardBatch{items}, LogitsOutput{logits}));
    times.push_back(Seconds() - start);
    cpu_times.push_back(CpuSeconds() - cpu_start);
    for (int b = 0; b < batch; ++b) {
      next[b] = Argmax(std::span<const float>(logits).subspan(size_t(b) * vocab, vocab));
    }
  }
  return absl::OkStatus();
}

double Fastest(std::vector<double> v) { return *std::min_element(v.begin(), v.end()); }
double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

absl::StatusOr<nlohmann::json> Run(const Options& o) {
  if (o.model_dir.empty()) return absl::InvalidArgumentError("--model DIR is required");
  std::vector<int> batches;
  for (absl::string_view part : absl::StrSplit(o.batches, ',')) {
    int b = 0;
    if (!absl::SimpleAtoi(part, &b) || b < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--batches: bad batch size '", part, "'"));
    }
    batches.push_back(b);
  }
  if (o.context < 1 || o.steps < 1 || o.repeats < 1 || o.threads < 1 || batches.empty()) {
    return absl::InvalidArgumentError("context, steps, repeats, threads and batches must be >= 1");
  }
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(o.model_dir));
  std::vector<DTypeRun> runs;
  for (DType dtype : kDTypes) {
    runs.push_back(DTypeRun{.dtype = dtype});
    RETURN_IF_ERROR(Prepare(weights, o, max_batch, runs.back()));
  }
  for (int r = 0; r < o.repeats; ++r) {
    for (int batch : batches) {
      for (DTypeRun& run : runs) RETURN_IF_ERROR(TimeDecode(run, o, batch));
    }
  }

  const ModelConfig& c = runs[0].backend->config();
  nlohmann::json out = {{"bench", "tandem-bench-kv-dtype"},
                        {"model", o.model_dir},
                        {"layers", c.num_layers},
                        {"kv_heads", c.num_kv_heads},
                        {"head_dim", c.head_dim},
                        {"weight_bytes", runs[0].backend->weight_bytes()},
                        {"threads", o.threads},
                        {"context", o.context},
                        {"steps", o.steps},
                        {"repeats", o.repeats},
                        {"block_size", kBlockSize},
                        {"dtypes", nlohmann::json::array()}};
  std::printf(
      "model %s: %d layers, %d KV heads x %d; context %d, %d decode steps x %d repeats (tok/s "
      "of the fastest step), %d threads\n",
      o.model_dir.c_str(), c.num_layers, c.num_kv_heads, c.head_dim, o.context, o.steps, o.repeats,
      o.threads);
  std::printf("%-9s %11s %14s %16s", "kv dtype", "bytes/token", "blocks per GiB", "handoff MiB");
  for (int b : batches) {
    std::printf("  %-15s %-19s", absl::StrCat("batch ", b, " tok/s").c_str(),
                absl::StrCat("batch ", b, " tok/CPU-s").c_str());
  }
  std::printf("\n");
  for (const DTypeRun& run : runs) {
    const KvLayout& layout = run.backend->kv_layout();
    const size_t block_bytes = layout.bytes_per_token() * kBlockSize;
    const int64_t blocks_per_gib = static_cast<int64_t>((size_t{1} << 30) / block_bytes);
    const double handoff_mib =
        static_cast<double>(layout.bytes_per_token()) * o.context / (1 << 20);
    nlohmann::json d = {{"dtype", KvDTypeName(run.dtype)},
                        {"bytes_per_token", layout.bytes_per_token()},
                        {"blocks_per_gib", blocks_per_gib},
                        {"handoff_bytes_per_prompt", layout.bytes_per_token() * o.context},
                        {"decode", nlohmann::json::array()}};
    std::printf("%-9s %11zu %14lld %16.2f", KvDTypeName(run.dtype), layout.bytes_per_token(),
                static_cast<long long>(blocks_per_gib), handoff_mib);
    for (int b : batches) {
      const double fastest = Fastest(run.step_s.at(b));
      const double median = Median(run.step_s.at(b));
      const double tok_s = b / fastest;
      const double f32_tok_s = b / Fastest(runs[0].step_s.at(b));
      const double cpu = Median(run.step_cpu_s.at(b));
      const double f32_cpu = Median(runs[0].step_cpu_s.at(b));
      d["decode"].push_back({{"batch", b},
                             {"steps_timed", run.step_s.at(b).size()},
                             {"fastest_step_ms", 1e3 * fastest},
                             {"median_step_ms", 1e3 * median},
                             {"tok_per_s", tok_s},
                             {"tok_per_s_median_step", b / median},
                             {"vs_f32", tok_s / f32_tok_s},
                             {"vs_f32_median_step", Median(runs[0].step_s.at(b)) / median},
                             {"median_step_cpu_ms", 1e3 * cpu},
                             {"tok_per_cpu_s", b / cpu},
                             {"vs_f32_cpu", f32_cpu / cpu}});
      std::printf("  %7.1f (x%.2f)  %9.1f (x%.2f)", tok_s, tok_s / f32_tok_s, b / cpu,
                  f32_cpu / cpu);
    }
    std::printf("\n");
    out["dtypes"].push_back(std::move(d));
  }
  return out;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::Options o;
  tandem::FlagSet flags;
  flags.String("model", &o.model_dir, {"DIR", "Hugging Face model directory"});
  flags.Number("threads", &o.threads, {"N", "CPU threads (default 2)"});
  flags.Number("context", &o.context, {"N", "tokens each sequence holds (default 2048)"});
  flags.String("batches", &o.batches, {"B,B", "decode batch sizes (default 8,32)"});
  flags.Number("steps", &o.steps, {"N", "timed decode steps per run (default 16)"});
  flags.Number("repeats", &o.repeats,
               {"N", "timed runs of --steps steps per (dtype, batch) (default 3)"});
  flags.String("json", &o.json, {"FILE", "also write the results there"});
  bool help = false;
  if (std::string err = flags.Parse(argc, argv, &help); !err.empty()) {
    std::fprintf(stderr, "tandem-bench-kv-dtype: %s\n", err.c_str());
    return 2;
  }
  if (help) {
    std::fputs(flags.Help("Usage: tandem-bench-kv-dtype --model DIR [options]\n").c_str(), stdout);
    return 0;
  }
  absl::StatusOr<nlohmann::json> result = tandem::Run(o);
  if (!result.ok()) {
    std::fprintf(stderr, "tandem-bench-kv-dtype: %s\n", result.status().ToString().c_str());
    return 1;
  }
  if (!o.json.empty()) {
    std::ofstream(o.json) << result->dump(2) << "\n";
  }
  return 0;
}
