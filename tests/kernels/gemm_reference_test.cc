#include "kernels/gemm_reference.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/backend/cpu_gemm.h"
#include "common/util/thread_pool.h"
#include "gtest/gtest.h"

namespace tandem::kernels {
namespace {

TEST(LinearReferenceTest, HandComputedProduct) {
  // x [2, 2], w [3, 2]: y = x · w^T.
  const std::vector<Bf16Bits> x = ToBf16(std::vector<float>{1, 2, 3, 4});
  const std::vector<Bf16Bits> w = ToBf16(std::vector<float>{1, 0, 0, 1, 1, -1});
  std::vector<float> y(6);
  LinearReference(x.data(), 2, 2, w.data(), 3, y.data());
  EXPECT_EQ(y, (std::vector<float>{1, 2, -1, 3, 4, -1}));
}

TEST(LinearReferenceTest, MatchesCpuBackendGemm) {
  ThreadPool pool(1);
  uint64_t seed = 21;
  struct Shape {
    int rows, k, n;
  };
  for (const Shape& s :
       {Shape{1, 1, 1}, Shape{1, 7, 5}, Shape{3, 64, 33}, Shape{7, 257, 19}, Shape{16, 1000, 8}}) {
    SCOPED_TRACE(::testing::Message() << "rows=" << s.rows << " k=" << s.k << " n=" << s.n);
    const std::vector<Bf16Bits> x = ToBf16(RandomUniform(size_t(s.rows) * s.k, -1, 1, seed++));
    const std::vector<Bf16Bits> w = ToBf16(RandomUniform(size_t(s.n) * s.k, -1, 1, seed++));
    std::vector<float> y(size_t(s.rows) * s.n);
    LinearReference(x.data(), s.rows, s.k, w.data(), s.n, y.data());

    const std::vector<float> x_f32 = FromBf16(x);
    const std::vector<float> w_f32 = FromBf16(w);
    std::vector<float> want(y.size());
    GemmArgs args;
    args.x = x_f32.data();
    args.ldx = s.k;
    args.rows = s.rows;
    args.k = s.k;
    args.w = w_f32.data();
    args.n = s.n;
    args.y = want.data();
    args.ldy = s.n;
    Gemm(args, pool);
    for (int r = 0; r < s.rows; ++r) {
      for (int j = 0; j < s.n; ++j) {
        double abs_sum = 0;
        for (int i = 0; i < s.k; ++i) {
          abs_sum += std::fabs(x_f32[int64_t{r} * s.k + i] * w_f32[int64_t{j} * s.k + i]);
        }
        // f32 sums in any order stay within k * 2^-24 * sum|x w| of the exact value.
        const double tolerance = s.k * std::ldexp(1.0, -24) * abs_sum + 1e-30;
        const int64_t at = int64_t{r} * s.n + j;
        EXPECT_LE(std::fabs(double{y[at]} - double{want[at]}), tolerance) << r << "," << j;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
