// tandem-bench-cpu: prefill and decode throughput of the CPU backend on a model directory.
//
//   tandem-bench-cpu --model DIR [--threads 2] [--prompt_tokens 512] [--decode_steps 128]
//                    [--decode_prompt_tokens 16] [--decode_batch 8] [--repeats 3]
//
// Prefill: one sequence of prompt_tokens tokens in one Forward (logits of the last token only),
// best of `repeats`. Decode: a short prompt, then decode_steps Forwards of one token per sequence
// (greedy), at batch 1 and, when decode_batch > 1, at that batch. Prints one JSON object.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_tokens.h"
#include "common/backend/cpu_backend.h"
#include "common/model/model_weights.h"
#include "common/util/clock.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "", "Hugging Face model directory");
ABSL_FLAG(int, threads, 2, "CPU threads (the calling thread included)");
ABSL_FLAG(int, prompt_tokens, 512, "prefill length");
ABSL_FLAG(int, decode_steps, 128, "decode steps per sequence");
ABSL_FLAG(int, decode_prompt_tokens, 16, "prompt length before decoding");
ABSL_FLAG(int, decode_batch, 8, "sequences decoded together in the batched run (<= 1: skip it)");
ABSL_FLAG(int, repeats, 3, "prefill repetitions (the fastest counts)");
ABSL_FLAG(uint64_t, seed, 1, "seed of the random prompt tokens");

namespace tandem {
namespace {

struct BenchOptions {
  std::string model_dir;
  int threads = 2;
  int prompt_tokens = 512;
  int decode_steps = 128;
  int decode_prompt_tokens = 16;
  int decode_batch = 8;
  int repeats = 3;
  uint64_t seed = 1;
};

// One sequence's tokens and the pool blocks it owns.
struct Sequence {
  std::vector<TokenId> tokens;
  std::vector<int32_t> blocks;
};

double Seconds() { return Clock::Real()->NowSeconds(); }

// Gives each sequence the blocks for `max_len` tokens, consecutively from block 0.
absl::Status AssignBlocks(std::vector<Sequence>& seqs, int max_len, const KvLayout& layout) {
  int per_seq = (max_len + layout.block_size - 1) / layout.block_size;
  int next = 0;
  for (Sequence& s : seqs) {
    s.blocks.clear();
    for (int i = 0; i < per_seq; ++i) s.blocks.push_back(next++);
  }
  if (next > layout.num_blocks) {
    return absl::InternalError(
        absl::StrCat("needs ", next, " KV blocks, pool has ", layout.num_blocks));
  }
  return absl::OkStatus();
}

// Prefill of one prompt in one Forward; returns the fastest of `repeats` in seconds.
absl::StatusOr<double> TimePrefill(CpuBackend& backend, const BenchOptions& o) {
  const int vocab = backend.config().vocab_size;
  std::vector<Sequence> seqs(1);
  seqs[0].tokens = RandomTokens(o.prompt_tokens, vocab, o.seed);
  RETURN_IF_ERROR(AssignBlocks(seqs, o.prompt_tokens, backend.kv_layout()));
  std::vector<float> logits(vocab);
  ForwardItem item{seqs[0].tokens, 0, seqs[0].blocks, true};
  double best = 1e30;
  for (int r = 0; r < o.repeats + 1; ++r) {  // the first run warms up
    double start = Seconds();
    RETURN_IF_ERROR(backend.Forward(ForwardBatch{std::span(&item, 1)}, LogitsOutput{logits}));
    double elapsed = Seconds() - start;
    if (r > 0) best = std::min(best, elapsed);
  }
  return best;
}

// Decodes `batch` sequences together for decode_steps steps; returns the seconds of the steps.
absl::StatusOr<double> TimeDecode(CpuBackend& backend, const BenchOptions& o, int batch) {
  const int vocab = backend.config().vocab_size;
  std::vector<Sequence> seqs(batch);
  for (int b = 0; b < batch; ++b) {
    seqs[b].tokens = RandomTokens(o.decode_prompt_tokens, vocab, o.seed + 1 + b);
  }
  RETURN_IF_ERROR(AssignBlocks(seqs, o.decode_prompt_tokens + o.decode_steps, backend.kv_layout()));
  std::vector<float> logits(static_cast<size_t>(batch) * vocab);
  std::vector<ForwardItem> items(batch);
  std::vector<TokenId> next(batch);
  // Prompts (not timed), then the first decode input from their logits.
  for (int b = 0; b < batch; ++b) {
    items[b] = ForwardItem{seqs[b].tokens, 0, seqs[b].blocks, true};
  }
  RETURN_IF_ERROR(backend.Forward(ForwardBatch{items}, LogitsOutput{logits}));
  double start = Seconds();
  for (int step = 0; step < o.decode_steps; ++step) {
    for (int b = 0; b < batch; ++b) {
      next[b] =
          Argmax(std::span<const float>(logits).subspan(static_cast<size_t>(b) * vocab, vocab));
      const int pos = static_cast<int>(seqs[b].tokens.size());
      seqs[b].tokens.push_back(next[b]);
      items[b] = ForwardItem{std::span<const TokenId>(&next[b], 1), pos, seqs[b].blocks, true};
    }
    RETURN_IF_ERROR(backend.Forward(ForwardBatch{items}, LogitsOutput{logits}));
  }
  return Seconds() - start;
}

absl::StatusOr<nlohmann::json> Run(const BenchOptions& o) {
  if (o.model_dir.empty()) return absl::InvalidArgumentError("--model is required");
  if (o.prompt_tokens < 1 || o.decode_steps < 1 || o.decode_prompt_tokens < 1 || o.repeats < 1 ||
      o.threads < 1) {
    return absl::InvalidArgumentError("token counts, steps, repeats and threads must be >= 1");
  }
  ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(o.model_dir));
  const int batch = std::max(1, o.decode_batch);
  const int block_size = 16;
  const int decode_blocks =
      batch * ((o.decode_prompt_tokens + o.decode_steps + block_size - 1) / block_size);
  const int prefill_blocks = (o.prompt_tokens + block_size - 1) / block_size;
  CpuBackendOptions options;
  options.num_threads = o.threads;
  options.block_size = block_size;
  options.num_kv_blocks = std::max(decode_blocks, prefill_blocks);
  options.max_batch_tokens = std::max({o.prompt_tokens, batch * o.decode_prompt_tokens, 512});
  double load_start = Seconds();
  ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend, CpuBackend::Create(weights, options));
  double load_seconds = Seconds() - load_start;

