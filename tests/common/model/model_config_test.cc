#include "common/model/model_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/model/test_model_dir.h"

namespace tandem {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// Abridged copies of the published config.json files.
constexpr char kLlama31_8B[] = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})";

constexpr char kLlama32_1B[] = R"({
  "architectures": ["LlamaForCausalLM"], "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "intermediate_size": 8192, "max_position_embeddings": 131072,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "vocab_size": 128256})";

constexpr char kMistral7B[] = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "vocab_size": 32768})";

constexpr char kQwen25_05B[] = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 131072, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

constexpr char kQwen3_06B[] = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

ModelConfig MustParse(const std::string& text) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig(text, "/m/config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

// Parses `base` with `edit` applied; returns the error message ("" when it parses).
std::string ErrorAfterEdit(const char* base, const std::function<void(json&)>& edit) {
  json j = json::parse(base);
  edit(j);
  absl::StatusOr<ModelConfig> c = ParseModelConfig(j.dump(), "/m/config.json");
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(ModelConfigTest, Llama31) {
  ModelConfig c = MustParse(kLlama31_8B);
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 32);
  EXPECT_EQ(c.num_heads, 32);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // hidden / heads
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_EQ(c.NumParameters(), 8030261248);  // Meta-Llama-3.1-8B
}

TEST(ModelConfigTest, Llama32TiedWithExplicitHeadDim) {
  ModelConfig c = MustParse(kLlama32_1B);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_EQ(c.NumParameters(), 1235814400);  // Llama-3.2-1B, LM head counted once
}

TEST(ModelConfigTest, MistralSlidingWindowNullOrSet) {
  ModelConfig c = MustParse(kMistral7B);
  EXPECT_EQ(c.architecture, Architecture::kMistral);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});
  EXPECT_FALSE(c.attention_bias);
  json j = json::parse(kMistral7B);
  j["sliding_window"] = 4096;  // Mistral-7B-v0.1
  EXPECT_EQ(MustParse(j.dump()).sliding_window, 4096);
}

TEST(ModelConfigTest, Qwen2HasImplicitBiasesAndIgnoresDisabledWindow) {
  ModelConfig c = MustParse(kQwen25_05B);
  EXPECT_EQ(c.architecture, Architecture::kQwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.sliding_window, 0);  // use_sliding_window: false
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_EQ(c.NumParameters(), 494032768);  // Qwen2.5-0.5B
}

TEST(ModelConfigTest, Qwen2SlidingWindowOnAllLayersOrSomeLayers) {
  json j = json::parse(kQwen25_05B);
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 0;
  j["sliding_window"] = 4096;
  EXPECT_EQ(MustParse(j.dump()).sliding_window, 4096);
  j["max_window_layers"] = 24;  // no layer slides
  EXPECT_EQ(MustParse(j.dump()).sliding_window, 0);
  j["max_window_layers"] = 21;
  absl::StatusOr<ModelConfig> c = ParseModelConfig(j.dump(), "/m/config.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr("/m/config.json"), HasSubstr("max_window_layers")));
}

TEST(ModelConfigTest, Qwen3HasImplicitQkNorm) {
  ModelConfig c = MustParse(kQwen3_06B);
  EXPECT_EQ(c.architecture, Architecture::kQwen3);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_size(), 2048);  // != hidden_size
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(c.NumParameters(), 596049920);  // Qwen3-0.6B
}

TEST(ModelConfigTest, LlamaOptionalAttentionBias) {
  json j = json::parse(kLlama31_8B);
  j["attention_bias"] = true;
  ModelConfig c = MustParse(j.dump());
  EXPECT_TRUE(c.attention_bias);
  // q/k/v biases plus the o_proj bias, per layer.
  EXPECT_EQ(c.NumParameters(), 8030261248 + 32 * (4096 + 2 * 1024 + 4096));
}

