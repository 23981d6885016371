#include "kernels/bf16_reference.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tandem::kernels {
namespace {

TEST(Bf16ReferenceTest, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  EXPECT_EQ(FloatToBf16(1.0f + 1.0f / 256.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(1.0f + 3.0f / 256.0f), 0x3f82);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
}

TEST(Bf16ReferenceTest, RoundTripErrorIsWithinEpsilon) {
  const std::vector<float> values = RandomUniform(4096, -100.0f, 100.0f, 7);
  const std::vector<float> back = FromBf16(ToBf16(values));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_LE(std::fabs(back[i] - values[i]), std::fabs(values[i]) * kBf16Epsilon) << i;
  }
}

TEST(Bf16ReferenceTest, RandomUniformIsSeededAndInRange) {
  const std::vector<float> a = RandomUniform(1000, -2.0f, 3.0f, 11);
  EXPECT_EQ(a, RandomUniform(1000, -2.0f, 3.0f, 11));
  EXPECT_NE(a, RandomUniform(1000, -2.0f, 3.0f, 12));
  double sum = 0;
  for (float v : a) {
    EXPECT_GE(v, -2.0f);
    EXPECT_LT(v, 3.0f);
    sum += v;
  }
  EXPECT_NEAR(sum / a.size(), 0.5, 0.15);
}

}  // namespace
}  // namespace tandem::kernels
