// The per-request random source for sampling.
//
// Counter-based: draw k of a request is a pure function of (seed, k), so a seeded request gives
// the same tokens whatever else is in its batch, whichever thread samples it, and across
// preemption (a preempted request keeps its counter; already drawn tokens are never redrawn).
#ifndef TANDEM_COMMON_SAMPLING_RNG_H_
#define TANDEM_COMMON_SAMPLING_RNG_H_

#include <cstdint>

namespace tandem {

class SamplingRng {
 public:
  explicit SamplingRng(uint64_t seed = 0);

  // The next 64 random bits.
  uint64_t NextU64();
  // Uniform in [0, 1), 53 random bits.
  double NextUniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  uint64_t seed() const { return seed_; }
  // Draws taken so far.
  uint64_t counter() const { return counter_; }
  // Continues a stream another process started (a decode node after the prefill node's draws).
  void set_counter(uint64_t counter) { counter_ = counter; }

 private:
  uint64_t seed_;
  uint64_t key_;  // the seed, scrambled so that nearby seeds give unrelated streams
  uint64_t counter_ = 0;
};

// A seed for a request that did not ask for one: from std::random_device once per process, then
// a thread-safe sequence of scrambled values.
uint64_t RandomSeed();

}  // namespace tandem

#endif  // TANDEM_COMMON_SAMPLING_RNG_H_
