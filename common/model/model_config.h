// The architecture hyper-parameters of a Hugging Face model directory (config.json).
#ifndef TANDEM_COMMON_MODEL_MODEL_CONFIG_H_
#define TANDEM_COMMON_MODEL_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/types/dtype.h"

namespace tandem {

enum class Architecture { kLlama, kMistral, kQwen2, kQwen3 };

// "LlamaForCausalLM", ...
std::string_view ArchitectureName(Architecture a);

struct RopeScaling {
  enum class Type { kNone, kLlama3, kLinear };
  Type type = Type::kNone;
  float factor = 1.0f;
  // llama3 only:
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;    // num_hidden_layers
  int num_heads = 0;     // num_attention_heads
  int num_kv_heads = 0;  // num_key_value_heads (defaults to num_heads)
  int head_dim = 0;      // head_dim (defaults to hidden_size / num_heads)
  int max_position_embeddings = 0;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections have biases (Qwen2; Llama attention_bias)
  bool qk_norm = false;         // per-head RMSNorm on q and k before RoPE (Qwen3)
  int sliding_window = 0;       // 0: full attention
  DType dtype = DType::kF32;    // torch_dtype
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;

  int q_size() const { return num_heads * head_dim; }
  int kv_size() const { return num_kv_heads * head_dim; }
  // Parameters in the model, counting a tied LM head once.
  int64_t NumParameters() const;
};

// Parses config.json text; `path` only names the file in error messages.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& path);
// Reads DIR/config.json.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);
// Serializes to config.json text (Hugging Face field names).
std::string ModelConfigToJson(const ModelConfig& config);

}  // namespace tandem

#endif  // TANDEM_COMMON_MODEL_MODEL_CONFIG_H_
