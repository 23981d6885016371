// The kernels' CPU references, chained exactly as the cuda backend chains the kernels
// (tests/kernels/reference_pass.h), against the f32 cpu backend on random-weight models of every
// architecture feature: logits within bf16 error, the same greedy tokens wherever the top choice is
// clear, and batching/chunking that does not change results.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/backend/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/common/backend/backend_harness.h"
#include "tests/common/backend/test_model.h"
#include "tests/kernels/reference_pass.h"

namespace tandem::kernels::testing {
namespace {

using ::tandem::testing::AllModelCases;
using ::tandem::testing::ModelCase;
using ::tandem::testing::RandomTokens;
using ::tandem::testing::TestModel;

constexpr int kBlockSize = 4;
constexpr int kBlocks = 48;
// bf16 activations against f32 ones: logits agree to this fraction of their largest magnitude.
constexpr double kLogitTolerance = 0.03;

std::vector<float> CpuForward(CpuBackend& cpu, const std::vector<ForwardItem>& items) {
  int rows = 0;
  for (const ForwardItem& item : items) rows += item.want_logits;
  std::vector<float> logits(static_cast<size_t>(rows) * cpu.config().vocab_size);
  const absl::Status status = cpu.Forward({items}, {logits});
  EXPECT_TRUE(status.ok()) << status;
  return logits;
}

double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 1, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    err = std::max(err, std::isnan(d) ? INFINITY : d);
  }
  return err / scale;
}

// The greedy token of `want`'s row when its margin over the runner-up exceeds `margin`, else -1.
int ClearArgmax(const float* row, int vocab, double margin) {
  const int best = static_cast<int>(std::max_element(row, row + vocab) - row);
  float second = -INFINITY;
  for (int j = 0; j < vocab; ++j) {
    if (j != best) second = std::max(second, row[j]);
  }
  return row[best] - second > margin ? best : -1;
}

int Argmax(const float* row, int vocab) {
  return static_cast<int>(std::max_element(row, row + vocab) - row);
}

class ModelReferenceTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelReferenceTest, PrefillAndGreedyDecodeMatchTheCpuBackend) {
  TestModel model(GetParam().config, DType::kBF16, 17);
  auto pass = ReferencePass::Create(model.weights(), kBlockSize, kBlocks);
  ASSERT_TRUE(pass.ok()) << pass.status();
  auto cpu = ::tandem::testing::MakeBackend(model.weights(), kBlocks, kBlockSize);
  const int vocab = model.config().vocab_size;
  std::vector<TokenId> tokens = RandomTokens(23, vocab, 5);
  std::vector<int32_t> blocks;
  for (int b = 0; b < 10; ++b) blocks.push_back(kBlocks - 1 - 4 * b);  // scattered, descending
  std::vector<float> want = CpuForward(*cpu, {{tokens, 0, blocks, true}});
  auto got = pass->Forward({std::vector<ForwardItem>{{tokens, 0, blocks, true}}});
  ASSERT_TRUE(got.ok()) << got.status();
  int compared = 0;
  for (int step = 0; step < 12; ++step) {
    const double err = RelativeError(*got, want);
    EXPECT_LT(err, kLogitTolerance) << "step " << step;
    double scale = 1;
    for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    const int clear = ClearArgmax(want.data(), vocab, 2 * kLogitTolerance * scale);
    if (clear >= 0) {
      EXPECT_EQ(Argmax(got->data(), vocab), clear) << "step " << step;
      ++compared;
    }
    tokens.push_back(Argmax(want.data(), vocab));  // both follow the cpu backend's tokens
    const ForwardItem next{std::span<const TokenId>(&tokens.back(), 1),
                           static_cast<int32_t>(tokens.size()) - 1, blocks, true};
    want = CpuForward(*cpu, {next});
    got = pass->Forward({std::vector<ForwardItem>{next}});
    ASSERT_TRUE(got.ok()) << got.status();
  }
  EXPECT_GT(compared, 3) << "too few steps with a clear greedy choice to compare";
}

TEST_P(ModelReferenceTest, MixedBatchEqualsItsItemsRunAlone) {
  TestModel model(GetParam().config, DType::kBF16, 29);
  const int vocab = model.config().vocab_size;
  auto together = ReferencePass::Create(model.weights(), kBlockSize, kBlocks);
  auto alone = ReferencePass::Create(model.weights(), kBlockSize, kBlocks);
  ASSERT_TRUE(together.ok() && alone.ok());
  const std::vector<TokenId> a = RandomTokens(13, vocab, 1);  // decoded one token at a time below
  const std::vector<TokenId> b = RandomTokens(9, vocab, 2);   // prefilled in the mixed batch
  const std::vector<int32_t> table_a = {0, 1, 2, 3};
  const std::vector<int32_t> table_b = {10, 11, 12};
  const std::span<const TokenId> sa(a);
  for (ReferencePass* p : {&*together, &*alone}) {
    ASSERT_TRUE(
        p->Forward({std::vector<ForwardItem>{{sa.subspan(0, 12), 0, table_a, false}}}).ok());
  }
  const ForwardItem decode{sa.subspan(12, 1), 12, table_a, true};
  const ForwardItem prefill{b, 0, table_b, true};
  auto mixed = together->Forward({std::vector<ForwardItem>{decode, prefill}});
  auto first = alone->Forward({std::vector<ForwardItem>{decode}});
  auto second = alone->Forward({std::vector<ForwardItem>{prefill}});
  ASSERT_TRUE(mixed.ok() && first.ok() && second.ok());
  std::vector<float> separate = *first;
  separate.insert(separate.end(), second->begin(), second->end());
  EXPECT_EQ(*mixed, separate);  // rows are computed independently: bit-equal
}

INSTANTIATE_TEST_SUITE_P(Models, ModelReferenceTest, ::testing::ValuesIn(AllModelCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tandem::kernels::testing
