#include "kernels/rope_kv_write_reference.h"

#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "common/backend/rope.h"
#include "common/backend/row_ops.h"
#include "common/model/model_config.h"
#include "common/util/fp8.h"
#include "gtest/gtest.h"

namespace tandem::kernels {
namespace {

constexpr Bf16Bits kUnwritten = 0xFFFF;  // a NaN: pool elements nothing wrote keep it

KvLayout MakeLayout(int num_layers, int kv_heads, int head_dim, int block_size, int num_blocks) {
  KvLayout layout;
  layout.dtype = DType::kBF16;
  layout.num_layers = num_layers;
  layout.num_kv_heads = kv_heads;
  layout.head_dim = head_dim;
  layout.block_size = block_size;
  layout.num_blocks = num_blocks;
  return layout;
}

TEST(RopeKvWriteReferenceTest, PositionZeroCopiesHeadsToTheirPoolSlots) {
  // 2 q heads, 2 kv heads, head_dim 4; pool of 2 layers x 3 blocks x 4 slots; layer 1.
  const KvLayout layout = MakeLayout(2, 2, 4, 4, 3);
  ASSERT_EQ(layout.total_elements(), 384);
  std::vector<float> qkv(2 * 24);
  for (int i = 0; i < 48; ++i) qkv[i] = static_cast<float>(i + 1);
  const std::vector<float> inv_freq = {1.0f, 0.01f};
  const std::vector<int32_t> positions = {0, 0};
  const std::vector<int64_t> slots = {5, -1};  // token 0: block 1, slot 1; token 1: not written
  std::vector<Bf16Bits> pool(layout.total_elements(), kUnwritten);
  std::vector<Bf16Bits> q_out(2 * 8, kUnwritten);
  RopeKvWriteReferenceArgs args;
  args.qkv = qkv.data();
  args.inv_freq = inv_freq.data();
  args.positions = positions.data();
  args.slot_mapping = slots.data();
  args.n = 2;
  args.num_heads = 2;
  args.layout = layout;
  args.layer = 1;
  args.kv_pool = pool.data();
  args.q_out = q_out.data();
  RopeKvWriteReference(args);

  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < 8; ++i) EXPECT_EQ(Bf16ToFloat(q_out[t * 8 + i]), qkv[t * 24 + i]);
  }
  // Offsets by hand: head 16, block 32, kv 96, layer 192 elements.
  ASSERT_EQ(layout.Offset(1, 0, 1, 0, 1), 228);
  ASSERT_EQ(layout.Offset(1, 1, 1, 1, 1), 340);
  std::vector<Bf16Bits> want(pool.size(), kUnwritten);
  for (int i = 0; i < 4; ++i) {
    want[228 + i] = FloatToBf16(9 + i);        // K head 0
    want[228 + 16 + i] = FloatToBf16(13 + i);  // K head 1
    want[324 + i] = FloatToBf16(17 + i);       // V head 0
    want[340 + i] = FloatToBf16(21 + i);       // V head 1
  }
  EXPECT_EQ(pool, want);
}

