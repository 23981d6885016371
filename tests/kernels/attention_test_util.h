// Test inputs for the attention kernels and their references: a paged KV pool of random values
// (bf16, or fp8 E4M3 codes with a power-of-two scale per (layer, K|V, kv head)) with each
// sequence's blocks scattered at random through the pool, and random bf16 queries. Pure C++ (used
// by the reference tests, which build without CUDA, and by the GPU tests).
#ifndef TANDEM_TESTS_KERNELS_ATTENTION_TEST_UTIL_H_
#define TANDEM_TESTS_KERNELS_ATTENTION_TEST_UTIL_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/kv/kv_layout.h"
#include "common/util/fp8.h"
#include "gtest/gtest.h"
#include "kernels/bf16_reference.h"

namespace tandem::kernels::testing {

struct PagedKv {
  KvLayout layout;
  std::vector<Bf16Bits> pool;         // bf16: layout.total_elements() values
  std::vector<uint8_t> pool_fp8;      // fp8: layout.total_elements() E4M3 codes
  std::vector<float> scales;          // fp8: [num_layers][2][num_kv_heads]
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq]; unused entries are -1
  int max_blocks_per_seq = 0;

  bool fp8() const { return layout.dtype == DType::kFP8E4M3; }
  const void* PoolData() const {
    return fp8() ? static_cast<const void*>(pool_fp8.data()) : pool.data();
  }
  const float* ScalesData() const { return fp8() ? scales.data() : nullptr; }
  // The scale of pool element e (fp8).
  float ScaleOf(int64_t e) const {
    const int64_t layer = e / layout.layer_stride();
    const int64_t kv = e % layout.layer_stride() / layout.kv_stride();
    const int64_t head = e % layout.block_stride() / layout.head_stride();
    return scales[(layer * 2 + kv) * layout.num_kv_heads + head];
  }
  std::vector<float> PoolAsFloat() const {
    if (!fp8()) return FromBf16(pool);
    std::vector<float> values(pool_fp8.size());
    const std::array<float, 256>& code_values = Fp8E4M3Values();
    for (size_t e = 0; e < values.size(); ++e) {
      values[e] = code_values[pool_fp8[e]] * ScaleOf(static_cast<int64_t>(e));
    }
    return values;
  }
  // The largest |value| in the pool (the bound the GPU tests scale absolute errors by).
  float ValueBound() const {
    float bound = 0.0f;
    for (float v : PoolAsFloat()) bound = std::max(bound, std::abs(v));
    return bound;
  }
  const int32_t* BlockTable(int seq) const {
    return block_tables.data() + int64_t{seq} * max_blocks_per_seq;
  }
};

// A pool of `num_layers` layers with values uniform in [-1, 1), and one block table per
// sequence covering capacities[s] tokens, made of distinct blocks in random order (plus
// `spare_blocks` blocks no table uses). max_blocks_per_seq is at least `min_blocks_per_seq`.
// kFP8E4M3: each value stored as the E4M3 code of value / scale, the scales 1/32 .. 1/256 by
// (layer, K|V, kv head), so that heads differ as a model's do.
inline PagedKv MakePagedKv(int num_layers, int num_kv_heads, int head_dim, int block_size,
                           const std::vector<int>& capacities, uint64_t seed, int spare_blocks = 3,
                           int min_blocks_per_seq = 1, DType dtype = DType::kBF16) {
  PagedKv kv;
  int total_blocks = spare_blocks;
  int max_blocks = min_blocks_per_seq;
  for (int capacity : capacities) {
    const int blocks = (capacity + block_size - 1) / block_size;
    total_blocks += blocks;
    max_blocks = std::max(max_blocks, blocks);
  }
  kv.layout = KvLayout{.dtype = dtype,
                       .num_layers = num_layers,
                       .num_kv_heads = num_kv_heads,
                       .head_dim = head_dim,
                       .block_size = block_size,
                       .num_blocks = total_blocks};
  kv.max_blocks_per_seq = max_blocks;
  const std::vector<float> values = RandomUniform(kv.layout.total_elements(), -1.0f, 1.0f, seed);
  if (dtype == DType::kFP8E4M3) {
    kv.scales.resize(size_t{2} * num_layers * num_kv_heads);
    for (size_t i = 0; i < kv.scales.size(); ++i) {
      kv.scales[i] = std::ldexp(1.0f, -5 - static_cast<int>(i % 4));
    }
    kv.pool_fp8.resize(values.size());
    for (size_t e = 0; e < values.size(); ++e) {
      kv.pool_fp8[e] = F32ToFp8E4M3(values[e] / kv.ScaleOf(static_cast<int64_t>(e)));
    }
  } else {
    kv.pool = ToBf16(values);
  }

  std::vector<int32_t> order(total_blocks);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed ^ 0x5eedb10c5ull);
  std::shuffle(order.begin(), order.end(), rng);
  kv.block_tables.assign(capacities.size() * max_blocks, -1);
  size_t next = 0;
  for (size_t s = 0; s < capacities.size(); ++s) {
    const int blocks = (capacities[s] + block_size - 1) / block_size;
    for (int b = 0; b < blocks; ++b) kv.block_tables[s * max_blocks + b] = order[next++];
  }
  return kv;
}

// `n` random bf16 values uniform in [-range, range).
inline std::vector<Bf16Bits> RandomBf16(size_t n, float range, uint64_t seed) {
  return ToBf16(RandomUniform(n, -range, range, seed));
}

// Largest |value| of a bf16 vector (the bound the GPU tests scale absolute errors by).
inline float MaxAbs(const std::vector<Bf16Bits>& values) {
  float max = 0.0f;
  for (Bf16Bits v : values) max = std::max(max, std::abs(Bf16ToFloat(v)));
  return max;
}

// The bits of a bf16 NaN: what testing::Poisoned<Bf16Bits>() fills device memory with, and what
// host outputs start as so that rows no one writes are recognizable.
inline constexpr Bf16Bits kPoisonBf16 = 0xFFFF;

// Kernel output `got` against the reference output `want` (both [rows, num_heads * head_dim],
// `want` starting as kPoisonBf16): elements the reference left poisoned must still be poisoned
// (nothing written outside the item rows); every other element must be within bf16 bounds,
// |got - want| <= 1e-2 |want| + 4e-3 value_bound, where value_bound is max |V|.
inline void ExpectAttentionNear(const std::vector<Bf16Bits>& got, const std::vector<Bf16Bits>& want,
                                float value_bound, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float max_error = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == kPoisonBf16) {
      ASSERT_EQ(got[i], kPoisonBf16) << what << ": element " << i << " is no query's, was written";
      continue;
    }
    const float g = Bf16ToFloat(got[i]);
    const float w = Bf16ToFloat(want[i]);
    const float error = std::fabs(g - w);
    ASSERT_LE(error, 1e-2f * std::fabs(w) + 4e-3f * value_bound)
        << what << ": element " << i << " got " << g << " want " << w;
    max_error = std::max(max_error, error);
  }
  std::cout << "[          ] " << what << ": max abs error " << max_error << "\n";
}

}  // namespace tandem::kernels::testing

#endif  // TANDEM_TESTS_KERNELS_ATTENTION_TEST_UTIL_H_