TEST(ModelConfigTest, Defaults) {
  json j = json::parse(kMistral7B);
  j.erase("num_key_value_heads");
  j.erase("rms_norm_eps");
  j.erase("rope_theta");
  j.erase("eos_token_id");
  j.erase("bos_token_id");
  j.erase("torch_dtype");
  ModelConfig c = MustParse(j.dump());
  EXPECT_EQ(c.num_kv_heads, 32);  // = num_attention_heads
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_EQ(c.dtype, DType::kF32);
}

TEST(ModelConfigTest, RopeScalingVariants) {
  auto parse_with = [](json rs) {
    json j = json::parse(kLlama31_8B);
    j["rope_scaling"] = rs;
    return ParseModelConfig(j.dump(), "/m/config.json");
  };
  EXPECT_EQ(parse_with(nullptr)->rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_EQ(parse_with({{"rope_type", "default"}})->rope_scaling.type, RopeScaling::Type::kNone);
  absl::StatusOr<ModelConfig> linear = parse_with({{"type", "linear"}, {"factor", 2.0}});
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_EQ(linear->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(linear->rope_scaling.factor, 2.0f);
  // Older Llama 3.1 exports spell it "type".
  absl::StatusOr<ModelConfig> llama3 = parse_with({{"type", "llama3"},
                                                   {"factor", 8.0},
                                                   {"low_freq_factor", 1.0},
                                                   {"high_freq_factor", 4.0},
                                                   {"original_max_position_embeddings", 8192}});
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ(llama3->rope_scaling.type, RopeScaling::Type::kLlama3);

  for (const char* type : {"yarn", "dynamic", "longrope", "su", "mrope"}) {
    absl::StatusOr<ModelConfig> c = parse_with({{"rope_type", type}, {"factor", 4.0}});
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnimplemented) << type;
    EXPECT_THAT(c.status().message(),
                AllOf(HasSubstr("/m/config.json"), HasSubstr("unsupported rope scaling type"),
                      HasSubstr(type)));
  }
  absl::StatusOr<ModelConfig> missing = parse_with({{"rope_type", "llama3"}, {"factor", 8.0}});
  EXPECT_THAT(missing.status().message(),
              AllOf(HasSubstr("/m/config.json"), HasSubstr("rope_scaling.low_freq_factor")));
}

TEST(ModelConfigTest, RopeParametersOfNewerTransformers) {
  json j = json::parse(kMistral7B);
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  ModelConfig c = MustParse(j.dump());
  EXPECT_FLOAT_EQ(c.rope_theta, 1000000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
}

TEST(ModelConfigTest, UnsupportedArchitecture) {
  std::string err =
      ErrorAfterEdit(kLlama31_8B, [](json& j) { j["architectures"] = {"GPT2LMHeadModel"}; });
  EXPECT_THAT(err, AllOf(HasSubstr("/m/config.json"), HasSubstr("unsupported architecture"),
                         HasSubstr("GPT2LMHeadModel")));
}

TEST(ModelConfigTest, ArchitectureFromModelTypeWhenListMissing) {
  json j = json::parse(kQwen3_06B);
  j.erase("architectures");
  EXPECT_EQ(MustParse(j.dump()).architecture, Architecture::kQwen3);
  j.erase("model_type");
  absl::StatusOr<ModelConfig> c = ParseModelConfig(j.dump(), "/m/config.json");
  EXPECT_THAT(c.status().message(), AllOf(HasSubstr("/m/config.json"), HasSubstr("architectures")));
}

TEST(ModelConfigTest, MissingRequiredFieldsNameFieldAndFile) {
  for (const char* field : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads"}) {
    std::string err = ErrorAfterEdit(kLlama31_8B, [&](json& j) { j.erase(field); });
    EXPECT_THAT(err, AllOf(HasSubstr("/m/config.json"), HasSubstr(field), HasSubstr("missing")))
        << field;
  }
}

TEST(ModelConfigTest, RejectsInvalidValues) {
  struct Case {
    const char* field;
    json value;
    const char* expect;
  };
  const Case cases[] = {
      {"hidden_size", 0, "must be positive"},
      {"hidden_size", "4096", "must be an integer"},
      {"num_hidden_layers", -1, "must be positive"},
      {"num_key_value_heads", 5, "must divide num_attention_heads"},
      {"head_dim", 7, "must be even"},
      {"hidden_act", "gelu", "not supported"},
      {"torch_dtype", "float64", "not supported"},
      {"eos_token_id", "x", "integer or a list"},
      {"eos_token_id", 999999, "outside the vocabulary"},
      {"tie_word_embeddings", "yes", "true or false"},
      {"rms_norm_eps", "small", "must be a number"},
      {"mlp_bias", true, "not supported"},
  };
  for (const Case& k : cases) {
    std::string err = ErrorAfterEdit(kLlama31_8B, [&](json& j) { j[k.field] = k.value; });
    EXPECT_THAT(err, AllOf(HasSubstr("/m/config.json"), HasSubstr(k.field), HasSubstr(k.expect)))
        << k.field << " = " << k.value.dump();
  }
  std::string err = ErrorAfterEdit(kLlama31_8B, [](json& j) {
    j["quantization_config"] = {{"quant_method", "gptq"}};
  });
  EXPECT_THAT(err, HasSubstr("quantization_config"));
  err = ErrorAfterEdit(kLlama31_8B, [](json& j) { j["num_attention_heads"] = 30; });
  EXPECT_THAT(err, HasSubstr("not divisible"));  // 4096 % 30, no head_dim
}

TEST(ModelConfigTest, NotJson) {
  absl::StatusOr<ModelConfig> c = ParseModelConfig("{\"vocab_size\": ", "/m/config.json");
  EXPECT_THAT(c.status().message(), AllOf(HasSubstr("/m/config.json"), HasSubstr("JSON")));
}

TEST(ModelConfigTest, LoadModelConfigNamesMissingFile) {
  testing::ScopedTempDir dir;
  absl::StatusOr<ModelConfig> c = LoadModelConfig(dir.path());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr(dir.file("config.json")));
}

TEST(ModelConfigTest, ToJsonRoundTripsEveryArchitecture) {
  for (const char* text : {kLlama31_8B, kLlama32_1B, kMistral7B, kQwen25_05B, kQwen3_06B}) {
    ModelConfig c = MustParse(text);
    std::string written = ModelConfigToJson(c);
    ModelConfig back = MustParse(written);
    EXPECT_EQ(back.architecture, c.architecture);
    EXPECT_EQ(back.NumParameters(), c.NumParameters());
    EXPECT_EQ(back.head_dim, c.head_dim);
    EXPECT_EQ(back.rope_scaling.type, c.rope_scaling.type);
    EXPECT_EQ(back.rope_scaling.factor, c.rope_scaling.factor);
    EXPECT_EQ(back.rope_theta, c.rope_theta);
    EXPECT_EQ(back.rms_norm_eps, c.rms_norm_eps);
    EXPECT_EQ(back.tie_word_embeddings, c.tie_word_embeddings);
    EXPECT_EQ(back.attention_bias, c.attention_bias);
    EXPECT_EQ(back.qk_norm, c.qk_norm);
    EXPECT_EQ(back.sliding_window, c.sliding_window);
    EXPECT_EQ(back.eos_token_ids, c.eos_token_ids);
    EXPECT_EQ(back.bos_token_id, c.bos_token_id);
    EXPECT_EQ(back.dtype, c.dtype);
    EXPECT_EQ(back.max_position_embeddings, c.max_position_embeddings);
    // Short decimal spellings, as in published configs.
    EXPECT_THAT(written, HasSubstr("\"rms_norm_eps\": 1e-0"));
  }
}

TEST(ModelConfigTest, ArchitectureNames) {
  EXPECT_EQ(ArchitectureName(Architecture::kLlama), "LlamaForCausalLM");
  EXPECT_EQ(ArchitectureName(Architecture::kMistral), "MistralForCausalLM");
  EXPECT_EQ(ArchitectureName(Architecture::kQwen2), "Qwen2ForCausalLM");
  EXPECT_EQ(ArchitectureName(Architecture::kQwen3), "Qwen3ForCausalLM");
}

}  // namespace
}  // namespace tandem