  ASSIGN_OR_RETURN(double prefill_s, TimePrefill(*backend, o));
  ASSIGN_OR_RETURN(double decode1_s, TimeDecode(*backend, o, 1));
  const ModelConfig& c = backend->config();
  nlohmann::json out = {
      {"engine", "tandem-cpu"},
      {"model", o.model_dir},
      {"parameters", c.NumParameters()},
      {"weight_bytes", backend->weight_bytes()},
      {"threads", backend->num_threads()},
      {"setup_seconds", load_seconds},
      {"prefill",
       {{"tokens", o.prompt_tokens},
        {"seconds", prefill_s},
        {"tok_per_s", o.prompt_tokens / prefill_s}}},
      {"decode",
       {{"batch", 1},
        {"prompt_tokens", o.decode_prompt_tokens},
        {"steps", o.decode_steps},
        {"seconds", decode1_s},
        {"tok_per_s", o.decode_steps / decode1_s},
        {"ms_per_step", 1e3 * decode1_s / o.decode_steps}}},
  };
  if (o.decode_batch > 1) {
    ASSIGN_OR_RETURN(double decodeb_s, TimeDecode(*backend, o, o.decode_batch));
    out["decode_batched"] = {{"batch", o.decode_batch},
                             {"prompt_tokens", o.decode_prompt_tokens},
                             {"steps", o.decode_steps},
                             {"seconds", decodeb_s},
                             {"tok_per_s", o.decode_batch * o.decode_steps / decodeb_s},
                             {"ms_per_step", 1e3 * decodeb_s / o.decode_steps}};
  }
  return out;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Prefill/decode throughput of tandem's CPU backend; prints JSON.");
  absl::ParseCommandLine(argc, argv);
  tandem::BenchOptions o;
  o.model_dir = absl::GetFlag(FLAGS_model);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  o.decode_steps = absl::GetFlag(FLAGS_decode_steps);
  o.decode_prompt_tokens = absl::GetFlag(FLAGS_decode_prompt_tokens);
  o.decode_batch = absl::GetFlag(FLAGS_decode_batch);
  o.repeats = absl::GetFlag(FLAGS_repeats);
  o.seed = absl::GetFlag(FLAGS_seed);
  absl::StatusOr<nlohmann::json> result = tandem::Run(o);
  if (!result.ok()) {
    std::fprintf(stderr, "tandem-bench-cpu: %s\n", result.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", result->dump(2).c_str());
  return 0;
}
