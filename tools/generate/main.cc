// tandem-generate: one process, colocated prefill and decode. Runs prompts concurrently through
// the batching engine on the cpu or cuda backend and prints one JSON line per prompt.
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include "absl/strings/str_split.h"
#include "common/util/cli_flags.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tools/generate/generate_runner.h"

namespace {

using tandem::GenerateOptions;

constexpr char kUsage[] =
    R"(Usage: tandem-generate --model DIR (--prompt TEXT | --prompts-file FILE) [options]

Generates text for each prompt in one process (prefill and decode colocated), all prompts
batched together by the engine. Prints one JSON line per prompt, in input order:
  {"index", "prompt", "prompt_token_ids", "token_ids", "text", "finish_reason", "usage"}
and with --logprobs N also "logprobs": one {"token_id", "logprob", "top_logprobs": [{"token_id",
"logprob"}, ...]} per generated token (raw log-softmax of the model's logits, top N first).

Input:
  --model DIR                 Hugging Face model directory (config.json, *.safetensors,
                              tokenizer.json, tokenizer_config.json)
  --prompt TEXT               one prompt
  --prompts-file FILE         one JSON value per line: a string (text), an array of token ids,
                              or an array of {"role", "content"} chat messages
  --chat                      render text prompts as a user message with the chat template
  --no-special-tokens         do not let the tokenizer add BOS/EOS to text prompts
Sampling:
  --max-tokens N              tokens to generate per prompt (default 16)
  --temperature T             0 = greedy (default 1.0)
  --top-p P --top-k K --min-p P
  --seed S                    same seed, same output
  --repetition-penalty R --presence-penalty P --frequency-penalty F
  --stop-token-ids A,B,...    extra stop tokens (the model's EOS ids always stop)
  --ignore-eos                keep going past EOS
  --logprobs N                print the chosen token's logprob and the top N (0: chosen only)
Backend:
  --backend cpu|cuda          cpu (default: f32 on the host) or cuda (bf16 on a GPU; needs a
                              build configured with CUDA and a usable GPU)
  --cuda-device N             GPU for --backend cuda (default 0)
  --max-model-len N           --backend cuda: longest context to size buffers for (default: the
                              model's max_position_embeddings)
  --no-cuda-graphs            --backend cuda: launch decode steps eagerly
Engine:
  --threads N                 CPU threads for --backend cpu (default: all cores)
  --kv-cache-mib M            KV pool size (default 256) | --kv-blocks N (exact block count)
  --block-size N              tokens per KV block (default 16)
  --max-batch-tokens N        token budget per step, for chunked prefill (default 512)
  --max-seqs N                sequences running at once (default 64)
  --no-prefix-cache           disable prefix caching
  --help                      this text
)";

// Declares every flag against `o`, parses argv, then checks what single flags cannot.
// Returns an error message or "" (sets *help for --help).
std::string ParseFlags(int argc, char** argv, GenerateOptions* o, bool* help) {
  tandem::FlagSet flags;
  flags.String("model", &o->model_dir);
  flags.String("prompt", &o->prompt);
  flags.String("prompts-file", &o->prompts_file);
  flags.Switch("chat", &o->chat);
  flags.Switch("no-special-tokens", &o->add_special_tokens, false);
  flags.Number("max-tokens", &o->sampling.max_tokens);
  flags.Number("temperature", &o->sampling.temperature);
  flags.Number("top-p", &o->sampling.top_p);
  flags.Number("top-k", &o->sampling.top_k);
  flags.Number("min-p", &o->sampling.min_p);
  flags.Number("seed", &o->sampling.seed);
  flags.Number("repetition-penalty", &o->sampling.repetition_penalty);
  flags.Number("presence-penalty", &o->sampling.presence_penalty);
  flags.Number("frequency-penalty", &o->sampling.frequency_penalty);
  flags.Custom("stop-token-ids", [o](std::string_view value) -> std::string {
    for (absl::string_view part : absl::StrSplit(absl::string_view(value.data(), value.size()), ',',
                                                 absl::SkipWhitespace())) {
      tandem::TokenId id;
      if (!tandem::ParseFlagNumber(std::string_view(part.data(), part.size()), &id)) {
        return "expects comma-separated token ids";
      }
      o->sampling.stop_token_ids.push_back(id);
    }
    return "";
  });
  flags.Switch("ignore-eos", &o->sampling.ignore_eos);
  flags.Custom("logprobs", [o](std::string_view value) -> std::string {
    if (!tandem::ParseFlagNumber(value, &o->sampling.logprobs) || o->sampling.logprobs < 0) {
      return "expects a non-negative integer";
    }
    o->include_logprobs = true;
    return "";
  });
  flags.String("backend", &o->backend);
  flags.Number("cuda-device", &o->cuda_device);
  flags.Number("max-model-len", &o->max_model_len);
  flags.Switch("no-cuda-graphs", &o->cuda_graphs, false);
  flags.Number("threads", &o->num_threads);
  flags.Number("kv-cache-mib", &o->kv_cache_mib);
  flags.Number("kv-blocks", &o->num_kv_blocks);
  flags.Number("block-size", &o->block_size);
  flags.Number("max-batch-tokens", &o->max_num_batched_tokens);
  flags.Number("max-seqs", &o->max_num_seqs);
  flags.Switch("no-prefix-cache", &o->enable_prefix_caching, false);
  std::string error = flags.Parse(argc, argv, help);
  if (!error.empty() || *help) return error;

  if (o->model_dir.empty()) return "--model DIR is required";
  if (o->prompt.has_value() == o->prompts_file.has_value()) {
    return "give exactly one of --prompt TEXT and --prompts-file FILE";
  }
  if (o->backend != "cpu" && o->backend != "cuda") {
    return "--backend must be cpu or cuda, not '" + o->backend + "'";
  }
  if (o->cuda_device < 0) return "--cuda-device must be >= 0";
  if (o->max_model_len < 0) return "--max-model-len must be >= 0";
  if (o->num_threads < 0) return "--threads must be >= 0";
  if (o->kv_cache_mib < 1 && o->num_kv_blocks < 1) return "--kv-cache-mib must be >= 1";
  if (o->num_kv_blocks < 0) return "--kv-blocks must be >= 0";
  if (o->block_size < 1) return "--block-size must be >= 1";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("tandem-generate"));
  GenerateOptions options;
  bool help = false;
  std::string error = ParseFlags(argc, argv, &options, &help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-generate: %s\n", error.c_str());
    return 2;
  }
  absl::Status status = tandem::RunGenerate(options, std::cout);
  if (!status.ok()) {
    std::fprintf(stderr, "tandem-generate: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