// An fp8 pool gets the E4M3 code of value / scale, the scale of its (layer, K|V, kv head): the
// same heads as PositionZeroCopiesHeadsToTheirPoolSlots (position 0: K and V are qkv's values), and
// a value past 448 x scale saturates.
TEST(RopeKvWriteReferenceTest, Fp8StoresTheCodeOfValueOverItsHeadsScale) {
  KvLayout layout = MakeLayout(2, 2, 4, 4, 3);
  layout.dtype = DType::kFP8E4M3;
  std::vector<float> qkv(24);
  for (int i = 0; i < 24; ++i) qkv[i] = static_cast<float>(i + 1) / 4;
  qkv[20] = 1e6f;  // V head 1, element 0
  const std::vector<float> inv_freq = {1.0f, 0.01f};
  const std::vector<int32_t> positions = {0};
  const std::vector<int64_t> slots = {5};
  // [layer][K|V][head]; layer 1's: K 1/2, 1/4; V 1/8, 1.
  const std::vector<float> scales = {1, 1, 1, 1, 0.5f, 0.25f, 0.125f, 1};
  std::vector<uint8_t> pool(layout.total_elements(), 0xFF);
  std::vector<Bf16Bits> q_out(8, kUnwritten);
  RopeKvWriteReferenceArgs args;
  args.qkv = qkv.data();
  args.inv_freq = inv_freq.data();
  args.positions = positions.data();
  args.slot_mapping = slots.data();
  args.n = 1;
  args.num_heads = 2;
  args.layout = layout;
  args.layer = 1;
  args.kv_pool = pool.data();
  args.kv_scales = scales.data();
  args.q_out = q_out.data();
  RopeKvWriteReference(args);
  std::vector<uint8_t> want(pool.size(), 0xFF);
  const int64_t offsets[4] = {228, 228 + 16, 324, 340};  // K head 0, K head 1, V head 0, V head 1
  for (int h = 0; h < 4; ++h) {
    for (int i = 0; i < 4; ++i) {
      want[offsets[h] + i] = F32ToFp8E4M3(qkv[8 + 4 * h + i] / scales[4 + h]);
    }
  }
  EXPECT_EQ(want[340], 0x7e);  // 1e6 saturates to 448
  EXPECT_EQ(pool, want);
  EXPECT_EQ(Fp8E4M3ToF32(pool[228 + 16 + 3]) * 0.25f, 4.0f);  // 4 / (1/4) = 16: exact
}

TEST(RopeKvWriteReferenceTest, RotatesNormalizesAndAddsBiasByHand) {
  // One q head and one kv head of head_dim 2, so each head is one rotated pair.
  const KvLayout layout = MakeLayout(1, 1, 2, 1, 1);
  const std::vector<float> qkv = {1, 2, 3, 4, 5, 6};  // q (1, 2), k (3, 4), v (5, 6)
  const std::vector<Bf16Bits> bias = ToBf16(std::vector<float>{0, 0, 0, 0, 0.5f, -1});
  const std::vector<Bf16Bits> q_norm = ToBf16(std::vector<float>{1, 1});
  const std::vector<Bf16Bits> k_norm = ToBf16(std::vector<float>{2, 0.5f});
  const std::vector<float> inv_freq = {0.5f};
  const std::vector<int32_t> positions = {4};  // angle 2
  const std::vector<int64_t> slots = {0};
  std::vector<Bf16Bits> pool(layout.total_elements(), kUnwritten);
  std::vector<Bf16Bits> q_out(2, kUnwritten);
  RopeKvWriteReferenceArgs args;
  args.qkv = qkv.data();
  args.qkv_bias = bias.data();
  args.inv_freq = inv_freq.data();
  args.positions = positions.data();
  args.slot_mapping = slots.data();
  args.n = 1;
  args.num_heads = 1;
  args.layout = layout;
  args.kv_pool = pool.data();
  args.q_out = q_out.data();

  RopeKvWriteReference(args);
  // q = (1, 2) rotated by 2 rad: (cos 2 - 2 sin 2, 2 cos 2 + sin 2) = (-2.2347, 0.0770).
  EXPECT_NEAR(Bf16ToFloat(q_out[0]), -2.2347f, 2.2347f * kBf16Epsilon + 1e-4f);
  EXPECT_NEAR(Bf16ToFloat(q_out[1]), 0.0770f, 0.0770f * kBf16Epsilon + 1e-4f);
  // k = (3, 4) rotated: (3 cos 2 - 4 sin 2, 4 cos 2 + 3 sin 2) = (-4.8856, 1.0633).
  EXPECT_NEAR(Bf16ToFloat(pool[0]), -4.8856f, 4.8856f * kBf16Epsilon + 1e-4f);
  EXPECT_NEAR(Bf16ToFloat(pool[1]), 1.0633f, 1.0633f * kBf16Epsilon + 1e-4f);
  // v = (5.5, 5): bias only, never rotated.
  EXPECT_EQ(Bf16ToFloat(pool[2]), 5.5f);
  EXPECT_EQ(Bf16ToFloat(pool[3]), 5.0f);

  // With the norms: q (1, 2) / rms 1.5811 = (0.6325, 1.2649); k (3, 4) / rms 3.5355 =
  // (0.8485, 1.1314) * (2, 0.5) = (1.6971, 0.5657); both then rotated by 2 rad.
  args.q_norm = q_norm.data();
  args.k_norm = k_norm.data();
  args.eps = 1e-6f;
  RopeKvWriteReference(args);
  const float c = std::cos(2.0f);
  const float s = std::sin(2.0f);
  EXPECT_NEAR(Bf16ToFloat(q_out[0]), 0.6325f * c - 1.2649f * s, 0.01f);
  EXPECT_NEAR(Bf16ToFloat(q_out[1]), 1.2649f * c + 0.6325f * s, 0.01f);
  EXPECT_NEAR(Bf16ToFloat(pool[0]), 1.6971f * c - 0.5657f * s, 0.01f);
  EXPECT_NEAR(Bf16ToFloat(pool[1]), 0.5657f * c + 1.6971f * s, 0.01f);
}

