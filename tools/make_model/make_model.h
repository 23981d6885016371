// tandem-make-model's logic: build a random-weight Hugging Face model directory of a real
// architecture around a real tokenizer.
#ifndef TANDEM_TOOLS_MAKE_MODEL_MAKE_MODEL_H_
#define TANDEM_TOOLS_MAKE_MODEL_MAKE_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "common/types/dtype.h"
#include "tools/make_model/tokenizer_info.h"

namespace tandem {

// --arch values, each a real model family's config features:
//   llama     Llama 3 (rope_theta 500000, no scaling)
//   llama3.1  + rope_scaling llama3 (factor 8), eos [end_of_text, eom, eot]
//   llama3.2  + rope_scaling llama3 (factor 32), tied embeddings
//   mistral   rope_theta 1e6, sliding_window null
//   qwen2     q/k/v biases, rope_theta 1e6
//   qwen3     per-head q/k RMSNorm, explicit head_dim, rope_theta 1e6
inline constexpr const char* kMakeModelArchs[] = {"llama",   "llama3.1", "llama3.2",
                                                  "mistral", "qwen2",    "qwen3"};

// --preset values (hidden, layers, heads, kv heads, intermediate):
//   tiny   64, 2, 4, 2, 128          unit tests
//   small  256, 4, 8, 2, 512         demos
//   100m   256, 16, 4, 2, 2304       benchmarks: 97,132,800 parameters with the Llama-3 vocabulary
//                                    (128256) and an untied LM head; 65.7M of them are the
//                                    embedding and the LM head
inline constexpr const char* kMakeModelPresets[] = {"tiny", "small", "100m"};

struct MakeModelOptions {
  std::string out_dir;
  std::string arch;
  std::string preset = "tiny";
  // Overrides of the preset's shape; vocab defaults to the tokenizer's vocabulary size.
  std::optional<int> hidden, layers, heads, kv_heads, head_dim, intermediate, vocab;
  DType dtype = DType::kBF16;
  uint64_t seed = 0;
  int shards = 1;  // 1: model.safetensors; N > 1: N shards + index
  // A target for a draft of known agreement (speculative decoding): layers from
  // `extra_layers_from` on write `extra_layer_gain` times the usual amount to the residual stream
  // (their o_proj and down_proj scaled). Every tensor depends only on (seed, name, shape), so a
  // model made with the same seed and `--layers extra_layers_from` is exactly this one's first
  // layers: with gain 0 the two give the same logits, and as the gain grows they agree less.
  std::optional<int> extra_layers_from;
  float extra_layer_gain = 1.0f;
  std::string tokenizer_path;         // tokenizer.json (required)
  std::string tokenizer_config_path;  // tokenizer_config.json; default: beside tokenizer.json
};

// The config.json MakeModel writes for these options and this tokenizer. InvalidArgument names
// the offending option.
absl::StatusOr<ModelConfig> BuildModelConfig(const MakeModelOptions& options,
                                             const TokenizerInfo& tokenizer);

struct MakeModelResult {
  ModelConfig config;
  std::vector<std::string> files;  // paths written
};

// Writes OUT/config.json, generation_config.json, model.safetensors (or shards + index) and
// copies of tokenizer.json and tokenizer_config.json. Weights from a previous run in OUT are
// removed first, so a stale shard can never shadow the new weights.
absl::StatusOr<MakeModelResult> MakeModel(const MakeModelOptions& options);

}  // namespace tandem

#endif  // TANDEM_TOOLS_MAKE_MODEL_MAKE_MODEL_H_
