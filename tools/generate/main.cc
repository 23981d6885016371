// tandem-generate: one process, colocated prefill and decode. Runs prompts concurrently through
// the batching engine on the cpu or cuda backend and prints one JSON line per prompt.
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include "absl/strings/str_split.h"
#include "common/backend/backend_kind.h"
#include "common/util/cli_flags.h"
#include "common/util/mutex_checks.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tools/generate/generate_runner.h"

namespace {

using tandem::GenerateOptions;

constexpr char kIntro[] =
    R"(Usage: tandem-generate --model DIR (--prompt TEXT | --prompts-file FILE) [options]

Generates text for each prompt in one process (prefill and decode colocated), all prompts
batched together by the engine. Prints one JSON line per prompt, in input order:
  {"index", "prompt", "prompt_token_ids", "token_ids", "text", "finish_reason", "usage"}
and with --logprobs N also "logprobs": one {"token_id", "logprob", "top_logprobs": [{"token_id",
"logprob"}, ...]} per generated token (raw log-softmax of the model's logits, top N first).
)";

// Declares every flag against `o` with its --help line; --backend's name goes to *backend_name
// (ValidateGenerateFlags parses it).
void AddGenerateFlags(tandem::FlagSet& flags, GenerateOptions* o, std::string* backend_name) {
  flags.Section("Input");
  flags.String("model", &o->model_dir,
               {"DIR",
                "Hugging Face model directory (config.json, *.safetensors, tokenizer.json, "
                "tokenizer_config.json)"});
  flags.String("prompt", &o->prompt, {"TEXT", "one prompt"});
  flags.String("prompts-file", &o->prompts_file,
               {"FILE",
                "one JSON value per line: a string (text), an array of token ids, or an array of "
                "{\"role\", \"content\"} chat messages"});
  flags.Switch("chat", &o->chat, "render text prompts as a user message with the chat template");
  flags.Switch("no-special-tokens", &o->add_special_tokens,
               "do not let the tokenizer add BOS/EOS to text prompts", false);
  flags.Section("Sampling");
  tandem::SamplingParams& sampling = o->sampling;
  flags.Number("max-tokens", &sampling.max_tokens,
               {"N", "tokens to generate per prompt (default 16)"});
  flags.Number("temperature", &sampling.temperature, {"T", "0 = greedy (default 1.0)"});
  flags.Number("top-p", &sampling.top_p,
               {"P", "sample from the smallest set of tokens whose probability reaches P"});
  flags.Number("top-k", &sampling.top_k, {"K", "sample from the K most likely tokens"});
  flags.Number("min-p", &sampling.min_p,
               {"P", "drop tokens less likely than P times the most likely one"});
  flags.Number("seed", &sampling.seed, {"S", "same seed, same output"});
  flags.Number("repetition-penalty", &sampling.repetition_penalty,
               {"R", "divide the logits of tokens seen so far by R (1: off)"});
  flags.Number("presence-penalty", &sampling.presence_penalty,
               {"P", "subtract P from the logits of tokens generated so far"});
  flags.Number("frequency-penalty", &sampling.frequency_penalty,
               {"F", "subtract F times its count so far from each generated token's logit"});
  flags.Custom(
      "stop-token-ids", {"A,B,...", "extra stop tokens (the model's EOS ids always stop)"},
      [o](std::string_view value) -> std::string {
        for (absl::string_view part : absl::StrSplit(absl::string_view(value.data(), value.size()),
                                                     ',', absl::SkipWhitespace())) {
          tandem::TokenId id;
          if (!tandem::ParseFlagNumber(std::string_view(part.data(), part.size()), &id)) {
            return "expects comma-separated token ids";
          }
          o->sampling.stop_token_ids.push_back(id);
        }
        return "";
      });
  flags.Switch("ignore-eos", &sampling.ignore_eos, "keep going past EOS");
  flags.Custom(
      "logprobs", {"N", "print the chosen token's logprob and the top N (0: chosen only)"},
      [o](std::string_view value) -> std::string {
        if (!tandem::ParseFlagNumber(value, &o->sampling.logprobs) || o->sampling.logprobs < 0) {
          return "expects a non-negative integer";
        }
        o->include_logprobs = true;
        return "";
      });
  flags.Section("Backend");
  flags.String("backend", backend_name,
               {"cpu|cuda",
                "cpu (default: f32 on the host) or cuda (bf16 on a GPU; needs a build configured "
                "with CUDA and a usable GPU)"});
  flags.Number("cuda-device", &o->cuda_device, {"N", "GPU for --backend cuda (default 0)"});
  flags.Number("max-model-len", &o->max_model_len,
               {"N",
                "--backend cuda: longest context to size buffers for (default: the model's "
                "max_position_embeddings)"});
  flags.Switch("no-cuda-graphs", &o->cuda_graphs, "--backend cuda: launch decode steps eagerly",
               false);
  flags.Section("Engine");
  flags.Number("threads", &o->num_threads,
               {"N", "CPU threads for --backend cpu (default: all cores)"});
  flags.Number("kv-cache-mib", &o->kv_cache_mib, {"M", "KV pool size (default 256)"});
  flags.Custom("kv-cache-dtype",
               {std::string(tandem::kKvCacheDTypeChoices),
                "what the KV cache stores (default auto: f32 on cpu, bf16 on cuda; the cpu "
                "backend also stores bf16 and fp8_e4m3, the cuda backend fp8_e4m3)"},
               [o](std::string_view value) -> std::string {
                 std::optional<tandem::KvCacheDType> dtype = tandem::ParseKvCacheDType(value);
                 if (!dtype.has_value()) return "expects auto, f32, bf16 or fp8_e4m3";
                 o->kv_cache_dtype = *dtype;
                 return "";
               });
  flags.Number("kv-blocks", &o->num_kv_blocks,
               {"N", "exact KV block count, instead of --kv-cache-mib"});
  flags.Number("block-size", &o->block_size, {"N", "tokens per KV block (default 16)"});
  flags.Number("max-batch-tokens", &o->max_num_batched_tokens,
               {"N", "token budget per step, for chunked prefill (default 512)"});
  flags.Number("max-seqs", &o->max_num_seqs, {"N", "sequences running at once (default 64)"});
  flags.Switch("no-prefix-cache", &o->enable_prefix_caching, "disable prefix caching", false);
  AddSpeculativeFlags(flags, &o->speculative);
}

// Checks what single flags cannot and sets o->backend from `backend_name`; "" when fine.
std::string ValidateGenerateFlags(std::string_view backend_name, GenerateOptions* o) {
  if (o->model_dir.empty()) return "--model DIR is required";
  if (o->prompt.has_value() == o->prompts_file.has_value()) {
    return "give exactly one of --prompt TEXT and --prompts-file FILE";
  }
  const std::optional<tandem::BackendKind> backend = tandem::ParseBackendKind(backend_name);
  if (!backend.has_value() || *backend == tandem::BackendKind::kSim) {
    return "--backend must be cpu or cuda, not '" + std::string(backend_name) + "'";
  }
  o->backend = *backend;
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
  tandem::TurnOffMutexDeadlockDetection();
  spdlog::set_default_logger(spdlog::stderr_color_mt("tandem-generate"));
  GenerateOptions options;
  std::string backend_name = "cpu";
  tandem::FlagSet flags;
  AddGenerateFlags(flags, &options, &backend_name);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = ValidateGenerateFlags(backend_name, &options);
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
