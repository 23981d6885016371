// KV cache dtypes on the cpu backend: what bf16 and fp8 E4M3 pools hold (the f32 values rounded
// once), how attention reads them (exactly as their widened f32 values), and the fp8 scales
// (powers of two, the same whatever the thread count or block size).
#include "common/kv/kv_dtype.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "common/backend/cpu_backend.h"
#include "common/backend/kv_row_ops.h"
#include "common/backend/paged_attention.h"
#include "common/backend/simd.h"
#include "common/util/fp8.h"
#include "common/util/half.h"
#include "gtest/gtest.h"
#include "tests/common/backend/backend_harness.h"
#include "tests/common/backend/test_model.h"

namespace tandem::testing {
namespace {

std::unique_ptr<CpuBackend> MakeKvBackend(const ModelWeights& weights, DType dtype, int num_blocks,
                                          int block_size = 4, int threads = 2) {
  CpuBackendOptions options;
  options.num_threads = threads;
  options.block_size = block_size;
  options.num_kv_blocks = num_blocks;
  options.max_batch_tokens = 16;
  options.kv_dtype = dtype;
  auto backend = CpuBackend::Create(weights, options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(backend).value() : nullptr;
}

std::vector<uint8_t> FiniteFp8Codes() {
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) != 0x7f) codes.push_back(static_cast<uint8_t>(c));
  }
  return codes;
}

TEST(KvRowOpsTest, WidensEveryFiniteFp8CodeToItsValue) {
  const std::vector<uint8_t> codes = FiniteFp8Codes();  // 254: 31 vectors of 8 and a tail of 6
  std::vector<float> widened(codes.size(), 0.0f);
  kvrow::Axpy(1.0f, codes.data(), widened.data(), static_cast<int>(codes.size()));
  for (size_t i = 0; i < codes.size(); ++i) {
    EXPECT_EQ(widened[i], Fp8E4M3ToF32(codes[i])) << "code " << int{codes[i]};
  }
}

TEST(KvRowOpsTest, WidensBf16Exactly) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<uint16_t> row(43);
  for (uint16_t& v : row) v = F32ToBf16(dist(rng));
  std::vector<float> widened(row.size(), 0.0f);
  kvrow::Axpy(1.0f, row.data(), widened.data(), static_cast<int>(row.size()));
  for (size_t i = 0; i < row.size(); ++i) EXPECT_EQ(widened[i], Bf16ToF32(row[i])) << i;
}

TEST(KvRowOpsTest, DotOfAStoredRowIsTheDotOfItsF32Values) {
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int n : {8, 16, 37, 64, 128}) {
    std::vector<float> q(n), x(n);
    for (int i = 0; i < n; ++i) q[i] = dist(rng), x[i] = 20.0f * dist(rng);
    std::vector<uint16_t> bf16(n);
    std::vector<uint8_t> fp8(n);
    kvrow::Store(x.data(), n, bf16.data(), 1.0f);
    kvrow::Store(x.data(), n, fp8.data(), 0.5f);
    std::vector<float> bf16_values(n), fp8_values(n);
    for (int i = 0; i < n; ++i) {
      bf16_values[i] = Bf16ToF32(bf16[i]);
      fp8_values[i] = Fp8E4M3ToF32(fp8[i]);
      EXPECT_EQ(fp8[i], F32ToFp8E4M3(x[i] * 0.5f));
    }
    EXPECT_EQ(kvrow::Dot(q.data(), bf16.data(), n), simd::Dot(q.data(), bf16_values.data(), n));
    EXPECT_EQ(kvrow::Dot(q.data(), fp8.data(), n), simd::Dot(q.data(), fp8_values.data(), n));
    EXPECT_EQ(kvrow::Dot(q.data(), x.data(), n), simd::Dot(q.data(), x.data(), n));
  }
}

