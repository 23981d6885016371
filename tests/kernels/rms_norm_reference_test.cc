#include "kernels/rms_norm_reference.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/backend/row_ops.h"
#include "gtest/gtest.h"

namespace tandem::kernels {
namespace {

// |got - want| within one bf16 rounding of want (the reference and the cpu backend sum the squares
// in different orders, so allow a hair more).
void ExpectBf16Near(Bf16Bits got, float want, const std::string& where) {
  const float g = Bf16ToFloat(got);
  EXPECT_LE(std::fabs(g - want), kBf16Epsilon * std::fabs(want) * 1.0001f + 1e-30f)
      << where << ": got " << g << " want " << want;
}

TEST(RmsNormResidualReferenceTest, HandComputedRow) {
  // x = (2, 2, 2, 2): mean square 4, rsqrt(4 + eps) ~ 0.5, so out ~ weight.
  std::vector<float> residual = {2, 2, 2, 2};
  const std::vector<Bf16Bits> weight = ToBf16(std::vector<float>{1, 0.5f, -2, 3});
  std::vector<Bf16Bits> out(4);
  RmsNormResidualReferenceArgs args;
  args.residual = residual.data();
  args.weight = weight.data();
  args.n = 1;
  args.hidden = 4;
  args.eps = 1e-6f;
  args.out = out.data();
  RmsNormResidualReference(args);
  EXPECT_EQ(FromBf16(out), (std::vector<float>{1, 0.5f, -2, 3}));
  EXPECT_EQ(residual, (std::vector<float>{2, 2, 2, 2}));  // no delta: residual untouched
}

TEST(RmsNormResidualReferenceTest, HandComputedResidualAdd) {
  // residual (1, -1) + (delta (1, 3) + bias (0.5, -0.5)) = (2.5, 1.5).
  std::vector<float> residual = {1, -1};
  const std::vector<Bf16Bits> delta = ToBf16(std::vector<float>{1, 3});
  const std::vector<Bf16Bits> bias = ToBf16(std::vector<float>{0.5f, -0.5f});
  const std::vector<Bf16Bits> weight = ToBf16(std::vector<float>{1, 1});
  std::vector<Bf16Bits> out(2);
  RmsNormResidualReferenceArgs args;
  args.residual = residual.data();
  args.delta = delta.data();
  args.delta_bias = bias.data();
  args.weight = weight.data();
  args.n = 1;
  args.hidden = 2;
  args.eps = 1e-6f;
  args.out = out.data();
  RmsNormResidualReference(args);
  EXPECT_EQ(residual, (std::vector<float>{2.5f, 1.5f}));
  // mean square (6.25 + 2.25) / 2 = 4.25.
  const float r = 1.0f / std::sqrt(4.25f + 1e-6f);
  EXPECT_EQ(out[0], FloatToBf16(2.5f * r));
  EXPECT_EQ(out[1], FloatToBf16(1.5f * r));
}

// The reference against the cpu backend's RmsNorm over the residual the reference produced.
void CheckAgainstCpuBackend(int n, int hidden, bool with_delta, bool with_bias, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " hidden=" << hidden << " delta=" << with_delta
                                    << " bias=" << with_bias);
  const std::vector<float> residual_in = RandomUniform(size_t(n) * hidden, -4, 4, seed);
  const std::vector<Bf16Bits> delta = ToBf16(RandomUniform(size_t(n) * hidden, -2, 2, seed + 1));
  const std::vector<Bf16Bits> bias = ToBf16(RandomUniform(hidden, -1, 1, seed + 2));
  const std::vector<Bf16Bits> weight = ToBf16(RandomUniform(hidden, -1.5f, 1.5f, seed + 3));
  const float eps = 1e-5f;

  std::vector<float> residual = residual_in;
  std::vector<Bf16Bits> out(size_t(n) * hidden);
  RmsNormResidualReferenceArgs args;
  args.residual = residual.data();
  args.delta = with_delta ? delta.data() : nullptr;
  args.delta_bias = with_bias ? bias.data() : nullptr;
  args.weight = weight.data();
  args.n = n;
  args.hidden = hidden;
  args.eps = eps;
  args.out = out.data();
  RmsNormResidualReference(args);

  const std::vector<float> weight_f32 = FromBf16(weight);
  std::vector<float> want_residual = residual_in;
  std::vector<float> normalized(hidden);
  for (int r = 0; r < n; ++r) {
    float* x = want_residual.data() + int64_t{r} * hidden;
    for (int i = 0; i < hidden && with_delta; ++i) {
      float add = Bf16ToFloat(delta[int64_t{r} * hidden + i]);
      if (with_bias) add += Bf16ToFloat(bias[i]);
      x[i] += add;
    }
    RmsNorm(x, weight_f32.data(), hidden, eps, normalized.data());
    for (int i = 0; i < hidden; ++i) {
      const int64_t at = int64_t{r} * hidden + i;
      ASSERT_EQ(residual[at], x[i]) << "residual " << r << "," << i;
      ExpectBf16Near(out[at], normalized[i], "out " + std::to_string(r) + "," + std::to_string(i));
    }
  }
}

TEST(RmsNormResidualReferenceTest, MatchesCpuBackendRmsNorm) {
  uint64_t seed = 100;
  for (int hidden : {1, 7, 64, 896, 4099}) {
    for (int n : {1, 3}) {
      CheckAgainstCpuBackend(n, hidden, false, false, seed++);
      CheckAgainstCpuBackend(n, hidden, true, false, seed++);
      CheckAgainstCpuBackend(n, hidden, true, true, seed++);
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
