#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/swiglu.h"
#include "kernels/swiglu_reference.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::Download;
using testing::Poisoned;
using testing::Upload;

// Within one bf16 step of the reference (expf on the GPU may differ from the host's by an f32
// ulp, so a value near a rounding boundary may round either way), and few such steps.
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

// `offset` shifts both device pointers by that many elements (odd: the scalar path).
void CheckSwiGlu(int n, int inter, uint64_t seed, int offset = 0) {
  SCOPED_TRACE(::testing::Message() << "n=" << n << " inter=" << inter << " offset=" << offset);
  const size_t in_size = size_t(n) * 2 * inter;
  const size_t out_size = size_t(n) * inter;
  // Gates wide enough that exp(-g) spans underflow to large values; ups of either sign.
  const std::vector<Bf16Bits> gate_up = ToBf16(RandomUniform(in_size + offset, -20, 20, seed));
  const DeviceBuffer gate_up_dev = Upload(gate_up);
  const DeviceBuffer out_dev = Poisoned<Bf16Bits>(out_size + offset);
  const absl::Status status = SwiGlu(gate_up_dev.as<__nv_bfloat16>() + offset, n, inter,
                                     out_dev.as<__nv_bfloat16>() + offset, nullptr);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<Bf16Bits> got = Download<Bf16Bits>(out_dev, out_size + offset);
  std::vector<Bf16Bits> want(out_size);
  SwiGluReference(gate_up.data() + offset, n, inter, want.data());
  EXPECT_TRUE(Bf16Close(got, offset, want, inter));
}

TEST(SwiGluGpuTest, MatchesReferenceOverShapes) {
  TANDEM_REQUIRE_GPU();
  uint64_t seed = 1;
  for (int inter : {1, 7, 8, 64, 1000, 4099, 14336, 18944}) {
    for (int n : {1, 3, 128}) CheckSwiGlu(n, inter, seed++);
  }
  CheckSwiGlu(70000, 8, seed++);  // more rows than grid.y could hold
}

TEST(SwiGluGpuTest, UnalignedPointersTakeTheScalarPath) {
  TANDEM_REQUIRE_GPU();
  CheckSwiGlu(3, 64, 21, /*offset=*/1);
  CheckSwiGlu(3, 4096, 22, /*offset=*/8);  // 16-byte aligned again
}

TEST(SwiGluGpuTest, ColumnsBeyondTheGridLimitAreLooped) {
  TANDEM_REQUIRE_GPU();
  // Odd inter (scalar path) with more than 65535 blocks of 256 columns: grid.y is capped and
  // each thread loops.
  CheckSwiGlu(1, 65535 * 256 + 257, 31);
}

// Argument checks run before any CUDA call, so this needs no GPU.
TEST(SwiGluGpuTest, RejectsBadArguments) {
  const auto* in = reinterpret_cast<const __nv_bfloat16*>(16);
  auto* out = reinterpret_cast<__nv_bfloat16*>(16);
  EXPECT_EQ(SwiGlu(in, -1, 8, out, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SwiGlu(in, 1, 0, out, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SwiGlu(nullptr, 1, 8, out, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SwiGlu(in, 1, 8, nullptr, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SwiGlu(nullptr, 0, 8, nullptr, nullptr).ok());  // no rows: a no-op
}

}  // namespace
}  // namespace tandem::kernels
