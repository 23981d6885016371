// Bad batches and bad weights become InvalidArgument with a message, never a crash, and a
// rejected batch leaves the pool untouched.
#include "common/backend/batch_validation.h"

#include <algorithm>
#include <vector>

#include "common/backend/cpu_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/backend/backend_harness.h"
#include "tests/common/backend/test_model.h"

namespace tandem::testing {
namespace {

using ::testing::HasSubstr;

class ForwardValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::make_unique<TestModel>(TinyLlamaConfig(), DType::kF32, 1);
    backend_ = MakeBackend(model_->weights(), /*num_blocks=*/4, /*block_size=*/4);
    ASSERT_NE(backend_, nullptr);
  }

  absl::Status Run(const ForwardItem& item, size_t logits_floats = 97) {
    std::vector<float> logits(logits_floats);
    std::vector<ForwardItem> items = {item};
    return backend_->Forward(ForwardBatch{items}, LogitsOutput{logits});
  }

  void ExpectInvalid(const ForwardItem& item, const std::string& message,
                     size_t logits_floats = 97) {
    std::vector<float> before(backend_->kv_pool().begin(), backend_->kv_pool().end());
    absl::Status s = Run(item, logits_floats);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(message));
    EXPECT_TRUE(std::equal(before.begin(), before.end(), backend_->kv_pool().begin()));
  }

  std::unique_ptr<TestModel> model_;
  std::unique_ptr<CpuBackend> backend_;
  std::vector<TokenId> tokens_ = {1, 2, 3, 4, 5};
  std::vector<int32_t> blocks_ = {0, 1};
};

TEST_F(ForwardValidationTest, AcceptsAValidItem) {
  EXPECT_TRUE(Run({tokens_, 0, blocks_, true}).ok());
}

TEST_F(ForwardValidationTest, IgnoresBlockTableEntriesBeyondTheItem) {
  std::vector<int32_t> longer = {0, 1, -1, 99};  // entries past position 4 are never read
  EXPECT_TRUE(Run({tokens_, 0, longer, true}).ok());
}

TEST_F(ForwardValidationTest, RejectsTokensOutsideTheVocabulary) {
  std::vector<TokenId> bad = {1, 97, 3};
  ExpectInvalid({bad, 0, blocks_, true}, "outside the vocabulary");
  bad = {1, -1};
  ExpectInvalid({bad, 0, blocks_, true}, "outside the vocabulary");
}

TEST_F(ForwardValidationTest, RejectsAShortBlockTable) {
  std::vector<int32_t> one = {0};
  ExpectInvalid({tokens_, 0, one, true}, "block table has 1");
  ExpectInvalid({std::span<const TokenId>(tokens_).first(1), 4, one, true}, "needs 2 KV blocks");
}

TEST_F(ForwardValidationTest, RejectsBlockIdsOutsideThePool) {
  std::vector<int32_t> bad = {0, 4};
  ExpectInvalid({tokens_, 0, bad, true}, "outside the pool");
  bad = {-3, 1};
  ExpectInvalid({tokens_, 0, bad, true}, "outside the pool");
}

TEST_F(ForwardValidationTest, RejectsPositionsBeyondMaxPositionEmbeddings) {
  std::vector<int32_t> many(70, 0);  // 280 positions of table, all valid ids
  ExpectInvalid({tokens_, 253, many, true}, "max_position_embeddings 256");
  ExpectInvalid({tokens_, -1, blocks_, true}, "negative start_pos");
}

TEST_F(ForwardValidationTest, RejectsEmptyItems) {
  ExpectInvalid({std::span<const TokenId>(), 0, blocks_, true}, "no tokens");
}

TEST_F(ForwardValidationTest, RejectsLogitsThatDoNotFitTheOutput) {
  ExpectInvalid({tokens_, 0, blocks_, true}, "output holds 96", /*logits_floats=*/96);
  EXPECT_TRUE(Run({tokens_, 0, blocks_, false}, 0).ok());
}

TEST_F(ForwardValidationTest, RejectsLogitsRowsBeyondTheItemsTokens) {
  ExpectInvalid({tokens_, 0, blocks_, true, /*num_logits=*/6}, "asks for 6 logits rows of its 5",
                6 * 97);
  ExpectInvalid({tokens_, 0, blocks_, true, /*num_logits=*/0}, "asks for 0 logits rows");
  ExpectInvalid({tokens_, 0, blocks_, true, /*num_logits=*/3}, "wants 3 logits rows", 2 * 97);
}

