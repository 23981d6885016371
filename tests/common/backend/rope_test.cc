#include "common/backend/rope.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/backend/reference_forward.h"

namespace tandem {
namespace {

ModelConfig Llama31Config() {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0f;
  c.rope_scaling.type = RopeScaling::Type::kLlama3;
  c.rope_scaling.factor = 8.0f;
  c.rope_scaling.low_freq_factor = 1.0f;
  c.rope_scaling.high_freq_factor = 4.0f;
  c.rope_scaling.original_max_position_embeddings = 8192;
  return c;
}

// Llama 3.1 (theta 500000, head_dim 128, factor 8, low 1, high 4, original context 8192), by
// hand from HF's _compute_llama3_parameters: inv = 500000^(-2i/128), wavelen = 2*pi/inv;
// wavelen < 2048 keeps inv; wavelen > 8192 gives inv/8; between, with
// s = (8192/wavelen - 1) / (4 - 1): (1 - s) * inv / 8 + s * inv.
TEST(RopeTest, Llama3ScalingMatchesHandComputedValues) {
  const std::vector<float> inv = RopeInvFreq(Llama31Config());
  ASSERT_EQ(inv.size(), 64u);
  // i = 0: inv = 1, wavelen 6.28: high frequency, unchanged.
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  // i = 20: inv = 500000^(-40/128) = 0.0165604, wavelen 379.4 < 2048: unchanged.
  EXPECT_NEAR(inv[20], 0.016560440080994446, 1e-8);
  // i = 32: inv = 1/sqrt(500000) = 0.00141421, wavelen = 2*pi*sqrt(500000) = 4442.88 (medium);
  // s = (8192/4442.88 - 1)/3 = 0.281279; (1 - s)/8 + s = 0.371119; 0.00141421 * 0.371119.
  EXPECT_NEAR(inv[32], 0.0005248461609929547, 1e-9);
  // i = 30: inv = 0.00213112, wavelen 2948.30 (medium): s = 0.592828 -> 0.00137189.
  EXPECT_NEAR(inv[30], 0.0013718935677611381, 1e-9);
  // i = 35: inv = 0.000764497, wavelen 8218.7 > 8192: low frequency, inv / 8.
  EXPECT_NEAR(inv[35], 9.556212353964683e-05, 1e-10);
  // i = 63: inv = 500000^(-126/128) / 8.
  EXPECT_NEAR(inv[63], 3.068925988914511e-07, 1e-12);
  // Every index against the double-precision formula.
  const std::vector<double> ref = testing::ReferenceInvFreq(Llama31Config());
  for (size_t i = 0; i < inv.size(); ++i) EXPECT_NEAR(inv[i], ref[i], 1e-6 * ref[i]) << i;
}

TEST(RopeTest, DefaultAndLinearScaling) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope_theta = 10000.0f;
  std::vector<float> inv = RopeInvFreq(c);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_FLOAT_EQ(inv[1], 0.1f);   // 10000^(-2/8)
  EXPECT_FLOAT_EQ(inv[2], 0.01f);  // 10000^(-4/8)
  EXPECT_FLOAT_EQ(inv[3], 0.001f);
  c.rope_scaling.type = RopeScaling::Type::kLinear;
  c.rope_scaling.factor = 4.0f;
  inv = RopeInvFreq(c);
  EXPECT_FLOAT_EQ(inv[0], 0.25f);
  EXPECT_FLOAT_EQ(inv[1], 0.025f);
}

TEST(RopeTest, RotateHalfPairsDimensionIWithIPlusHalf) {
  // head = [x0, x1 | y0, y1], one frequency per pair.
  float head[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> inv_freq = {1.0f, 0.5f};
  float cos[2], sin[2];
  RopeCosSin(inv_freq, 3, cos, sin);
  EXPECT_FLOAT_EQ(cos[0], std::cos(3.0f));
  EXPECT_FLOAT_EQ(sin[1], std::sin(1.5f));
  ApplyRope(head, cos, sin, 2);
  EXPECT_FLOAT_EQ(head[0], 1.0f * std::cos(3.0f) - 3.0f * std::sin(3.0f));
  EXPECT_FLOAT_EQ(head[2], 3.0f * std::cos(3.0f) + 1.0f * std::sin(3.0f));
  EXPECT_FLOAT_EQ(head[1], 2.0f * std::cos(1.5f) - 4.0f * std::sin(1.5f));
  EXPECT_FLOAT_EQ(head[3], 4.0f * std::cos(1.5f) + 2.0f * std::sin(1.5f));
  // Position 0 is the identity.
  float h0[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  RopeCosSin(inv_freq, 0, cos, sin);
  ApplyRope(h0, cos, sin, 2);
  EXPECT_EQ(h0[0], 1.0f);
  EXPECT_EQ(h0[3], 4.0f);
}

}  // namespace
}  // namespace tandem
