// CPU reference of kernels/sampling.h, written straight from its definition: a full sort of the
// vocabulary by rank key, then the top-k prefix, the top-p prefix and the walk in index order, with
// the arithmetic of kernels/sampling_math.h.
#include "kernels/sampling_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/sampling_math.h"
#include "kernels/sampling_rng.h"

namespace tandem::kernels {

int32_t GreedySampleReference(const float* logits, int vocab) {
  int32_t best = 0;
  for (int32_t j = 1; j < vocab; ++j) {
    if (logits[j] > logits[best]) best = j;
  }
  return best;
}

int32_t TopKTopPSampleReference(const float* logits, int vocab, const SamplingRowParams& params) {
  if (!(params.temperature > 0.0f)) return GreedySampleReference(logits, vocab);

  float max_logit = -INFINITY;
  for (int32_t j = 0; j < vocab; ++j) max_logit = std::max(max_logit, logits[j]);
  const int shift = SamplingFixedShift(vocab);
  std::vector<uint64_t> mass(vocab);
  for (int32_t j = 0; j < vocab; ++j) {
    mass[j] = SamplingFixedMass(SamplingWeight(logits[j], max_logit, params.temperature), shift);
  }

  // The ranking: logit descending, lower index first among equal logits.
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [logits](int32_t a, int32_t b) {
    return SamplingKey(logits[a], a) > SamplingKey(logits[b], b);
  });

  const int k = params.top_k > 0 && params.top_k < vocab ? params.top_k : vocab;
  uint64_t mass_k = 0;
  for (int i = 0; i < k; ++i) mass_k += mass[order[i]];

  // The shortest prefix of the ranking whose mass reaches the target, at least one token.
  const uint64_t target = SamplingTopPTarget(params.top_p, mass_k);
  int kept = 0;
  uint64_t mass_kept = 0;
  while (kept < k) {
    mass_kept += mass[order[kept]];
    ++kept;
    if (mass_kept >= target) break;
  }
  std::vector<bool> is_kept(vocab, false);
  for (int i = 0; i < kept; ++i) is_kept[order[i]] = true;

  // The walk in index order.
  const float u = SamplingUniform(params.seed, params.counter);
  const uint64_t threshold = SamplingWalkThreshold(u, mass_kept);
  uint64_t running = 0;
  int32_t last_kept = order[0];
  for (int32_t j = 0; j < vocab; ++j) {
    if (!is_kept[j]) continue;
    running += mass[j];
    last_kept = j;
    if (running > threshold) return j;
  }
  return last_kept;
}

}  // namespace tandem::kernels
