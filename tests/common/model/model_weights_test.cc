#include "common/model/model_weights.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/model/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/model/test_model_dir.h"

namespace tandem {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MakeTensors;
using testing::OwnedTensor;
using testing::ScopedTempDir;
using testing::SmallConfig;
using testing::WriteFile;
using testing::WriteModelDir;

OwnedTensor* Find(std::vector<OwnedTensor>& tensors, const std::string& name) {
  for (OwnedTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void Remove(std::vector<OwnedTensor>& tensors, const std::string& name) {
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [&](const OwnedTensor& t) { return t.name == name; }),
                tensors.end());
}

void ExpectShape(const TensorView& t, std::vector<int64_t> shape) {
  EXPECT_TRUE(t.valid()) << t.name;
  EXPECT_EQ(t.shape, shape) << t.name;
}

TEST(ModelWeightsTest, ExpectedTensorNamesAreHuggingFaces) {
  ModelConfig c = SmallConfig(Architecture::kQwen2);
  c.num_layers = 1;
  std::vector<std::string> names;
  for (const TensorSpec& s : ExpectedTensors(c)) names.push_back(s.name);
  EXPECT_THAT(
      names, ElementsAre(
                 "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                 "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                 "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.q_proj.bias",
                 "model.layers.0.self_attn.k_proj.bias", "model.layers.0.self_attn.v_proj.bias",
                 "model.layers.0.self_attn.o_proj.weight",
                 "model.layers.0.post_attention_layernorm.weight",
                 "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                 "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"));
}

TEST(ModelWeightsTest, LoadsLlama) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kLlama);
  WriteModelDir(dir.path(), c, MakeTensors(c));
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->config.hidden_size, 32);
  ExpectShape(w->embed_tokens, {96, 32});
  ExpectShape(w->lm_head, {96, 32});
  EXPECT_NE(w->lm_head.data, w->embed_tokens.data);
  ExpectShape(w->norm, {32});
  ASSERT_EQ(w->layers.size(), 2u);
  const LayerWeights& l = w->layers[1];
  ExpectShape(l.input_layernorm, {32});
  ExpectShape(l.q_proj, {32, 32});  // 4 heads x 8
  ExpectShape(l.k_proj, {16, 32});  // 2 kv heads x 8
  ExpectShape(l.v_proj, {16, 32});
  ExpectShape(l.o_proj, {32, 32});
  ExpectShape(l.post_attention_layernorm, {32});
  ExpectShape(l.gate_proj, {48, 32});
  ExpectShape(l.up_proj, {48, 32});
  ExpectShape(l.down_proj, {32, 48});
  EXPECT_FALSE(l.q_bias.valid());
  EXPECT_FALSE(l.o_bias.valid());
  EXPECT_FALSE(l.q_norm.valid());
  EXPECT_EQ(l.q_proj.name, "model.layers.1.self_attn.q_proj.weight");
  // The views read the file's bytes.
  std::vector<float> v(32);
  ConvertToF32(l.input_layernorm, v.data());
  std::vector<OwnedTensor> expected = MakeTensors(c);
  std::vector<float> e(32);
  std::memcpy(e.data(), Find(expected, "model.layers.1.input_layernorm.weight")->bytes.data(), 128);
  EXPECT_EQ(v, e);
}

