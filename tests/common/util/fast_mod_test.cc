#include "common/util/fast_mod.h"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// Every remainder equals %'s: small, odd, power-of-two, 32-bit-edge and 64-bit divisors, against
// random 64-bit numerators and the edges (0, d - 1, d, multiples, UINT64_MAX).
TEST(FastModTest, EqualsTheRemainderOperator) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  const std::vector<uint64_t> divisors = {1,
                                          2,
                                          3,
                                          7,
                                          10,
                                          1024,
                                          30000,
                                          127999,
                                          (1ull << 31) - 1,
                                          1ull << 32,
                                          (1ull << 32) + 1,
                                          0x9e3779b97f4a7c15ull,
                                          max - 1,
                                          max};
  std::mt19937_64 rng(7);
  for (uint64_t d : divisors) {
    const FastMod mod(d);
    ASSERT_EQ(mod.divisor(), d);
    std::vector<uint64_t> xs = {0, 1, d - 1, d, d + 1, 2 * d, max, max - 1, max / d * d};
    for (int i = 0; i < 20000; ++i) xs.push_back(rng());
    for (uint64_t x : xs) ASSERT_EQ(mod(x), x % d) << x << " % " << d;
  }
}

}  // namespace
}  // namespace tandem
