#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/rms_norm.h"
#include "kernels/rms_norm_reference.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::Download;
using testing::Poisoned;
using testing::Upload;

// Every output within one bf16 step of the reference's (the two sum the squares in different
// orders, so a value near a rounding boundary may round either way), and few such steps.
::testing::AssertionResult Bf16Close(const std::vector<Bf16Bits>& got, size_t offset,
                                     const std::vector<Bf16Bits>& want, int width) {
  size_t differing = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = Bf16ToFloat(got[offset + i]);
    const float w = Bf16ToFloat(want[i]);
    if (!(std::fabs(g - w) <= 2 * kBf16Epsilon * std::fabs(w))) {
      return ::testing::AssertionFailure()
             << "row " << i / width << " col " << i % width << ": got " << g << " want " << w;
    }
    if (got[offset + i] != want[i]) ++differing;
  }
  if (differing > want.size() / 50 + 1) {
    return ::testing::AssertionFailure() << differing << " of " << want.size() << " outputs differ";
  }
  return ::testing::AssertionSuccess();
}

// `offset` shifts residual and out by that many elements (1: the scalar path).
void CheckRmsNorm(int n, int hidden, bool with_delta, bool with_bias, uint64_t seed,
                  int offset = 0) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " hidden=" << hidden << " delta=" << with_delta
                                    << " bias=" << with_bias << " offset=" << offset);
  const size_t size = size_t(n) * hidden;
  const std::vector<float> residual_in = RandomUniform(size + offset, -4, 4, seed);
  const std::vector<Bf16Bits> delta = ToBf16(RandomUniform(size, -2, 2, seed + 1));
  const std::vector<Bf16Bits> bias = ToBf16(RandomUniform(hidden, -1, 1, seed + 2));
  const std::vector<Bf16Bits> weight = ToBf16(RandomUniform(hidden, -1.5f, 1.5f, seed + 3));
  const float eps = 1e-6f;

  const DeviceBuffer residual_dev = Upload(residual_in);
  const DeviceBuffer delta_dev = Upload(delta);
  const DeviceBuffer bias_dev = Upload(bias);
  const DeviceBuffer weight_dev = Upload(weight);
  const DeviceBuffer out_dev = Poisoned<Bf16Bits>(size + offset);
  RmsNormResidualArgs args;
  args.residual = residual_dev.as<float>() + offset;
  args.delta = with_delta ? delta_dev.as<__nv_bfloat16>() : nullptr;
  args.delta_bias = with_bias ? bias_dev.as<__nv_bfloat16>() : nullptr;
  args.weight = weight_dev.as<__nv_bfloat16>();
  args.n = n;
  args.hidden = hidden;
  args.eps = eps;
  args.out = out_dev.as<__nv_bfloat16>() + offset;
  const absl::Status status = RmsNormResidual(args, nullptr);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<float> got_residual = Download<float>(residual_dev, size + offset);
  const std::vector<Bf16Bits> got_out = Download<Bf16Bits>(out_dev, size + offset);

  std::vector<float> want_residual(residual_in.begin() + offset, residual_in.end());
  std::vector<Bf16Bits> want_out(size);
  RmsNormResidualReferenceArgs ref;
  ref.residual = want_residual.data();
  ref.delta = with_delta ? delta.data() : nullptr;
  ref.delta_bias = with_bias ? bias.data() : nullptr;
  ref.weight = weight.data();
  ref.n = n;
  ref.hidden = hidden;
  ref.eps = eps;
  ref.out = want_out.data();
  RmsNormResidualReference(ref);

  // The residual add is the same f32 operations in the same order: bit-exact.
  EXPECT_EQ(std::memcmp(got_residual.data() + offset, want_residual.data(), sizeof(float) * size),
            0);
  EXPECT_TRUE(Bf16Close(got_out, offset, want_out, hidden));
}

TEST(RmsNormResidualGpuTest, MatchesReferenceOverShapes) {
  TANDEM_REQUIRE_GPU();
  uint64_t seed = 1;
  for (int hidden : {1, 33, 64, 128, 896, 2048, 4096, 4099, 5120, 8192, 16384}) {
    for (int n : {1, 3, 64}) {
      CheckRmsNorm(n, hidden, false, false, seed++);
      CheckRmsNorm(n, hidden, true, false, seed++);
      CheckRmsNorm(n, hidden, true, true, seed++);
    }
  }
  CheckRmsNorm(2000, 4096, true, true, seed++);  // a prefill-sized batch
}

TEST(RmsNormResidualGpuTest, UnalignedPointersTakeTheScalarPath) {
  TANDEM_REQUIRE_GPU();
  CheckRmsNorm(5, 64, true, true, 11, /*offset=*/1);
  CheckRmsNorm(5, 4096, false, false, 12, /*offset=*/3);
  CheckRmsNorm(5, 4096, true, false, 13, /*offset=*/8);  // 16-byte aligned again
}

TEST(RmsNormResidualGpuTest, LargeValuesDoNotOverflowTheSum) {
  TANDEM_REQUIRE_GPU();
  // Rows of 1e17: squares of 1e34 summed over 4096 elements (4.1e37) stay below FLT_MAX.
  const int hidden = 4096;
  const std::vector<float> residual(hidden, 1e17f);
  const std::vector<Bf16Bits> weight(hidden, FloatToBf16(1.0f));
  const DeviceBuffer residual_dev = Upload(residual);
  const DeviceBuffer weight_dev = Upload(weight);
  const DeviceBuffer out_dev = Poisoned<Bf16Bits>(hidden);
  RmsNormResidualArgs args;
  args.residual = residual_dev.as<float>();
  args.weight = weight_dev.as<__nv_bfloat16>();
  args.n = 1;
  args.hidden = hidden;
  args.out = out_dev.as<__nv_bfloat16>();
  ASSERT_TRUE(RmsNormResidual(args, nullptr).ok());
  for (Bf16Bits v : Download<Bf16Bits>(out_dev, hidden)) ASSERT_EQ(Bf16ToFloat(v), 1.0f);
}

// Argument checks run before any CUDA call, so this needs no GPU.
TEST(RmsNormResidualGpuTest, RejectsBadArguments) {
  auto* residual = reinterpret_cast<float*>(16);
  const auto* bf16 = reinterpret_cast<const __nv_bfloat16*>(16);
  auto* out = reinterpret_cast<__nv_bfloat16*>(16);
  RmsNormResidualArgs good;
  good.residual = residual;
  good.weight = bf16;
  good.n = 0;  // a no-op: nothing is launched
  good.hidden = 8;
  good.out = out;
  EXPECT_TRUE(RmsNormResidual(good, nullptr).ok());
  auto expect_invalid = [&](RmsNormResidualArgs args, const char* what) {
    const absl::Status status = RmsNormResidual(args, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_NE(status.message().find(what), absl::string_view::npos) << status;
  };
  RmsNormResidualArgs bad = good;
  bad.residual = nullptr;
  expect_invalid(bad, "residual");
  bad = good;
  bad.weight = nullptr;
  expect_invalid(bad, "weight");
  bad = good;
  bad.out = nullptr;
  expect_invalid(bad, "out");
  bad = good;
  bad.delta_bias = bf16;
  expect_invalid(bad, "delta_bias");
  bad = good;
  bad.n = -1;
  expect_invalid(bad, "n");
  bad = good;
  bad.hidden = 0;
  expect_invalid(bad, "hidden");
  bad = good;
  bad.eps = 0.0f;
  expect_invalid(bad, "eps");
}

}  // namespace
}  // namespace tandem::kernels