TEST(ModelWeightsTest, LoadsQwen2BiasesAndQwen3QkNorms) {
  {
    ScopedTempDir dir;
    ModelConfig c = SmallConfig(Architecture::kQwen2);
    WriteModelDir(dir.path(), c, MakeTensors(c));
    absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
    ASSERT_TRUE(w.ok()) << w.status();
    ExpectShape(w->layers[0].q_bias, {32});
    ExpectShape(w->layers[0].k_bias, {16});
    ExpectShape(w->layers[0].v_bias, {16});
    EXPECT_FALSE(w->layers[0].o_bias.valid());  // Qwen2's o_proj has no bias
  }
  {
    ScopedTempDir dir;
    ModelConfig c = SmallConfig(Architecture::kQwen3);
    c.head_dim = 16;  // q_size 64 != hidden 32, as in real Qwen3 models
    WriteModelDir(dir.path(), c, MakeTensors(c));
    absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
    ASSERT_TRUE(w.ok()) << w.status();
    ExpectShape(w->layers[0].q_norm, {16});
    ExpectShape(w->layers[0].k_norm, {16});
    ExpectShape(w->layers[0].q_proj, {64, 32});
    ExpectShape(w->layers[0].o_proj, {32, 64});
    EXPECT_FALSE(w->layers[0].q_bias.valid());
  }
}

TEST(ModelWeightsTest, LlamaAttentionBiasIncludesOProj) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kLlama);
  c.attention_bias = true;
  WriteModelDir(dir.path(), c, MakeTensors(c));
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  ASSERT_TRUE(w.ok()) << w.status();
  ExpectShape(w->layers[0].q_bias, {32});
  ExpectShape(w->layers[0].o_bias, {32});
}

TEST(ModelWeightsTest, TiedEmbeddingsWithAndWithoutLmHead) {
  ModelConfig c = SmallConfig(Architecture::kLlama);
  c.tie_word_embeddings = true;
  {
    ScopedTempDir dir;  // Llama 3.2: no lm_head.weight in the file
    WriteModelDir(dir.path(), c, MakeTensors(c));
    absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->lm_head.data, w->embed_tokens.data);
    ExpectShape(w->lm_head, {96, 32});
  }
  {
    ScopedTempDir dir;  // a tied checkpoint that still stores the head
    ModelConfig untied = c;
    untied.tie_word_embeddings = false;
    std::vector<OwnedTensor> tensors = MakeTensors(untied);
    WriteModelDir(dir.path(), c, tensors);
    absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
    ASSERT_TRUE(w.ok()) << w.status();
    ExpectShape(w->lm_head, {96, 32});
  }
}

TEST(ModelWeightsTest, ShardedLoadsAndIgnoresRotaryBuffers) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kMistral);
  std::vector<OwnedTensor> tensors = MakeTensors(c, DType::kBF16);
  tensors.push_back(
      {"model.layers.0.self_attn.rotary_emb.inv_freq", {4}, DType::kF32, std::vector<uint8_t>(16)});
  WriteModelDir(dir.path(), c, tensors, /*shards=*/3);
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->embed_tokens.dtype, DType::kBF16);
  EXPECT_EQ(w->store->Files().size(), 3u);
}

TEST(ModelWeightsTest, MissingConfig) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kLlama);
  WriteModelDir(dir.path(), c, MakeTensors(c));
  std::filesystem::remove(dir.file("config.json"));
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr(dir.file("config.json")));
}

TEST(ModelWeightsTest, MissingWeightsFile) {
  ScopedTempDir dir;
  WriteFile(dir.file("config.json"), ModelConfigToJson(SmallConfig(Architecture::kLlama)));
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), AllOf(HasSubstr(dir.path()), HasSubstr("model.safetensors")));
}

TEST(ModelWeightsTest, MissingTensorNamesTensorAndFile) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kQwen2);
  std::vector<OwnedTensor> tensors = MakeTensors(c);
  Remove(tensors, "model.layers.1.self_attn.k_proj.bias");
  WriteModelDir(dir.path(), c, tensors);
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(),
              AllOf(HasSubstr("'model.layers.1.self_attn.k_proj.bias'"),
                    HasSubstr(dir.file("model.safetensors")), HasSubstr("[16]")));
}

TEST(ModelWeightsTest, UntiedModelWithoutLmHead) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kLlama);
  std::vector<OwnedTensor> tensors = MakeTensors(c);
  Remove(tensors, "lm_head.weight");
  WriteModelDir(dir.path(), c, tensors);
  EXPECT_THAT(LoadModelWeights(dir.path()).status().message(),
              AllOf(HasSubstr("'lm_head.weight'"), HasSubstr(dir.file("model.safetensors"))));
}

