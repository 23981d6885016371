// The uniform number a sampled token is drawn with: a pure function of (seed, counter), the same on
// the host and the device, so a GPU sampler and its CPU reference pick the same token from the same
// distribution, and a request continues its random stream on another node from `counter`.
#ifndef TANDEM_KERNELS_SAMPLING_RNG_H_
#define TANDEM_KERNELS_SAMPLING_RNG_H_

#include <cstdint>

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

namespace tandem::kernels {

// splitmix64 of the two words mixed; the top 24 bits as a float in [0, 1).
TANDEM_HOST_DEVICE inline float SamplingUniform(uint64_t seed, uint64_t counter) {
  uint64_t z = seed ^ (counter * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_SAMPLING_RNG_H_
