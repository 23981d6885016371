// The CPU backend against the dense double-precision reference, for every model case: one-shot
// prefill, token-by-token decode, and chunked prefill (bit-identical to one-shot).
#include "common/backend/cpu_backend.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/backend/backend_harness.h"
#include "tests/common/backend/reference_forward.h"
#include "tests/common/backend/test_model.h"

namespace tandem::testing {
namespace {

constexpr double kTolerance = 1e-5;  // max |diff| / max(1, max |logit|)
constexpr int kPromptLength = 23;

class CpuBackendReferenceTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    model_ = std::make_unique<TestModel>(GetParam().config, GetParam().dtype, /*seed=*/7);
    prompt_ = RandomTokens(kPromptLength, GetParam().config.vocab_size, /*seed=*/11);
    reference_ = ReferenceLogits(model_->weights(), prompt_);
  }

  // A sequence over blocks 0..n (enough for the prompt), in order.
  Sequence NewSequence(int block_size) const {
    Sequence s;
    s.tokens = prompt_;
    const int blocks = (kPromptLength + block_size - 1) / block_size;
    for (int b = 0; b < blocks; ++b) s.blocks.push_back(b);
    return s;
  }

  std::unique_ptr<TestModel> model_;
  std::vector<TokenId> prompt_;
  std::vector<std::vector<double>> reference_;
};

TEST_P(CpuBackendReferenceTest, PrefillMatchesReference) {
  for (int block_size : {4, 16}) {
    auto backend = MakeBackend(model_->weights(), /*num_blocks=*/8, block_size);
    ASSERT_NE(backend, nullptr);
    Sequence seq = NewSequence(block_size);
    auto logits = RunForward(*backend, {seq.Next(kPromptLength, /*want_logits=*/true)});
    ASSERT_TRUE(logits.ok()) << logits.status();
    const double error = RelativeError(logits->data(), reference_.back());
    EXPECT_LT(error, kTolerance) << "block_size " << block_size;
    RecordProperty("relative_error_bs" + std::to_string(block_size), absl::StrCat(error));
  }
}

TEST_P(CpuBackendReferenceTest, DecodeStepsMatchReferenceAtEveryPosition) {
  auto backend = MakeBackend(model_->weights(), /*num_blocks=*/8);
  ASSERT_NE(backend, nullptr);
  Sequence seq = NewSequence(4);
  for (int p = 0; p < kPromptLength; ++p) {
    auto logits = RunForward(*backend, {seq.Next(1, /*want_logits=*/true)});
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_LT(RelativeError(logits->data(), reference_[p]), kTolerance) << "position " << p;
  }
}

TEST_P(CpuBackendReferenceTest, ChunkedPrefillIsBitIdenticalToOneShot) {
  auto one_shot = MakeBackend(model_->weights(), /*num_blocks=*/8);
  ASSERT_NE(one_shot, nullptr);
  Sequence whole = NewSequence(4);
  auto expected = RunForward(*one_shot, {whole.Next(kPromptLength, true)});
  ASSERT_TRUE(expected.ok()) << expected.status();

  for (const std::vector<int>& chunks :
       {std::vector<int>{1, 3, 7, 12}, std::vector<int>{5, 5, 5, 5, 3}, std::vector<int>(23, 1),
        std::vector<int>{4, 4, 15}, std::vector<int>{22, 1}}) {
    auto backend = MakeBackend(model_->weights(), /*num_blocks=*/8);
    ASSERT_NE(backend, nullptr);
    Sequence seq = NewSequence(4);
    std::vector<float> last;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const bool final_chunk = c + 1 == chunks.size();
      auto logits = RunForward(*backend, {seq.Next(chunks[c], final_chunk)});
      ASSERT_TRUE(logits.ok()) << logits.status();
      if (final_chunk) last = *logits;
    }
    ASSERT_EQ(seq.cached, kPromptLength);
    EXPECT_EQ(last, *expected) << "chunks of " << ::testing::PrintToString(chunks);
    // The cached K/V is the same too.
    const auto a = backend->kv_pool();
    const auto b = one_shot->kv_pool();
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CpuBackendReferenceTest, ::testing::ValuesIn(AllModelCases()),
                         [](const auto& info) { return info.param.name; });