// PagedAttention over a bf16 or fp8 pool gives, bit for bit, what it gives over an f32 pool
// holding the stored values times their scales (powers of two, as the calibration picks).
TEST(PagedAttentionKvDTypeTest, ReadsAStoredPoolAsItsScaledValues) {
  for (DType dtype : {DType::kBF16, DType::kFP8E4M3}) {
    KvLayout layout;
    layout.dtype = dtype;
    layout.num_layers = 2;
    layout.num_kv_heads = 2;
    layout.head_dim = 24;
    layout.block_size = 4;
    layout.num_blocks = 7;
    KvLayout f32_layout = layout;
    f32_layout.dtype = DType::kF32;
    const size_t n = static_cast<size_t>(layout.total_elements());
    const KvHeadScales scales =
        dtype == DType::kFP8E4M3 ? KvHeadScales{0.25f, 4.0f} : KvHeadScales{};
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<uint16_t> bf16(n);
    std::vector<uint8_t> fp8(n);
    std::vector<float> values(n);
    const std::vector<uint8_t> codes = FiniteFp8Codes();
    for (int l = 0; l < layout.num_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const int64_t begin = layout.Offset(l, kv, 0, 0, 0);
        for (int64_t i = begin; i < begin + layout.kv_stride(); ++i) {
          if (dtype == DType::kBF16) {
            bf16[i] = F32ToBf16(dist(rng));
            values[i] = Bf16ToF32(bf16[i]);
          } else {
            fp8[i] = codes[rng() % codes.size()];
            values[i] = Fp8E4M3ToF32(fp8[i]) * (kv == 0 ? scales.k : scales.v);
          }
        }
      }
    }
    const void* pool = dtype == DType::kBF16 ? static_cast<const void*>(bf16.data())
                                             : static_cast<const void*>(fp8.data());
    const std::vector<int32_t> table = {5, 2, 6, 0, 3};
    // One query head per KV head reads the stored rows directly; two read them widened once.
    for (int group : {1, 2}) {
      std::vector<float> q(group * layout.head_dim);
      for (float& v : q) v = 0.2f * dist(rng);
      for (int window : {0, 7}) {
        for (int position : {0, 3, 9, 17}) {
          AttentionQuery query{.q = q.data(),
                               .group = group,
                               .kv_head = 1,
                               .position = position,
                               .block_table = table};
          std::vector<float> scores(group * (position + 1)), got(q.size()), want(q.size());
          PagedAttention(layout, pool, 1, query, window, 0.2f, scores.data(), got.data(), scales);
          PagedAttention(f32_layout, values.data(), 1, query, window, 0.2f, scores.data(),
                         want.data());
          EXPECT_EQ(got, want) << KvDTypeName(dtype) << " group " << group << " position "
                               << position << " window " << window;
        }
      }
    }
  }
}

class KvDTypeModelTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    model_ = std::make_unique<TestModel>(GetParam().config, GetParam().dtype, 31);
  }
  std::unique_ptr<TestModel> model_;
};

// Layer 0's K/V depend on the embeddings only, so every dtype computes the same f32 values there
// and must store them rounded once: bf16 to nearest even, fp8 as E4M3(value / scale).
TEST_P(KvDTypeModelTest, FirstLayerHoldsTheF32KvRoundedOnce) {
  const std::vector<TokenId> tokens = RandomTokens(23, model_->config().vocab_size, 8);
  auto reference = MakeKvBackend(model_->weights(), DType::kF32, 8);
  ASSERT_NE(reference, nullptr);
  Sequence ref_seq{tokens, {3, 1, 4, 0, 7, 5}};
  ASSERT_TRUE(RunForward(*reference, {ref_seq.Next(23, true)}).ok());
  const float* f32 = reference->kv_pool().data();
  for (DType dtype : {DType::kBF16, DType::kFP8E4M3}) {
    auto backend = MakeKvBackend(model_->weights(), dtype, 8);
    ASSERT_NE(backend, nullptr);
    Sequence seq{tokens, {3, 1, 4, 0, 7, 5}};
    ASSERT_TRUE(RunForward(*backend, {seq.Next(23, true)}).ok());
    const KvLayout& layout = backend->kv_layout();
    const uint8_t* bytes = backend->kv_pool_bytes().data();
    int64_t checked = 0;
    for (int kv = 0; kv < 2; ++kv) {
      for (int pos = 0; pos < 23; ++pos) {
        for (int h = 0; h < layout.num_kv_heads; ++h) {
          const int64_t at = layout.Offset(0, kv, seq.blocks[pos / 4], h, pos % 4);
          for (int i = 0; i < layout.head_dim; ++i, ++checked) {
            const float x = f32[at + i];
            if (dtype == DType::kBF16) {
              uint16_t stored;
              std::memcpy(&stored, bytes + 2 * (at + i), 2);
              ASSERT_EQ(stored, F32ToBf16(x)) << "kv " << kv << " pos " << pos << " head " << h;
            } else {
              const float inv = 1.0f / backend->kv_scales().at(0, kv, h);
              ASSERT_EQ(bytes[at + i], F32ToFp8E4M3(x * inv))
                  << "kv " << kv << " pos " << pos << " head " << h;
            }
          }
        }
      }
    }
    EXPECT_EQ(checked, int64_t{2} * 23 * layout.num_kv_heads * layout.head_dim);
  }
}

