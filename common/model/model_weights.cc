#include "common/model/model_weights.h"

#include <functional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/safetensors.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

// Called once per tensor slot the config needs: its name, shape and where it goes.
using SlotFn =
    std::function<void(const std::string& name, std::vector<int64_t> shape, TensorView* slot)>;

// The single list of what a Llama-family model stores; both ExpectedTensors and the loader read
// it. When tied, lm_head has no slot of its own.
void ForEachSlot(const ModelConfig& c, ModelWeights* w, const SlotFn& fn) {
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  const int64_t vocab = c.vocab_size, hd = c.head_dim;
  fn("model.embed_tokens.weight", {vocab, h}, &w->embed_tokens);
  w->layers.resize(c.num_layers);
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w->layers[i];
    const std::string p = absl::StrCat("model.layers.", i, ".");
    fn(p + "input_layernorm.weight", {h}, &l.input_layernorm);
    fn(p + "self_attn.q_proj.weight", {q, h}, &l.q_proj);
    fn(p + "self_attn.k_proj.weight", {kv, h}, &l.k_proj);
    fn(p + "self_attn.v_proj.weight", {kv, h}, &l.v_proj);
    if (c.attention_bias) {
      fn(p + "self_attn.q_proj.bias", {q}, &l.q_bias);
      fn(p + "self_attn.k_proj.bias", {kv}, &l.k_bias);
      fn(p + "self_attn.v_proj.bias", {kv}, &l.v_bias);
    }
    if (c.qk_norm) {
      fn(p + "self_attn.q_norm.weight", {hd}, &l.q_norm);
      fn(p + "self_attn.k_norm.weight", {hd}, &l.k_norm);
    }
    fn(p + "self_attn.o_proj.weight", {h, q}, &l.o_proj);
    if (c.attention_bias && c.architecture != Architecture::kQwen2) {
      fn(p + "self_attn.o_proj.bias", {h}, &l.o_bias);
    }
    fn(p + "post_attention_layernorm.weight", {h}, &l.post_attention_layernorm);
    fn(p + "mlp.gate_proj.weight", {inter, h}, &l.gate_proj);
    fn(p + "mlp.up_proj.weight", {inter, h}, &l.up_proj);
    fn(p + "mlp.down_proj.weight", {h, inter}, &l.down_proj);
  }
  fn("model.norm.weight", {h}, &w->norm);
  if (!c.tie_word_embeddings) fn("lm_head.weight", {vocab, h}, &w->lm_head);
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

const char* BoolName(bool b) { return b ? "true" : "false"; }

// Tensors some checkpoints carry that the forward pass recomputes (old Llama exports).
bool IsIgnorableTensor(const std::string& name) {
  return absl::EndsWith(name, ".rotary_emb.inv_freq");
}

}  // namespace

std::vector<TensorSpec> ExpectedTensors(const ModelConfig& config) {
  std::vector<TensorSpec> out;
  ModelWeights scratch;
  ForEachSlot(config, &scratch,
              [&](const std::string& name, std::vector<int64_t> shape, TensorView*) {
                out.push_back({name, std::move(shape)});
              });
  return out;
}

absl::StatusOr<ModelWeights> LoadModelWeights(const std::string& model_dir) {
  ModelWeights w;
  ASSIGN_OR_RETURN(w.config, LoadModelConfig(model_dir));
  ASSIGN_OR_RETURN(w.store, SafetensorsStore::OpenDir(model_dir));
  const SafetensorsStore& store = *w.store;
  const std::string config_path = model_dir + "/config.json";

  absl::Status status;
  std::set<std::string> used;
  ForEachSlot(w.config, &w,
              [&](const std::string& name, std::vector<int64_t> shape, TensorView* slot) {
                if (!status.ok()) return;
                absl::StatusOr<TensorView> t = store.Get(name);
                if (!t.ok()) {
                  status = absl::NotFoundError(absl::StrCat(t.status().message(), " (", config_path,
                                                            " calls for it with shape ",
                                                            ShapeString(shape), ")"));
                  return;
                }
                if (t->shape != shape) {
                  status = absl::InvalidArgumentError(absl::StrCat(
                      store.FileOf(name), ": tensor '", name, "' has shape ", ShapeString(t->shape),
                      " but ", config_path, " implies ", ShapeString(shape)));
                  return;
                }
                *slot = *std::move(t);
                used.insert(name);
              });
  RETURN_IF_ERROR(status);

  if (w.config.tie_word_embeddings) {
    // A tied checkpoint may still carry lm_head.weight (a copy of the embedding); the embedding
    // is what the model uses.
    if (store.Contains("lm_head.weight")) {
      TensorView head = *store.Get("lm_head.weight");
      if (head.shape != w.embed_tokens.shape) {
        return absl::InvalidArgumentError(
            absl::StrCat(store.FileOf("lm_head.weight"), ": tensor 'lm_head.weight' has shape ",
                         ShapeString(head.shape), " but ", config_path, " implies ",
                         ShapeString(w.embed_tokens.shape), " (tied to the embedding)"));
      }
      used.insert("lm_head.weight");
    }
    w.lm_head = w.embed_tokens;
  }

  // A tensor nobody reads means the config and the weights disagree (say, biases the config
  // does not enable): refuse rather than silently compute something else.
  for (const std::string& name : store.TensorNames()) {
    if (used.count(name) || IsIgnorableTensor(name)) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(store.FileOf(name), ": unexpected tensor '", name, "' that ", config_path,
                     " does not call for (", std::string(ArchitectureName(w.config.architecture)),
                     ", attention_bias=", BoolName(w.config.attention_bias),
                     ", qk_norm=", BoolName(w.config.qk_norm),
                     ", tie_word_embeddings=", BoolName(w.config.tie_word_embeddings), ")"));
  }
  return w;
}

}  // namespace tandem