struct RopeCase {
  int num_heads;
  int kv_heads;
  int head_dim;
  int n;
  int block_size;
  bool bias;
  bool norm;
};

// The reference against the cpu backend's own steps (QkvPostprocess: bias, RmsNorm per head,
// RopeCosSin + ApplyRope, then the pool write), including skipped and out-of-pool slots.
void CheckAgainstCpuBackend(const RopeCase& c, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "heads=" << c.num_heads << " kv_heads=" << c.kv_heads
                                    << " head_dim=" << c.head_dim << " n=" << c.n << " block_size="
                                    << c.block_size << " bias=" << c.bias << " norm=" << c.norm);
  ModelConfig config;
  config.head_dim = c.head_dim;
  config.rope_theta = 500000.0f;
  const std::vector<float> inv_freq = RopeInvFreq(config);
  const int num_blocks = (c.n + c.block_size - 1) / c.block_size + 2;
  const KvLayout layout = MakeLayout(3, c.kv_heads, c.head_dim, c.block_size, num_blocks);
  const int layer = 2;
  const int total_heads = c.num_heads + 2 * c.kv_heads;
  const int width = total_heads * c.head_dim;
  const int64_t pool_slots = int64_t{num_blocks} * c.block_size;

  const std::vector<float> qkv = RandomUniform(size_t(c.n) * width, -2, 2, seed);
  const std::vector<Bf16Bits> bias = ToBf16(RandomUniform(width, -0.5f, 0.5f, seed + 1));
  const std::vector<Bf16Bits> q_norm = ToBf16(RandomUniform(c.head_dim, 0.5f, 1.5f, seed + 2));
  const std::vector<Bf16Bits> k_norm = ToBf16(RandomUniform(c.head_dim, 0.5f, 1.5f, seed + 3));
  std::vector<int32_t> positions(c.n);
  std::vector<int64_t> slots(c.n);
  for (int t = 0; t < c.n; ++t) {
    positions[t] = static_cast<int32_t>((int64_t{t} * 7919 + seed * 31) % 150000);
    // Distinct slots in a scrambled order; every 5th token skipped, every 7th past the pool.
    slots[t] = (int64_t{t} * 13 + 3) % pool_slots;
    if (t % 5 == 3) slots[t] = -1;
    if (t % 7 == 5) slots[t] = pool_slots + t;
  }
  ASSERT_EQ(std::gcd(int64_t{13}, pool_slots), 1);  // so the slots above are distinct

  std::vector<Bf16Bits> pool(layout.total_elements(), kUnwritten);
  std::vector<Bf16Bits> q_out(size_t(c.n) * c.num_heads * c.head_dim, kUnwritten);
  RopeKvWriteReferenceArgs args;
  args.qkv = qkv.data();
  args.qkv_bias = c.bias ? bias.data() : nullptr;
  args.q_norm = c.norm ? q_norm.data() : nullptr;
  args.k_norm = c.norm ? k_norm.data() : nullptr;
  args.eps = 1e-6f;
  args.inv_freq = inv_freq.data();
  args.positions = positions.data();
  args.slot_mapping = slots.data();
  args.n = c.n;
  args.num_heads = c.num_heads;
  args.layout = layout;
  args.layer = layer;
  args.kv_pool = pool.data();
  args.q_out = q_out.data();
  RopeKvWriteReference(args);

  const int half = c.head_dim / 2;
  const std::vector<float> q_norm_f32 = FromBf16(q_norm);
  const std::vector<float> k_norm_f32 = FromBf16(k_norm);
  std::vector<float> cos(half), sin(half), head(c.head_dim);
  std::vector<bool> written(pool.size(), false);
  for (int t = 0; t < c.n; ++t) {
    RopeCosSin(inv_freq, positions[t], cos.data(), sin.data());
    const bool write_kv = slots[t] >= 0 && slots[t] < pool_slots;
    for (int h = 0; h < total_heads; ++h) {
      const bool is_q = h < c.num_heads;
      const bool is_k = !is_q && h < c.num_heads + c.kv_heads;
      for (int i = 0; i < c.head_dim; ++i) {
        head[i] = qkv[int64_t{t} * width + h * c.head_dim + i];
        if (c.bias) head[i] += Bf16ToFloat(bias[h * c.head_dim + i]);
      }
      if ((is_q || is_k) && c.norm) {
        RmsNorm(head.data(), (is_q ? q_norm_f32 : k_norm_f32).data(), c.head_dim, 1e-6f,
                head.data());
      }
      if (is_q || is_k) ApplyRope(head.data(), cos.data(), sin.data(), half);
      const Bf16Bits* got;
      if (is_q) {
        got = q_out.data() + (int64_t{t} * c.num_heads + h) * c.head_dim;
      } else if (write_kv) {
        const int kv = is_k ? 0 : 1;
        const int64_t offset = layout.Offset(layer, kv, static_cast<int>(slots[t] / c.block_size),
                                             h - c.num_heads - kv * c.kv_heads,
                                             static_cast<int>(slots[t] % c.block_size));
        got = pool.data() + offset;
        for (int i = 0; i < c.head_dim; ++i) written[offset + i] = true;
      } else {
        continue;
      }
      for (int i = 0; i < c.head_dim; ++i) {
        const float g = Bf16ToFloat(got[i]);
        ASSERT_LE(std::fabs(g - head[i]), kBf16Epsilon * std::fabs(head[i]) + 1e-5f)
            << "token " << t << " head " << h << " dim " << i << ": got " << g << " want "
            << head[i];
      }
    }
  }
  for (size_t i = 0; i < pool.size(); ++i) {
    if (!written[i]) {
      ASSERT_EQ(pool[i], kUnwritten) << "pool element " << i << " was written";
    }
  }
}

TEST(RopeKvWriteReferenceTest, MatchesCpuBackendQkvPostprocess) {
  uint64_t seed = 1;
  for (const RopeCase& c :
       {RopeCase{4, 4, 64, 9, 16, false, false}, RopeCase{8, 2, 64, 20, 16, true, false},
        RopeCase{16, 2, 128, 33, 16, false, true}, RopeCase{8, 1, 128, 17, 5, true, true},
        RopeCase{2, 1, 6, 11, 3, true, true}}) {
    CheckAgainstCpuBackend(c, seed++);
  }
}

}  // namespace
}  // namespace tandem::kernels
