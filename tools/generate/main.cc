// tandem-generate: one process, colocated prefill and decode. Runs prompts concurrently through
// the batching engine on the CPU backend and prints one JSON line per prompt.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tools/generate/generate_runner.h"

namespace {

using tandem::GenerateOptions;

constexpr char kUsage[] = R"(Usage: tandem-generate --model DIR (--prompt TEXT | --prompts-file FILE) [options]

Generates text for each prompt in one process (prefill and decode colocated), all prompts
batched together by the engine. Prints one JSON line per prompt, in input order:
  {"index", "prompt", "prompt_token_ids", "token_ids", "text", "finish_reason", "usage"}

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
Engine:
  --threads N                 CPU threads (default: all cores)
  --kv-cache-mib M            KV pool size (default 256) | --kv-blocks N (exact block count)
  --block-size N              tokens per KV block (default 16)
  --max-batch-tokens N        token budget per step, for chunked prefill (default 512)
  --max-seqs N                sequences running at once (default 64)
  --no-prefix-cache           disable prefix caching
  --help                      this text
)";

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  if constexpr (std::is_floating_point_v<T>) {
    double d;
    if (!absl::SimpleAtod(absl::string_view(s.data(), s.size()), &d)) return false;
    *out = static_cast<T>(d);
    return true;
  } else {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
  }
}

// Fills *o from argv; returns an error message or "" (sets *help for --help).
std::string ParseFlags(int argc, char** argv, GenerateOptions* o, bool* help) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return "";
    }
    if (arg.substr(0, 2) != "--") return absl::StrCat("unexpected argument '", std::string(arg), "'");
    std::string name(arg.substr(2));
    // Switches.
    if (name == "chat") { o->chat = true; continue; }
    if (name == "no-special-tokens") { o->add_special_tokens = false; continue; }
    if (name == "ignore-eos") { o->sampling.ignore_eos = true; continue; }
    if (name == "no-prefix-cache") { o->enable_prefix_caching = false; continue; }
    std::string value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else {
      if (i + 1 >= argc) return absl::StrCat("--", name, " needs a value");
      value = argv[++i];
    }
    auto bad = [&](std::string_view what) {
      return absl::StrCat("--", name, " expects ", std::string(what), ", got '", value, "'");
    };
    auto num = [&](auto* dst, std::string_view what) -> std::string {
      return ParseNumber(value, dst) ? "" : bad(what);
    };
    std::string err;
    if (name == "model") o->model_dir = value;
    else if (name == "prompt") o->prompt = value;
    else if (name == "prompts-file") o->prompts_file = value;
    else if (name == "max-tokens") err = num(&o->sampling.max_tokens, "an integer");
    else if (name == "temperature") err = num(&o->sampling.temperature, "a number");
    else if (name == "top-p") err = num(&o->sampling.top_p, "a number");
    else if (name == "top-k") err = num(&o->sampling.top_k, "an integer");
    else if (name == "min-p") err = num(&o->sampling.min_p, "a number");
    else if (name == "repetition-penalty") err = num(&o->sampling.repetition_penalty, "a number");
    else if (name == "presence-penalty") err = num(&o->sampling.presence_penalty, "a number");
    else if (name == "frequency-penalty") err = num(&o->sampling.frequency_penalty, "a number");
    else if (name == "seed") {
      uint64_t seed;
      err = num(&seed, "a non-negative integer");
      o->sampling.seed = seed;
    } else if (name == "stop-token-ids") {
      for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
        tandem::TokenId id;
        if (!ParseNumber(std::string_view(part.data(), part.size()), &id)) {
          return bad("comma-separated token ids");
        }
        o->sampling.stop_token_ids.push_back(id);
      }
    } else if (name == "logprobs") {
      err = num(&o->sampling.logprobs, "an integer");
      o->include_logprobs = true;
    } else if (name == "threads") err = num(&o->num_threads, "an integer");
    else if (name == "kv-cache-mib") err = num(&o->kv_cache_mib, "an integer");
    else if (name == "kv-blocks") err = num(&o->num_kv_blocks, "an integer");
    else if (name == "block-size") err = num(&o->block_size, "an integer");
    else if (name == "max-batch-tokens") err = num(&o->max_num_batched_tokens, "an integer");
    else if (name == "max-seqs") err = num(&o->max_num_seqs, "an integer");
    else return absl::StrCat("unknown flag --", name, " (see --help)");
    if (!err.empty()) return err;
  }
  if (o->model_dir.empty()) return "--model DIR is required";
  if (o->prompt.has_value() == o->prompts_file.has_value()) {
    return "give exactly one of --prompt TEXT and --prompts-file FILE";
  }
  if (o->num_threads < 0) return "--threads must be >= 0";
  if (o->kv_cache_mib < 1 && o->num_kv_blocks < 1) return "--kv-cache-mib must be >= 1";
  if (o->num_kv_blocks < 0) return "--kv-blocks must be >= 0";
  if (o->block_size < 1) return "--block-size must be >= 1";
  if (o->include_logprobs && o->sampling.logprobs < 0) return "--logprobs must be >= 0";
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
