#include "common/sampling/rng.h"

#include <atomic>
#include <random>

namespace tandem {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// The SplitMix64 finalizer: a bijective 64-bit mixer.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

SamplingRng::SamplingRng(uint64_t seed) : seed_(seed), key_(Mix64(seed ^ 0x73616d706c657273ULL)) {}

uint64_t SamplingRng::NextU64() {
  ++counter_;
  return Mix64(key_ + counter_ * kGolden);
}

uint64_t RandomSeed() {
  static std::atomic<uint64_t> state = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ uint64_t { rd() };
  }();
  return Mix64(state.fetch_add(kGolden, std::memory_order_relaxed));
}

}  // namespace tandem
