#include "kernels/swiglu_reference.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/backend/row_ops.h"
#include "gtest/gtest.h"

namespace tandem::kernels {
namespace {

TEST(SwiGluReferenceTest, HandComputedValues) {
  // One row, inter 3: gates (0, 20, -20), ups (5, 2, 3).
  const std::vector<Bf16Bits> gate_up = ToBf16(std::vector<float>{0, 20, -20, 5, 2, 3});
  std::vector<Bf16Bits> out(3);
  SwiGluReference(gate_up.data(), 1, 3, out.data());
  EXPECT_EQ(Bf16ToFloat(out[0]), 0.0f);                                   // silu(0) = 0
  EXPECT_EQ(out[1], FloatToBf16(20.0f / (1.0f + std::exp(-20.0f)) * 2));  // ~ 40
  EXPECT_NEAR(Bf16ToFloat(out[1]), 40.0f, 0.25f);
  EXPECT_NEAR(Bf16ToFloat(out[2]), 0.0f, 1e-6f);  // silu(-20) ~ -4e-8
}

TEST(SwiGluReferenceTest, MatchesCpuBackendSiluMul) {
  uint64_t seed = 7;
  for (int inter : {1, 8, 37, 1000}) {
    for (int n : {1, 4}) {
      const std::vector<Bf16Bits> gate_up =
          ToBf16(RandomUniform(size_t(n) * 2 * inter, -8, 8, seed++));
      std::vector<Bf16Bits> out(size_t(n) * inter);
      SwiGluReference(gate_up.data(), n, inter, out.data());
      const std::vector<float> gate_up_f32 = FromBf16(gate_up);
      std::vector<float> want(inter);
      for (int r = 0; r < n; ++r) {
        const float* row = gate_up_f32.data() + int64_t{r} * 2 * inter;
        SiluMul(row, row + inter, inter, want.data());
        for (int i = 0; i < inter; ++i) {
          ASSERT_EQ(out[int64_t{r} * inter + i], FloatToBf16(want[i]))
              << "inter=" << inter << " row " << r << " col " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