TEST_P(KvDTypeModelTest, Fp8ScalesArePowersOfTwoWhateverTheThreadsOrBlockSize) {
  auto a = MakeKvBackend(model_->weights(), DType::kFP8E4M3, 8, /*block_size=*/4, /*threads=*/1);
  auto b = MakeKvBackend(model_->weights(), DType::kFP8E4M3, 3, /*block_size=*/16, /*threads=*/2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const KvScales& scales = a->kv_scales();
  const ModelConfig& config = model_->config();
  ASSERT_EQ(scales.values.size(), static_cast<size_t>(config.num_layers) * 2 * config.num_kv_heads);
  for (float s : scales.values) {
    int e;
    EXPECT_EQ(std::frexp(s, &e), 0.5f) << s << " is not a power of two";
  }
  EXPECT_EQ(scales.values, b->kv_scales().values);
  EXPECT_NE(a->kv_layout().scale_fingerprint, 0u);
  EXPECT_EQ(a->kv_layout().scale_fingerprint, b->kv_layout().scale_fingerprint);
  EXPECT_EQ(a->kv_layout().scale_fingerprint, KvScalesFingerprint(scales));
  // Other dtypes have no scales.
  auto bf16 = MakeKvBackend(model_->weights(), DType::kBF16, 4);
  ASSERT_NE(bf16, nullptr);
  EXPECT_TRUE(bf16->kv_scales().empty());
  EXPECT_EQ(bf16->kv_layout().scale_fingerprint, 0u);
  EXPECT_TRUE(bf16->kv_pool().empty());  // the f32 view is for f32 pools only
  EXPECT_EQ(bf16->kv_pool_bytes().size(), bf16->kv_layout().total_bytes());
}

// The calibration leaves 4-8x headroom: a prompt's K/V never saturate at ±448.
TEST_P(KvDTypeModelTest, Fp8PromptsStayInsideTheCalibratedRange) {
  auto backend = MakeKvBackend(model_->weights(), DType::kFP8E4M3, 16);
  ASSERT_NE(backend, nullptr);
  Sequence seq{RandomTokens(60, model_->config().vocab_size, 9), {}};
  for (int b = 0; b < 15; ++b) seq.blocks.push_back(b);
  ASSERT_TRUE(RunForward(*backend, {seq.Next(60, true)}).ok());
  const KvLayout& layout = backend->kv_layout();
  int saturated = 0, nonzero = 0;
  for (uint8_t code : backend->kv_pool_bytes().subspan(0, layout.total_bytes())) {
    saturated += (code & 0x7f) == 0x7e;
    nonzero += (code & 0x7f) != 0;
  }
  EXPECT_EQ(saturated, 0);
  EXPECT_GT(nonzero, 0);
}

// A prefill chunk reads its KV widened once per layer (WidenChunkKv), a decode step reads the
// pool row by row: the same values either way, so chunking changes no logit and no stored byte.
TEST_P(KvDTypeModelTest, ChunkedPrefillIsBitIdenticalToOneShot) {
  const std::vector<TokenId> tokens = RandomTokens(23, model_->config().vocab_size, 12);
  for (DType dtype : {DType::kBF16, DType::kFP8E4M3}) {
    auto one_shot = MakeKvBackend(model_->weights(), dtype, 8);
    ASSERT_NE(one_shot, nullptr);
    Sequence whole{tokens, {6, 2, 7, 0, 3, 5}};
    auto expected = RunForward(*one_shot, {whole.Next(23, true)});
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (const std::vector<int>& chunks :
         {std::vector<int>{1, 3, 7, 12}, std::vector<int>(23, 1), std::vector<int>{16, 7}}) {
      auto backend = MakeKvBackend(model_->weights(), dtype, 8);
      ASSERT_NE(backend, nullptr);
      Sequence seq{tokens, {6, 2, 7, 0, 3, 5}};
      std::vector<float> last;
      for (size_t c = 0; c < chunks.size(); ++c) {
        auto logits = RunForward(*backend, {seq.Next(chunks[c], c + 1 == chunks.size())});
        ASSERT_TRUE(logits.ok()) << logits.status();
        if (c + 1 == chunks.size()) last = *logits;
      }
      EXPECT_EQ(last, *expected) << KvDTypeName(dtype) << " in chunks of "
                                 << ::testing::PrintToString(chunks);
      const auto a = backend->kv_pool_bytes();
      const auto b = one_shot->kv_pool_bytes();
      EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << KvDTypeName(dtype);
    }
  }
}

TEST_P(KvDTypeModelTest, CopyBlockCopiesEveryDType) {
  for (DType dtype : {DType::kBF16, DType::kFP8E4M3}) {
    auto backend = MakeKvBackend(model_->weights(), dtype, 8);
    ASSERT_NE(backend, nullptr);
    Sequence seq{RandomTokens(8, model_->config().vocab_size, 10), {0, 1}};
    ASSERT_TRUE(RunForward(*backend, {seq.Next(8, true)}).ok());
    ASSERT_TRUE(backend->CopyBlock(1, 5).ok());
    const KvLayout& layout = backend->kv_layout();
    const size_t elem = DTypeSize(dtype);
    const uint8_t* pool = backend->kv_pool_bytes().data();
    for (int l = 0; l < layout.num_layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        EXPECT_TRUE(std::equal(pool + layout.Offset(l, kv, 1, 0, 0) * elem,
                               pool + layout.Offset(l, kv, 2, 0, 0) * elem,
                               pool + layout.Offset(l, kv, 5, 0, 0) * elem));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, KvDTypeModelTest, ::testing::ValuesIn(AllModelCases()),
                         [](const auto& info) { return info.param.name; });

TEST(CpuBackendKvDTypeTest, RefusesF16AndSizesBlocksByTheDType) {
  TestModel model(TinyLlamaConfig(), DType::kF32, 1);
  CpuBackendOptions options;
  options.num_threads = 1;
  options.kv_dtype = DType::kF16;
  options.num_kv_blocks = 4;
  auto f16 = CpuBackend::Create(model.weights(), options);
  EXPECT_EQ(f16.status().code(), absl::StatusCode::kInvalidArgument);
  // One 16-token block: 2 layers * (K+V) * 4 heads * 16 slots * 16 dims = 4096 elements.
  options.num_kv_blocks = 0;
  options.kv_cache_bytes = 40 * 4096 + 100;
  for (auto [dtype, blocks] :
       {std::pair{DType::kF32, 10}, std::pair{DType::kBF16, 20}, std::pair{DType::kFP8E4M3, 40}}) {
    options.kv_dtype = dtype;
    auto backend = CpuBackend::Create(model.weights(), options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    EXPECT_EQ((*backend)->kv_layout().num_blocks, blocks) << KvDTypeName(dtype);
    EXPECT_EQ((*backend)->kv_layout().dtype, dtype);
  }
}

}  // namespace
}  // namespace tandem::testing