// Speculative decoding's verification: an item's last rows' logits are, bit for bit, the ones
// each of those tokens gets as a one-token decode step.
TEST_F(ForwardValidationTest, SeveralLogitsRowsEqualOneDecodeStepEach) {
  std::vector<float> rows(3 * 97);
  {
    std::vector<ForwardItem> items = {{tokens_, 0, blocks_, true, /*num_logits=*/3}};
    ASSERT_TRUE(backend_->Forward(ForwardBatch{items}, LogitsOutput{rows}).ok());
  }
  auto fresh = MakeBackend(model_->weights(), /*num_blocks=*/4, /*block_size=*/4);
  std::vector<float> one(97);
  std::vector<ForwardItem> prefill = {
      {std::span<const TokenId>(tokens_).first(3), 0, blocks_, true}};
  ASSERT_TRUE(fresh->Forward(ForwardBatch{prefill}, LogitsOutput{one}).ok());
  EXPECT_TRUE(std::equal(one.begin(), one.end(), rows.begin()));
  for (int pos = 3; pos < 5; ++pos) {
    std::vector<ForwardItem> decode = {
        {std::span<const TokenId>(tokens_).subspan(pos, 1), pos, blocks_, true}};
    ASSERT_TRUE(fresh->Forward(ForwardBatch{decode}, LogitsOutput{one}).ok());
    EXPECT_TRUE(std::equal(one.begin(), one.end(), rows.begin() + (pos - 2) * 97))
        << "position " << pos;
  }
}

TEST_F(ForwardValidationTest, OneBadItemRejectsTheWholeBatch) {
  std::vector<TokenId> bad = {500};
  std::vector<ForwardItem> items = {{tokens_, 0, blocks_, true},
                                    {bad, 0, {blocks_.data() + 1, 1}, true}};
  std::vector<float> logits(2 * 97);
  absl::Status s = backend_->Forward(ForwardBatch{items}, LogitsOutput{logits});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("item 1"));
  for (float v : backend_->kv_pool()) ASSERT_EQ(v, 0.0f);
}

TEST(CreateValidationTest, RejectsWeightsThatDoNotMatchTheConfig) {
  TestModel model(TinyLlamaConfig(), DType::kF32, 1);
  CpuBackendOptions options;
  options.num_kv_blocks = 4;
  {
    ModelWeights w = model.weights();
    w.layers[1].k_proj.shape = {32, 64};
    auto b = CpuBackend::Create(w, options);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(b.status().message(), HasSubstr("model.layers.1.self_attn.k_proj.weight"));
  }
  {
    ModelWeights w = model.weights();
    w.layers[0].down_proj.data = nullptr;
    auto b = CpuBackend::Create(w, options);
    EXPECT_THAT(b.status().message(), HasSubstr("missing tensor model.layers.0.mlp.down_proj"));
  }
  {
    ModelWeights w = model.weights();
    w.norm.nbytes -= 4;
    auto b = CpuBackend::Create(w, options);
    EXPECT_THAT(b.status().message(), HasSubstr("model.norm.weight holds 252 bytes"));
  }
  {
    ModelWeights w = model.weights();
    w.config.attention_bias = true;  // the biases are missing
    auto b = CpuBackend::Create(w, options);
    EXPECT_THAT(b.status().message(), HasSubstr("q_proj.bias"));
  }
  {
    ModelConfig c = TinyLlamaConfig();
    c.attention_bias = true;
    TestModel biased(c, DType::kF32, 1);
    ModelWeights w = biased.weights();
    w.layers[0].o_bias = TensorView();  // Llama's attention_bias covers o_proj too
    auto b = CpuBackend::Create(w, options);
    EXPECT_THAT(b.status().message(),
                HasSubstr("missing tensor model.layers.0.self_attn.o_proj.bias"));
    w.config.architecture = Architecture::kQwen2;  // Qwen2 has no o_proj bias
    EXPECT_TRUE(CpuBackend::Create(w, options).ok());
  }
  {
    ModelWeights w = model.weights();
    w.config.num_kv_heads = 3;
    auto b = CpuBackend::Create(w, options);
    EXPECT_THAT(b.status().message(), HasSubstr("not a multiple"));
  }
  {
    ModelWeights w = model.weights();
    w.layers.pop_back();
    auto b = CpuBackend::Create(w, options);
    EXPECT_THAT(b.status().message(), HasSubstr("1 layers, config says 2"));
  }
}

TEST(CreateValidationTest, RejectsBadOptions) {
  TestModel model(TinyLlamaConfig(), DType::kF32, 1);
  CpuBackendOptions options;
  EXPECT_THAT(CpuBackend::Create(model.weights(), options).status().message(),
              HasSubstr("KV pool has no blocks"));
  options.num_kv_blocks = 4;
  options.block_size = 0;
  EXPECT_EQ(CpuBackend::Create(model.weights(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.block_size = 16;
  options.num_threads = -2;
  EXPECT_EQ(CpuBackend::Create(model.weights(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::testing
