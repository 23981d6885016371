#include "common/backend/cpu_gemm.h"

#include <cmath>
#include <random>
#include <vector>

#include "common/backend/simd.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Every shape the micro-kernels split into: token counts around the 4-token and 64-token tiles,
// column counts around the 2- and 4-row groups, k with and without a tail.
TEST(GemmTest, MatchesDoublePrecisionAndIsBatchInvariant) {
  ThreadPool pool(2);
  for (int k : {8, 13, 24, 64, 100}) {
    for (int n : {1, 3, 4, 7, 18}) {
      const std::vector<float> w = Random(size_t(n) * k, 1);
      const std::vector<float> bias = Random(n, 2);
      const std::vector<float> x = Random(size_t(70) * k, 3);
      for (int rows : {1, 2, 3, 5, 8, 70}) {
        std::vector<float> y(size_t(rows) * n, 0.5f);
        GemmArgs a;
        a.x = x.data();
        a.ldx = k;
        a.rows = rows;
        a.k = k;
        a.w = w.data();
        a.n = n;
        a.bias = bias.data();
        a.y = y.data();
        a.ldy = n;
        a.accumulate = true;
        Gemm(a, pool);
        for (int t = 0; t < rows; ++t) {
          for (int o = 0; o < n; ++o) {
            double ref = 0.5 + bias[o];
            for (int j = 0; j < k; ++j) ref += double(x[t * k + j]) * w[o * k + j];
            ASSERT_NEAR(y[t * n + o], ref, 1e-5 * k) << k << " " << n << " " << rows;
            // Bit-identical to the single dot product, whatever the batch shape.
            const float dot = simd::Dot(x.data() + t * k, w.data() + o * k, k);
            ASSERT_EQ(y[t * n + o], 0.5f + (dot + bias[o])) << k << " " << n << " " << rows;
          }
        }
      }
    }
  }
}

TEST(GemmTest, OverwritesWithoutAccumulateAndHonoursStrides) {
  ThreadPool pool(1);
  const int k = 16, n = 5, rows = 3;
  const std::vector<float> w = Random(n * k, 4);
  std::vector<float> x = Random(rows * 20, 5);  // ldx 20 > k
  std::vector<float> y(rows * 8, 99.0f);        // ldy 8 > n
  GemmArgs a{x.data(), 20, rows, k, w.data(), n, nullptr, y.data(), 8, false};
  Gemm(a, pool);
  for (int t = 0; t < rows; ++t) {
    for (int o = 0; o < n; ++o) {
      EXPECT_EQ(y[t * 8 + o], simd::Dot(x.data() + t * 20, w.data() + o * k, k));
    }
    for (int o = n; o < 8; ++o) EXPECT_EQ(y[t * 8 + o], 99.0f);  // padding untouched
  }
}

}  // namespace
}  // namespace tandem