TEST(CpuBackendTest, ReportsItsShape) {
  TestModel model(TinyLlamaConfig(), DType::kF32, 1);
  auto backend = MakeBackend(model.weights(), /*num_blocks=*/5, /*block_size=*/8, /*threads=*/1);
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name(), "cpu");
  EXPECT_EQ(backend->num_threads(), 1);
  const KvLayout& layout = backend->kv_layout();
  EXPECT_EQ(layout.dtype, DType::kF32);
  EXPECT_EQ(layout.num_layers, 2);
  EXPECT_EQ(layout.num_kv_heads, 4);
  EXPECT_EQ(layout.head_dim, 16);
  EXPECT_EQ(layout.block_size, 8);
  EXPECT_EQ(layout.num_blocks, 5);
  EXPECT_EQ(backend->kv_pool().size(), static_cast<size_t>(layout.total_elements()));
  EXPECT_EQ(backend->config().hidden_size, 64);
}

TEST(CpuBackendTest, KvBudgetInBytesPicksTheBlockCount) {
  TestModel model(TinyLlamaConfig(), DType::kF32, 1);
  CpuBackendOptions options;
  options.num_threads = 1;
  options.block_size = 16;
  // One block: 2 layers * (K+V) * 4 heads * 16 slots * 16 dims * 4 bytes = 16 KiB.
  options.kv_cache_bytes = 10 * 16384 + 100;
  auto backend = CpuBackend::Create(model.weights(), options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->kv_layout().num_blocks, 10);
}

TEST(CpuBackendTest, EmptyBatchIsANoOp) {
  TestModel model(TinyLlamaConfig(), DType::kF32, 1);
  auto backend = MakeBackend(model.weights(), 4);
  ASSERT_NE(backend, nullptr);
  auto logits = RunForward(*backend, {});
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_TRUE(logits->empty());
}

TEST(CpuBackendTest, GrowsScratchForLongerContextsAndBiggerBatches) {
  ModelConfig config = TinyLlamaConfig();
  config.max_position_embeddings = 0;  // unset: no position limit, attention scratch starts tiny
  TestModel model(config, DType::kF32, 2);
  const std::vector<TokenId> prompt = RandomTokens(70, 97, 6);
  const auto reference = ReferenceLogits(model.weights(), prompt);
  auto backend = MakeBackend(model.weights(), 20);  // max_batch_tokens 16
  ASSERT_NE(backend, nullptr);
  Sequence seq{prompt, std::vector<int32_t>(18)};
  for (int b = 0; b < 18; ++b) seq.blocks[b] = 17 - b;
  auto first = RunForward(*backend, {seq.Next(5, true)});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_LT(RelativeError(first->data(), reference[4]), kTolerance);
  auto rest = RunForward(*backend, {seq.Next(65, true)});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_LT(RelativeError(rest->data(), reference[69]), kTolerance);
}

TEST(CpuBackendTest, WeightsMayBeReleasedAfterCreate) {
  auto model = std::make_unique<TestModel>(TinyLlamaConfig(), DType::kBF16, 3);
  const std::vector<TokenId> prompt = RandomTokens(9, 97, 5);
  const auto reference = ReferenceLogits(model->weights(), prompt);
  auto backend = MakeBackend(model->weights(), 4);
  ASSERT_NE(backend, nullptr);
  model.reset();
  Sequence seq{prompt, {0, 1, 2}};
  auto logits = RunForward(*backend, {seq.Next(9, true)});
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_LT(RelativeError(logits->data(), reference.back()), kTolerance);
}

}  // namespace
}  // namespace tandem::testing
