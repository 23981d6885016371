// tandem-make-model: writes a random-weight Hugging Face model directory of a real architecture
// around a real tokenizer (for tests, demos and benchmarks; no weights can be downloaded here).
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "tools/make_model/make_model.h"

namespace {

using tandem::MakeModelOptions;

constexpr char kUsage[] =
    R"(Usage: tandem-make-model --out DIR --arch ARCH --tokenizer PATH [options]

Writes a Hugging Face model directory with random weights: config.json, generation_config.json,
model.safetensors (or shards + model.safetensors.index.json), tokenizer.json and
tokenizer_config.json. The weights are deterministic for a seed and scaled so greedy choices
have clear margins (top-1 logit typically > 1 above top-2).

Required:
  --out DIR                  output directory (created; old weights in it are replaced)
  --arch ARCH                llama | llama3.1 | llama3.2 | mistral | qwen2 | qwen3
  --tokenizer PATH           tokenizer.json; the vocabulary size and bos/eos ids come from it
Options:
  --tokenizer-config PATH    tokenizer_config.json (default: beside --tokenizer)
  --preset NAME              tiny (default) | small | 100m
                               tiny   hidden 64, 2 layers, 4 heads, 2 kv heads, ffn 128
                               small  hidden 256, 4 layers, 8 heads, 2 kv heads, ffn 512
                               100m   hidden 256, 16 layers, 4 heads, 2 kv heads, ffn 2304
                                      (97.1M parameters with the Llama-3 vocabulary)
  --hidden N --layers N --heads N --kv-heads N --head-dim N --intermediate N
                             override the preset's shape
  --vocab N                  vocabulary size (default: the tokenizer's; not smaller)
  --dtype f32|bf16|f16       weight dtype (default bf16)
  --seed S                   random seed (default 0)
  --shards N                 write N shards plus an index (default 1: model.safetensors)
  --help                     this text
)";

bool ParseInt(std::string_view s, long long lo, long long hi, long long* out) {
  long long v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool ParseUint64(std::string_view s, uint64_t* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
}

// Parses argv into options; returns an error message, or "" on success. Sets *help for --help.
std::string ParseFlags(int argc, char** argv, MakeModelOptions* o, bool* help) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return "";
    }
    if (arg.substr(0, 2) != "--")
      return absl::StrCat("unexpected argument '", std::string(arg), "'");
    std::string name(arg.substr(2));
    std::string value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else {
      if (i + 1 >= argc) return absl::StrCat("--", name, " needs a value");
      value = argv[++i];
    }
    auto int_flag = [&](std::optional<int>* dst) -> std::string {
      long long v;
      if (!ParseInt(value, 1, 1 << 30, &v)) {
        return absl::StrCat("--", name, " expects a positive integer, got '", value, "'");
      }
      *dst = static_cast<int>(v);
      return "";
    };
    std::string err;
    if (name == "out") {
      o->out_dir = value;
    } else if (name == "arch") {
      o->arch = value;
    } else if (name == "preset") {
      o->preset = value;
    } else if (name == "tokenizer") {
      o->tokenizer_path = value;
    } else if (name == "tokenizer-config") {
      o->tokenizer_config_path = value;
    } else if (name == "hidden") {
      err = int_flag(&o->hidden);
    } else if (name == "layers") {
      err = int_flag(&o->layers);
    } else if (name == "heads") {
      err = int_flag(&o->heads);
    } else if (name == "kv-heads") {
      err = int_flag(&o->kv_heads);
    } else if (name == "head-dim") {
      err = int_flag(&o->head_dim);
    } else if (name == "intermediate") {
      err = int_flag(&o->intermediate);
    } else if (name == "vocab") {
      err = int_flag(&o->vocab);
    } else if (name == "shards") {
      std::optional<int> shards;
      err = int_flag(&shards);
      if (shards) o->shards = *shards;
    } else if (name == "seed") {
      if (!ParseUint64(value, &o->seed)) {
        err = absl::StrCat("--seed expects a non-negative integer, got '", value, "'");
      }
    } else if (name == "dtype") {
      if (value == "f32") {
        o->dtype = tandem::DType::kF32;
      } else if (value == "bf16") {
        o->dtype = tandem::DType::kBF16;
      } else if (value == "f16") {
        o->dtype = tandem::DType::kF16;
      } else {
        err = absl::StrCat("--dtype must be f32, bf16 or f16, got '", value, "'");
      }
    } else {
      err = absl::StrCat("unknown flag --", name);
    }
    if (!err.empty()) return err;
  }
  if (o->out_dir.empty()) return "--out DIR is required";
  if (o->arch.empty()) {
    return absl::StrCat("--arch is required (", absl::StrJoin(tandem::kMakeModelArchs, ", "), ")");
  }
  if (o->tokenizer_path.empty()) return "--tokenizer PATH/tokenizer.json is required";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  MakeModelOptions options;
  bool help = false;
  std::string err = ParseFlags(argc, argv, &options, &help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "tandem-make-model: %s\n(run with --help for usage)\n", err.c_str());
    return 2;
  }
  absl::StatusOr<tandem::MakeModelResult> result = tandem::MakeModel(options);
  if (!result.ok()) {
    std::fprintf(stderr, "tandem-make-model: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  const tandem::ModelConfig& c = result->config;
  spdlog::info(
      "wrote {} ({}, {} parameters, hidden {}, {} layers, {} heads / {} kv heads x {}, "
      "ffn {}, vocab {}, {})",
      options.out_dir, std::string(tandem::ArchitectureName(c.architecture)), c.NumParameters(),
      c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size,
      c.vocab_size, std::string(tandem::DTypeName(c.dtype)));
  return 0;
}
