// The random weights tandem-make-model writes must give peaked next-token distributions that
// still depend on the context: otherwise greedy outputs of two correct implementations diverge on
// rounding noise (flat logits), or KV-cache bugs go unnoticed (outputs that ignore the context).
// Measured with the test-only reference forward over real vocabulary sizes.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/model/model_weights.h"
#include "gtest/gtest.h"
#include "tests/common/model/reference_forward.h"
#include "tests/common/model/test_model_dir.h"
#include "tests/tools/make_model/fake_tokenizer.h"
#include "tools/make_model/make_model.h"
#include "tools/make_model/random_weights.h"

namespace tandem {
namespace {

using testing::Argmax;
using testing::Median;
using testing::ReferenceModel;
using testing::TopMargins;

constexpr int kLlama3Vocab = 128256;
constexpr int kQwenVocab = 151669;

ModelConfig ConfigFor(const std::string& arch, const std::string& preset, int vocab) {
  TokenizerInfo tok;
  tok.vocab_size = vocab;
  tok.bos_token_id = 0;
  tok.eos_token_id = 1;
  MakeModelOptions o;
  o.arch = arch;
  o.preset = preset;
  absl::StatusOr<ModelConfig> c = BuildModelConfig(o, tok);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

ReferenceModel InMemoryModel(const ModelConfig& c, uint64_t seed, const WeightScales& scales = {}) {
  std::map<std::string, std::vector<float>> tensors;
  for (GeneratedTensor& g : GenerateRandomWeights(c, seed, scales)) {
    tensors[g.name] = std::move(g.values);
  }
  return ReferenceModel(c, std::move(tensors));
}

std::vector<TokenId> RandomTokens(int n, int vocab, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<TokenId> out(n);
  for (TokenId& t : out) t = static_cast<TokenId>(rng.Next() % vocab);
  return out;
}

struct Stats {
  float median_margin = 0;
  float frac_above_half = 0;  // margins > 0.5
  float frac_self = 0;        // argmax == the input token at that position
  float frac_context = 0;     // argmax at positions >= 1 that change when token 0 changes
};

Stats Measure(const ReferenceModel& m, const std::vector<TokenId>& tokens) {
  const int vocab = m.config().vocab_size, n = static_cast<int>(tokens.size());
  std::vector<float> logits = m.Forward(tokens);
  std::vector<float> margins = TopMargins(logits, vocab);
  std::vector<int> top = Argmax(logits, vocab);
  std::vector<TokenId> changed = tokens;
  changed[0] = (changed[0] + 1) % vocab;
  std::vector<int> top2 = Argmax(m.Forward(changed), vocab);
  Stats s;
  s.median_margin = Median(margins);
  for (int i = 0; i < n; ++i) {
    s.frac_above_half += margins[i] > 0.5f;
    s.frac_self += top[i] == tokens[i];
    if (i > 0) s.frac_context += top[i] != top2[i];
  }
  s.frac_above_half /= n;
  s.frac_self /= n;
  s.frac_context /= n - 1;
  return s;
}

void ExpectPeakedAndContextual(const Stats& s, const std::string& label) {
  std::printf(
      "%-22s median margin %.2f, >0.5: %.0f%%, self-repeat %.0f%%, context-dependent %.0f%%\n",
      label.c_str(), s.median_margin, 100 * s.frac_above_half, 100 * s.frac_self,
      100 * s.frac_context);
  EXPECT_GT(s.median_margin, 1.0f) << label;
  EXPECT_GE(s.frac_above_half, 0.65f) << label;
  EXPECT_LE(s.frac_self, 0.15f) << label;
  EXPECT_GE(s.frac_context, 0.25f) << label;
}

class TinyMarginsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyMarginsTest, PeakedAndContextual) {
  const std::string arch = GetParam();
  const int vocab = arch.rfind("qwen", 0) == 0 ? kQwenVocab : kLlama3Vocab;
  ModelConfig c = ConfigFor(arch, "tiny", vocab);
  ReferenceModel m = InMemoryModel(c, /*seed=*/0);
  ExpectPeakedAndContextual(Measure(m, RandomTokens(48, vocab, 11)), arch + " tiny");
}

INSTANTIATE_TEST_SUITE_P(Archs, TinyMarginsTest,
                         ::testing::Values("llama", "llama3.1", "llama3.2", "mistral", "qwen2",
                                           "qwen3"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '.') ch = '_';
                           }
                           return n;
                         });

TEST(MarginsTest, SmallPreset) {
  for (const char* arch : {"llama", "llama3.2", "qwen3"}) {
    const int vocab = std::string(arch) == "qwen3" ? kQwenVocab : kLlama3Vocab;
    ReferenceModel m = InMemoryModel(ConfigFor(arch, "small", vocab), /*seed=*/0);
    ExpectPeakedAndContextual(Measure(m, RandomTokens(16, vocab, 5)), std::string(arch) + " small");
  }
}

TEST(MarginsTest, BiasesChangeTheOutput) {
  // A backend that forgot Qwen2's biases must produce different greedy tokens.
  ModelConfig c = ConfigFor("qwen2", "tiny", kQwenVocab);
  WeightScales no_bias;
  no_bias.bias_std = 0.0f;
  std::vector<TokenId> tokens = RandomTokens(32, kQwenVocab, 3);
  std::vector<int> with = Argmax(InMemoryModel(c, 0).Forward(tokens), kQwenVocab);
  std::vector<int> without = Argmax(InMemoryModel(c, 0, no_bias).Forward(tokens), kQwenVocab);
  int differ = 0;
  for (size_t i = 0; i < with.size(); ++i) differ += with[i] != without[i];
  EXPECT_GE(differ, 4) << "biases barely matter";
}

TEST(MarginsTest, WrittenBf16ModelStaysPeaked) {
  // Through the real path: tandem-make-model's output in bf16, loaded by LoadModelWeights.
  testing::ScopedTempDir dir;
  testing::WriteFakeTokenizer(dir.path());
  MakeModelOptions o;
  o.out_dir = dir.file("m");
  o.arch = "llama3.1";
  o.tokenizer_path = dir.file("tokenizer.json");
  o.vocab = kLlama3Vocab;
  o.dtype = DType::kBF16;
  ASSERT_TRUE(MakeModel(o).ok());
  absl::StatusOr<ModelWeights> w = LoadModelWeights(o.out_dir);
  ASSERT_TRUE(w.ok()) << w.status();
  ReferenceModel m = ReferenceModel::FromWeights(*w);
  ExpectPeakedAndContextual(Measure(m, RandomTokens(32, kLlama3Vocab, 9)), "llama3.1 tiny bf16");
}

}  // namespace
}  // namespace tandem
