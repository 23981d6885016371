// tandem-make-model: writes a random-weight Hugging Face model directory of a real architecture
// around a real tokenizer (for tests, demos and benchmarks; no weights can be downloaded here).
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/cli_flags.h"
#include "spdlog/spdlog.h"
#include "tools/make_model/make_model.h"

namespace {

using tandem::MakeModelOptions;

constexpr char kIntro[] =
    R"(Usage: tandem-make-model --out DIR --arch ARCH --tokenizer PATH [options]

Writes a Hugging Face model directory with random weights: config.json, generation_config.json,
model.safetensors (or shards + model.safetensors.index.json), tokenizer.json and
tokenizer_config.json. The weights are deterministic for a seed and scaled so greedy choices
have clear margins (top-1 logit typically > 1 above top-2).
)";

// A flag whose value must be an integer in [1, 2^30].
tandem::FlagSet::ValueParser PositiveInt(std::optional<int>* dst) {
  return [dst](std::string_view value) -> std::string {
    int v = 0;
    if (!tandem::ParseFlagNumber(value, &v) || v < 1 || v > (1 << 30)) {
      return "expects a positive integer";
    }
    *dst = v;
    return "";
  };
}

// Declares every flag against `o` with its --help line.
void AddMakeModelFlags(tandem::FlagSet& flags, MakeModelOptions* o) {
  flags.Section("Required");
  flags.String("out", &o->out_dir,
               {"DIR", "output directory (created; old weights in it are replaced)"});
  flags.String("arch", &o->arch, {"ARCH", "llama | llama3.1 | llama3.2 | mistral | qwen2 | qwen3"});
  flags.String("tokenizer", &o->tokenizer_path,
               {"PATH", "tokenizer.json; the vocabulary size and bos/eos ids come from it"});
  flags.Section("Options");
  flags.String("tokenizer-config", &o->tokenizer_config_path,
               {"PATH", "tokenizer_config.json (default: beside --tokenizer)"});
  flags.String("preset", &o->preset,
               {"NAME",
                "tiny (default) | small | 100m\n"
                "  tiny   hidden 64, 2 layers, 4 heads, 2 kv heads, ffn 128\n"
                "  small  hidden 256, 4 layers, 8 heads, 2 kv heads, ffn 512\n"
                "  100m   hidden 256, 16 layers, 4 heads, 2 kv heads, ffn 2304\n"
                "         (97.1M parameters with the Llama-3 vocabulary)"});
  flags.Custom("hidden", {"N", "hidden size (overrides the preset's)"}, PositiveInt(&o->hidden));
  flags.Custom("layers", {"N", "layers (overrides the preset's)"}, PositiveInt(&o->layers));
  flags.Custom("heads", {"N", "attention heads (overrides the preset's)"}, PositiveInt(&o->heads));
  flags.Custom("kv-heads", {"N", "KV heads (overrides the preset's)"}, PositiveInt(&o->kv_heads));
  flags.Custom("head-dim", {"N", "head dimension (overrides the preset's)"},
               PositiveInt(&o->head_dim));
  flags.Custom("intermediate", {"N", "FFN size (overrides the preset's)"},
               PositiveInt(&o->intermediate));
  flags.Custom("vocab", {"N", "vocabulary size (default: the tokenizer's; not smaller)"},
               PositiveInt(&o->vocab));
  flags.Custom("dtype", {"f32|bf16|f16", "weight dtype (default bf16)"},
               [o](std::string_view value) -> std::string {
                 if (value == "f32") {
                   o->dtype = tandem::DType::kF32;
                 } else if (value == "bf16") {
                   o->dtype = tandem::DType::kBF16;
                 } else if (value == "f16") {
                   o->dtype = tandem::DType::kF16;
                 } else {
                   return "must be f32, bf16 or f16";
                 }
                 return "";
               });
  flags.Number("seed", &o->seed, {"S", "random seed (default 0)"});
  flags.Custom("extra-layers-from",
               {"N",
                "a target for a draft of known agreement: layers N and up write\n"
                "  --extra-layer-gain times the usual amount to the residual stream; a model\n"
                "  made with the same --seed and --layers N is exactly this one's first layers"},
               PositiveInt(&o->extra_layers_from));
  flags.Number("extra-layer-gain", &o->extra_layer_gain,
               {"G", "with --extra-layers-from: 0 (the draft's logits exactly) .. 1 (default)"});
  flags.Custom("shards", {"N", "write N shards plus an index (default 1: model.safetensors)"},
               [o](std::string_view value) -> std::string {
                 std::optional<int> shards;
                 std::string problem = PositiveInt(&shards)(value);
                 if (shards) o->shards = *shards;
                 return problem;
               });
}

// Checks what single flags cannot; "" when the options are complete.
std::string ValidateMakeModelOptions(const MakeModelOptions& o) {
  if (o.out_dir.empty()) return "--out DIR is required";
  if (o.arch.empty()) {
    return absl::StrCat("--arch is required (", absl::StrJoin(tandem::kMakeModelArchs, ", "), ")");
  }
  if (o.tokenizer_path.empty()) return "--tokenizer PATH/tokenizer.json is required";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  MakeModelOptions options;
  tandem::FlagSet flags;
  AddMakeModelFlags(flags, &options);
  bool help = false;
  std::string err = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (err.empty()) err = ValidateMakeModelOptions(options);
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