TEST(ModelWeightsTest, WrongShapeNamesFileTensorAndBothShapes) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kLlama);
  std::vector<OwnedTensor> tensors = MakeTensors(c);
  OwnedTensor* t = Find(tensors, "model.layers.0.mlp.down_proj.weight");
  t->shape = {48, 32};  // transposed
  WriteModelDir(dir.path(), c, tensors, /*shards=*/2);
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(),
              AllOf(HasSubstr("model-0000"), HasSubstr("'model.layers.0.mlp.down_proj.weight'"),
                    HasSubstr("has shape [48, 32]"), HasSubstr("implies [32, 48]"),
                    HasSubstr("config.json")));
}

TEST(ModelWeightsTest, WrongDTypeNamesFileTensorAndDType) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kLlama);
  WriteFile(dir.file("config.json"), ModelConfigToJson(c));
  // A model file holding an I32 tensor (say, a quantized checkpoint).
  testing::WriteRawSafetensors(
      dir.file("model.safetensors"),
      R"({"model.embed_tokens.weight":{"dtype":"I32","shape":[96,32],"data_offsets":[0,12288]}})",
      std::string(12288, '\0'));
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  EXPECT_THAT(w.status().message(),
              AllOf(HasSubstr(dir.file("model.safetensors")),
                    HasSubstr("'model.embed_tokens.weight'"), HasSubstr("I32")));
}

TEST(ModelWeightsTest, UnexpectedTensorIsRefused) {
  ScopedTempDir dir;
  ModelConfig with_bias = SmallConfig(Architecture::kLlama);
  with_bias.attention_bias = true;
  // Weights with biases under a config that does not enable them.
  WriteModelDir(dir.path(), SmallConfig(Architecture::kLlama), MakeTensors(with_bias));
  absl::StatusOr<ModelWeights> w = LoadModelWeights(dir.path());
  EXPECT_THAT(w.status().message(),
              AllOf(HasSubstr(dir.file("model.safetensors")), HasSubstr("unexpected tensor"),
                    HasSubstr(".bias'"), HasSubstr("attention_bias=false")));
}

TEST(ModelWeightsTest, ConfigErrorsSurfaceThroughLoad) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kLlama);
  WriteModelDir(dir.path(), c, MakeTensors(c));
  nlohmann::json j = nlohmann::json::parse(ModelConfigToJson(c));
  j["architectures"] = {"FalconForCausalLM"};
  WriteFile(dir.file("config.json"), j.dump());
  EXPECT_THAT(LoadModelWeights(dir.path()).status().message(),
              AllOf(HasSubstr(dir.file("config.json")), HasSubstr("unsupported architecture"),
                    HasSubstr("FalconForCausalLM")));

  j = nlohmann::json::parse(ModelConfigToJson(c));
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  WriteFile(dir.file("config.json"), j.dump());
  EXPECT_THAT(LoadModelWeights(dir.path()).status().message(),
              AllOf(HasSubstr(dir.file("config.json")), HasSubstr("yarn")));

  WriteFile(dir.file("config.json"), "{not json");
  EXPECT_THAT(LoadModelWeights(dir.path()).status().message(),
              AllOf(HasSubstr(dir.file("config.json")), HasSubstr("JSON")));
}

TEST(ModelWeightsTest, CorruptWeightsHeader) {
  ScopedTempDir dir;
  ModelConfig c = SmallConfig(Architecture::kLlama);
  WriteFile(dir.file("config.json"), ModelConfigToJson(c));
  testing::WriteRawSafetensors(dir.file("model.safetensors"), "{\"model.embed", "");
  EXPECT_THAT(LoadModelWeights(dir.path()).status().message(),
              AllOf(HasSubstr(dir.file("model.safetensors")), HasSubstr("corrupt header")));
}

}  // namespace
}  // namespace tandem
