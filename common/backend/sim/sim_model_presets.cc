#include "common/backend/sim/sim_model_presets.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace {

ModelConfig Llama31(int hidden, int intermediate, int layers, int heads, int head_dim = 128) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.vocab_size = 128256;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = 8;
  c.head_dim = head_dim;
  c.max_position_embeddings = 131072;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.rope_scaling.type = RopeScaling::Type::kLlama3;
  c.rope_scaling.factor = 8.0f;
  c.dtype = DType::kBF16;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001, 128008, 128009};
  return c;
}

}  // namespace

std::vector<std::string> SimModelPresetNames() {
  return {"llama-3.1-8b", "llama-3.1-70b", "llama-3.2-1b", "llama-3.2-3b"};
}

absl::StatusOr<ModelConfig> SimModelPreset(std::string_view name) {
  if (name == "llama-3.1-8b") return Llama31(4096, 14336, 32, 32);
  if (name == "llama-3.1-70b") return Llama31(8192, 28672, 80, 64);
  // The Llama-3.2 text models share 3.1's vocabulary and RoPE (their LM heads are tied to the
  // embedding, which changes no byte a step reads): the usual drafts for 3.1.
  if (name == "llama-3.2-1b") {
    ModelConfig c = Llama31(2048, 8192, 16, 32, 64);
    c.tie_word_embeddings = true;
    c.rope_scaling.factor = 32.0f;
    return c;
  }
  if (name == "llama-3.2-3b") {
    ModelConfig c = Llama31(3072, 8192, 28, 24);
    c.tie_word_embeddings = true;
    c.rope_scaling.factor = 32.0f;
    return c;
  }
  return absl::NotFoundError(absl::StrCat("unknown --sim-model '", std::string(name),
                                          "' (one of: ", absl::StrJoin(SimModelPresetNames(), ", "),
                                          "; or leave it unset to use the model's config.json)"));
}

}  // namespace tandem
