// The named tensors of a Llama-family model, resolved and shape-checked against its config.
#ifndef TANDEM_COMMON_MODEL_MODEL_WEIGHTS_H_
#define TANDEM_COMMON_MODEL_MODEL_WEIGHTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "common/model/tensor.h"

namespace tandem {

class SafetensorsStore;  // common/model/safetensors.h

// Hugging Face names ("model.layers.{i}.self_attn.q_proj.weight", ...). Linear weights are
// [out_features, in_features]. Optional tensors are invalid() views when absent.
struct LayerWeights {
  TensorView input_layernorm;           // [hidden]
  TensorView q_proj, k_proj, v_proj;    // [q_size|kv_size, hidden]
  TensorView q_bias, k_bias, v_bias;    // [q_size|kv_size], attention_bias only
  TensorView o_bias;                    // [hidden], attention_bias of Llama/Qwen3 (not Qwen2)
  TensorView q_norm, k_norm;            // [head_dim], qk_norm only
  TensorView o_proj;                    // [hidden, q_size]
  TensorView post_attention_layernorm;  // [hidden]
  TensorView gate_proj, up_proj;        // [intermediate, hidden]
  TensorView down_proj;                 // [hidden, intermediate]
};

struct ModelWeights {
  ModelConfig config;
  TensorView embed_tokens;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  TensorView norm;     // [hidden]
  TensorView lm_head;  // [vocab, hidden]; the embedding when tie_word_embeddings
  std::shared_ptr<SafetensorsStore> store;  // keeps the mapped files alive
};

// A tensor a config calls for: its Hugging Face name and shape.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Every tensor a model with this config stores, in Hugging Face order (embedding, layers, norm,
// lm_head; no lm_head when tie_word_embeddings).
std::vector<TensorSpec> ExpectedTensors(const ModelConfig& config);

// Loads DIR (config.json + model.safetensors or model.safetensors.index.json shards).
// Every error names the file and, where it applies, the tensor.
absl::StatusOr<ModelWeights> LoadModelWeights(const std::string& model_dir);

}  // namespace tandem

#endif  // TANDEM_COMMON_MODEL_MODEL_WEIGHTS_H_
