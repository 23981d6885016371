#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "common/util/fp8.h"
#include "gtest/gtest.h"
#include "kernels/rope_kv_write.h"
#include "kernels/rope_kv_write_reference.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

using testing::Download;
using testing::Poisoned;
using testing::Upload;

constexpr Bf16Bits kPoison = 0xFFFF;  // what Poisoned() leaves in each bf16: a NaN

struct RopeCase {
  int num_heads;
  int kv_heads;
  int head_dim;
  int n;
  int block_size;
  bool bias;
  bool norm;
  DType kv_dtype = DType::kBF16;  // or kFP8E4M3
};

constexpr uint8_t kPoisonFp8 = 0xFF;  // what Poisoned() leaves in each fp8 code: a NaN

// The fp8 pool's codes: where the reference left the poison, the kernel must have too; elsewhere
// the same code or its neighbour (the values before rounding differ in their last f32 bits, as
// for bf16), with the same sign unless both are within one code of zero.
::testing::AssertionResult Fp8CodesClose(const std::vector<uint8_t>& got,
                                         const std::vector<uint8_t>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == kPoisonFp8 || got[i] == kPoisonFp8) {
      if (got[i] != want[i]) {
        return ::testing::AssertionFailure()
               << "kv_pool code " << i << ": got " << int{got[i]} << " want " << int{want[i]};
      }
      continue;
    }
    const int g = got[i] & 0x7f;
    const int w = want[i] & 0x7f;
    const bool same_sign = (got[i] & 0x80) == (want[i] & 0x80);
    if (!((same_sign && std::abs(g - w) <= 1) || (g <= 1 && w <= 1))) {
      return ::testing::AssertionFailure()
             << "kv_pool code " << i << ": got " << Fp8E4M3ToF32(got[i]) << " want "
             << Fp8E4M3ToF32(want[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

// Element by element: where the reference left the poison, the kernel must have too (a skipped
// slot, or pool memory no token maps to); elsewhere within one bf16 step (sincosf and the norm's
// sum order differ from the host's in the last f32 bits) plus a small absolute slack for outputs
// that cancel to near zero.
::testing::AssertionResult RopeClose(const std::vector<Bf16Bits>& got,
                                     const std::vector<Bf16Bits>& want, const char* what) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == kPoison || got[i] == kPoison) {
      if (got[i] != want[i]) {
        return ::testing::AssertionFailure()
               << what << " element " << i << ": got bits " << got[i] << " want bits " << want[i];
      }
      continue;
    }
    const float g = Bf16ToFloat(got[i]);
    const float w = Bf16ToFloat(want[i]);
    if (!(std::fabs(g - w) <= 2 * kBf16Epsilon * std::fabs(w) + 1e-4f)) {
      return ::testing::AssertionFailure()
             << what << " element " << i << ": got " << g << " want " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<float> InvFreq(int head_dim, float theta) {
  std::vector<float> inv_freq(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i) {
    inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  }
  return inv_freq;
}

void CheckRopeKvWrite(const RopeCase& c, uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "heads=" << c.num_heads << " kv_heads=" << c.kv_heads
               << " head_dim=" << c.head_dim << " n=" << c.n << " block_size=" << c.block_size
               << " bias=" << c.bias << " norm=" << c.norm << " kv " << DTypeName(c.kv_dtype));
  const bool fp8 = c.kv_dtype == DType::kFP8E4M3;
  KvLayout layout;
  layout.dtype = c.kv_dtype;
  layout.num_layers = 2;
  layout.num_kv_heads = c.kv_heads;
  layout.head_dim = c.head_dim;
  layout.block_size = c.block_size;
  layout.num_blocks = (c.n + c.block_size - 1) / c.block_size + 3;
  const int layer = 1;
  const int total_heads = c.num_heads + 2 * c.kv_heads;
  const int width = total_heads * c.head_dim;
  const int64_t pool_slots = int64_t{layout.num_blocks} * layout.block_size;

  const std::vector<float> qkv = RandomUniform(size_t(c.n) * width, -2, 2, seed);
  const std::vector<Bf16Bits> bias = ToBf16(RandomUniform(width, -0.5f, 0.5f, seed + 1));
  const std::vector<Bf16Bits> q_norm = ToBf16(RandomUniform(c.head_dim, 0.5f, 1.5f, seed + 2));
  const std::vector<Bf16Bits> k_norm = ToBf16(RandomUniform(c.head_dim, 0.5f, 1.5f, seed + 3));
  const std::vector<float> inv_freq = InvFreq(c.head_dim, 1000000.0f);
  const std::vector<float> position_draws = RandomUniform(c.n, 0, 131072, seed + 4);
  std::vector<int32_t> positions(c.n);
  std::vector<int64_t> slots(c.n);
  ASSERT_EQ(std::gcd(int64_t{13}, pool_slots), 1);  // so the slots below are distinct
  for (int t = 0; t < c.n; ++t) {
    positions[t] = static_cast<int32_t>(position_draws[t]);
    slots[t] = (int64_t{t} * 13 + 5) % pool_slots;
    if (t % 6 == 4) slots[t] = -1;               // a padding row: K/V not written
    if (t % 11 == 7) slots[t] = pool_slots + t;  // past the pool: skipped
  }

  const DeviceBuffer qkv_dev = Upload(qkv);
  const DeviceBuffer bias_dev = Upload(bias);
  const DeviceBuffer q_norm_dev = Upload(q_norm);
  const DeviceBuffer k_norm_dev = Upload(k_norm);
  const DeviceBuffer inv_freq_dev = Upload(inv_freq);
  const DeviceBuffer positions_dev = Upload(positions);
  const DeviceBuffer slots_dev = Upload(slots);
  // fp8 scales per (layer, K|V, kv head): powers of two from 1/8 to 1/32, so the largest values
  // (a few units; normalized heads up to ~6) land well inside E4M3's range.
  std::vector<float> scales(size_t{2} * 2 * c.kv_heads);
  for (size_t i = 0; i < scales.size(); ++i)
    scales[i] = std::ldexp(1.0f, -3 - static_cast<int>(i % 3));
  const DeviceBuffer scales_dev = Upload(scales);
  const size_t pool_bytes = layout.total_bytes();
  const DeviceBuffer pool_dev = Poisoned<uint8_t>(pool_bytes);
  const size_t q_size = size_t(c.n) * c.num_heads * c.head_dim;
  const DeviceBuffer q_out_dev = Poisoned<Bf16Bits>(q_size);
  RopeKvWriteArgs args;
  args.qkv = qkv_dev.as<float>();
  args.qkv_bias = c.bias ? bias_dev.as<__nv_bfloat16>() : nullptr;
  args.q_norm = c.norm ? q_norm_dev.as<__nv_bfloat16>() : nullptr;
  args.k_norm = c.norm ? k_norm_dev.as<__nv_bfloat16>() : nullptr;
  args.eps = 1e-6f;
  args.inv_freq = inv_freq_dev.as<float>();
  args.positions = positions_dev.as<int32_t>();
  args.slot_mapping = slots_dev.as<int64_t>();
  args.n = c.n;
  args.num_heads = c.num_heads;
  args.layout = layout;
  args.layer = layer;
  args.kv_pool = pool_dev.data();
  args.kv_scales = fp8 ? scales_dev.as<float>() : nullptr;
  args.q_out = q_out_dev.as<__nv_bfloat16>();
  const absl::Status status = RopeKvWrite(args, nullptr);
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<uint8_t> got_pool = Download<uint8_t>(pool_dev, pool_bytes);
  const std::vector<Bf16Bits> got_q = Download<Bf16Bits>(q_out_dev, q_size);

  std::vector<uint8_t> want_pool(pool_bytes, 0xFF);  // kPoison in every bf16, kPoisonFp8 in fp8
  std::vector<Bf16Bits> want_q(q_size, kPoison);
  RopeKvWriteReferenceArgs ref;
  ref.qkv = qkv.data();
  ref.qkv_bias = c.bias ? bias.data() : nullptr;
  ref.q_norm = c.norm ? q_norm.data() : nullptr;
  ref.k_norm = c.norm ? k_norm.data() : nullptr;
  ref.eps = 1e-6f;
  ref.inv_freq = inv_freq.data();
  ref.positions = positions.data();
  ref.slot_mapping = slots.data();
  ref.n = c.n;
  ref.num_heads = c.num_heads;
  ref.layout = layout;
  ref.layer = layer;
  ref.kv_pool = want_pool.data();
  ref.kv_scales = scales.data();
  ref.q_out = want_q.data();
  RopeKvWriteReference(ref);
  for (Bf16Bits v : want_q) ASSERT_NE(v, kPoison);  // every query element has a value to check

  EXPECT_TRUE(RopeClose(got_q, want_q, "q_out"));
  if (fp8) {
    EXPECT_TRUE(Fp8CodesClose(got_pool, want_pool));
  } else {
    auto as_bf16 = [](const std::vector<uint8_t>& bytes) {
      std::vector<Bf16Bits> bits(bytes.size() / 2);
      std::memcpy(bits.data(), bytes.data(), bits.size() * 2);
      return bits;
    };
    EXPECT_TRUE(RopeClose(as_bf16(got_pool), as_bf16(want_pool), "kv_pool"));
  }
}

TEST(RopeKvWriteGpuTest, MatchesReferenceOverShapes) {
  TANDEM_REQUIRE_GPU();
  uint64_t seed = 1;
  for (int head_dim : {64, 128}) {
    // GQA ratios 1, 4 and 8; 80 heads in all for the last (more heads than one block's warps).
    for (const auto& [heads, kv_heads] :
         {std::pair{8, 8}, std::pair{16, 4}, std::pair{32, 4}, std::pair{64, 8}}) {
      for (int n : {1, 7, 300}) {
        for (int variant = 0; variant < 4; ++variant) {
          const bool bias = variant & 1;
          const bool norm = variant & 2;
          CheckRopeKvWrite(RopeCase{heads, kv_heads, head_dim, n, 16, bias, norm}, seed++);
          CheckRopeKvWrite(RopeCase{heads, kv_heads, head_dim, n, 16, bias, norm, DType::kFP8E4M3},
                           seed++);
        }
      }
    }
  }
}

TEST(RopeKvWriteGpuTest, OddBlockSizesSmallHeadsAndManyTokens) {
  TANDEM_REQUIRE_GPU();
  CheckRopeKvWrite(RopeCase{4, 2, 64, 41, 5, true, true}, 101);
  CheckRopeKvWrite(RopeCase{3, 1, 6, 31, 3, true, true}, 102);       // head_dim 6: half 3 lanes
  CheckRopeKvWrite(RopeCase{2, 2, 256, 9, 16, false, true}, 103);    // pairs beyond 32 lanes
  CheckRopeKvWrite(RopeCase{8, 8, 64, 4000, 16, true, false}, 104);  // prefill-sized
  CheckRopeKvWrite(RopeCase{3, 1, 6, 31, 3, true, true, DType::kFP8E4M3}, 105);
  CheckRopeKvWrite(RopeCase{8, 8, 64, 4000, 16, true, false, DType::kFP8E4M3}, 106);
}

// Argument checks run before any CUDA call, so this needs no GPU.
TEST(RopeKvWriteGpuTest, RejectsBadArguments) {
  RopeKvWriteArgs good;
  good.qkv = reinterpret_cast<const float*>(16);
  good.inv_freq = reinterpret_cast<const float*>(16);
  good.positions = reinterpret_cast<const int32_t*>(16);
  good.slot_mapping = reinterpret_cast<const int64_t*>(16);
  good.kv_pool = reinterpret_cast<__nv_bfloat16*>(16);
  good.q_out = reinterpret_cast<__nv_bfloat16*>(16);
  good.n = 0;  // a no-op once the arguments pass
  good.num_heads = 8;
  good.layout.dtype = DType::kBF16;
  good.layout.num_layers = 2;
  good.layout.num_kv_heads = 2;
  good.layout.head_dim = 64;
  good.layout.block_size = 16;
  good.layout.num_blocks = 4;
  good.layer = 1;
  EXPECT_TRUE(RopeKvWrite(good, nullptr).ok());
  auto expect_invalid = [](const RopeKvWriteArgs& args, const char* what) {
    const absl::Status status = RopeKvWrite(args, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_NE(status.message().find(what), absl::string_view::npos) << status;
  };
  RopeKvWriteArgs bad = good;
  bad.qkv = nullptr;
  expect_invalid(bad, "qkv");
  bad = good;
  bad.q_out = nullptr;
  expect_invalid(bad, "q_out");
  bad = good;
  bad.kv_pool = nullptr;
  expect_invalid(bad, "kv_pool");
  bad = good;
  bad.slot_mapping = nullptr;
  expect_invalid(bad, "slot_mapping");
  bad = good;
  bad.n = -1;
  expect_invalid(bad, "n -1");
  bad = good;
  bad.layout.dtype = DType::kF32;
  expect_invalid(bad, "dtype");
  bad = good;
  bad.layout.head_dim = 63;
  expect_invalid(bad, "head_dim");
  bad = good;
  bad.num_heads = 7;
  expect_invalid(bad, "num_heads");
  bad = good;
  bad.layer = 2;
  expect_invalid(bad, "layer");
  bad = good;
  bad.layer = -1;
  expect_invalid(bad, "layer");
  bad = good;
  bad.q_norm = reinterpret_cast<const __nv_bfloat16*>(16);
  expect_invalid(bad, "q_norm");
  bad = good;
  bad.layout.dtype = DType::kFP8E4M3;
  expect_invalid(bad, "kv_scales");
  bad.kv_scales = reinterpret_cast<const float*>(16);
  EXPECT_TRUE(RopeKvWrite(bad, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels
