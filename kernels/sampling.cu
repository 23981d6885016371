// Token sampling (kernels/sampling.h): one thread block per row, no sort of the vocabulary.
//
// Greedy is a block argmax (lowest index on ties). Top-k/top-p ranks tokens by a total order (the
// rank key of kernels/sampling_math.h: logit descending, then index ascending) and finds each cut
// as a threshold in that order by radix selection:
//   pass 0: the row's max logit, its argmax and its smallest finite logit;
//   top-k: a 256-bin histogram of the candidates' counts per pass; the first pass bins by the
//     logit's distance below the max (256 equal steps down to the smallest finite logit, so the
//     row spreads over the bins), the next passes by the rank key's bytes, high to low, among the
//     candidates of the chosen bin; it stops as soon as the whole chosen bin is kept (at most 9
//     passes, usually 2 or 3);
//   mass(K): a block sum of the kept tokens' fixed-point masses;
//   top-p: the same selection on a histogram of masses, until the bin where the prefix mass first
//     reaches top_p * mass(K) holds a single token;
//   the walk: the kept masses in index order, tile by tile, a block prefix sum per tile, until the
//     running mass exceeds u * mass(kept).
// Masses are integers (64-bit fixed point), so every sum is exact in any order and the token is
// the reference's (kernels/sampling_reference.cc) on every input, ties included.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sampling_launch.h"
#include "kernels/sampling_math.h"
#include "kernels/sampling_rng.h"

namespace tandem::kernels::internal {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr int kWalkItems = 8;  // consecutive tokens per thread in each walk tile
constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------------------------
// Block reductions and scans. Every thread of the block must call them (kThreads threads).

struct Best {
  float value;
  int32_t index;
};

__device__ __forceinline__ Best BetterOf(Best a, Best b) {
  return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

__device__ __forceinline__ Best WarpArgMax(Best best) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const Best other{__shfl_xor_sync(kFullMask, best.value, offset),
                     __shfl_xor_sync(kFullMask, best.index, offset)};
    best = BetterOf(best, other);
  }
  return best;
}

// The largest value and the lowest index holding it.
__device__ Best BlockArgMax(Best best) {
  __shared__ float values[kWarps];
  __shared__ int32_t indices[kWarps];
  __shared__ Best result;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  best = WarpArgMax(best);
  if (lane == 0) {
    values[warp] = best.value;
    indices[warp] = best.index;
  }
  __syncthreads();
  if (warp == 0) {
    Best partial = lane < kWarps ? Best{values[lane], indices[lane]} : Best{-INFINITY, INT32_MAX};
    partial = WarpArgMax(partial);
    if (lane == 0) result = partial;
  }
  __syncthreads();
  const Best out = result;
  __syncthreads();  // a later call may overwrite `result`
  return out;
}

__device__ float BlockMin(float value) {
  __shared__ float partials[kWarps];
  __shared__ float result;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value = fminf(value, __shfl_xor_sync(kFullMask, value, offset));
  }
  if (lane == 0) partials[warp] = value;
  __syncthreads();
  if (warp == 0) {
    float partial = lane < kWarps ? partials[lane] : INFINITY;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      partial = fminf(partial, __shfl_xor_sync(kFullMask, partial, offset));
    }
    if (lane == 0) result = partial;
  }
  __syncthreads();
  const float out = result;
  __syncthreads();
  return out;
}

__device__ __forceinline__ unsigned long long WarpInclusiveSum(unsigned long long value) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const unsigned long long other = __shfl_up_sync(kFullMask, value, offset);
    if (lane >= offset) value += other;
  }
  return value;
}

// Exclusive prefix sum in thread order; *total gets the sum over the block.
__device__ unsigned long long BlockExclusiveSum(unsigned long long value,
                                                unsigned long long* total) {
  __shared__ unsigned long long warp_offsets[kWarps];
  __shared__ unsigned long long block_total;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const unsigned long long inclusive = WarpInclusiveSum(value);
  if (lane == 31) warp_offsets[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const unsigned long long warp_sum = lane < kWarps ? warp_offsets[lane] : 0;
    const unsigned long long warp_inclusive = WarpInclusiveSum(warp_sum);
    if (lane < kWarps) warp_offsets[lane] = warp_inclusive - warp_sum;
    if (lane == 31) block_total = warp_inclusive;
  }
  __syncthreads();
  const unsigned long long out = warp_offsets[warp] + inclusive - value;
  *total = block_total;
  __syncthreads();
  return out;
}

__device__ unsigned long long BlockSum(unsigned long long value) {
  unsigned long long total;
  BlockExclusiveSum(value, &total);
  return total;
}

// ---------------------------------------------------------------------------------------------
// One row's ranking.

struct RowStats {
  float max_logit;
  float bucket_scale;  // 255 / (max - smallest finite logit), 0 when that is not positive
  float temperature;
  int shift;  // SamplingFixedShift(vocab)
};

// The first selection pass's bin: the logit's distance below the max in 256 equal steps. It never
// increases as the logit grows, so bins in increasing order follow the rank order (-inf: bin 255).
__device__ __forceinline__ int Bucket(float logit, const RowStats& stats) {
  const float steps = (stats.max_logit - logit) * stats.bucket_scale;
  return steps < 255.0f ? static_cast<int>(steps) : 255;  // NaN: 255
}

__device__ __forceinline__ uint64_t Mass(float logit, const RowStats& stats) {
  return SamplingFixedMass(SamplingWeight(logit, stats.max_logit, stats.temperature), stats.shift);
}

// A cut in the rank order: a token is at or above it when its bucket is lower, or the same and
// its rank key is at least `key`.
struct Threshold {
  int bucket;
  uint64_t key;
};
constexpr Threshold kEverything{kBins, 0};

__device__ __forceinline__ bool AtOrAbove(int bucket, uint64_t key, Threshold threshold) {
  return bucket < threshold.bucket || (bucket == threshold.bucket && key >= threshold.key);
}

enum class Goal {
  kCount,  // keep the `goal` best candidates
  kMass,   // keep the shortest run of best candidates whose mass reaches `goal`
};

// Warp 0 reads the histogram (position 0 = the best bin) and picks the bin where the goal is met.
// Updates the selection state in shared memory; lanes 1-31 only help with the scan.
template <Goal kGoal>
__device__ void ChooseBin(const unsigned* counts, const unsigned long long* masses, int step,
                          int* bucket, unsigned long long* prefix, unsigned long long* goal,
                          unsigned long long* mass_above, unsigned long long* selected_mass,
                          int* done) {
  constexpr int kPerLane = kBins / 32;
  const int lane = threadIdx.x % 32;
  const auto bin_at = [step](int position) { return step == 0 ? position : kBins - 1 - position; };
  // Count mode scans counts, mass mode scans masses (mass mode counts only tokens with mass > 0,
  // so its empty bins are exactly its zero-mass bins).
  const auto amount = [&](int position) -> unsigned long long {
    const int bin = bin_at(position);
    return kGoal == Goal::kCount ? counts[bin] : masses[bin];
  };
  // Count mode: the goal-th best candidate (goal >= 1). Mass mode: the first candidate where the
  // running mass reaches the goal, and at least the first candidate (goal 0 is taken as 1). Read
  // before the scan: the chosen lane writes *goal after it.
  const unsigned long long want = *goal > 0 ? *goal : 1;
  unsigned long long lane_sum = 0;
  for (int i = 0; i < kPerLane; ++i) lane_sum += amount(lane * kPerLane + i);
  const unsigned long long inclusive = WarpInclusiveSum(lane_sum);
  const unsigned long long exclusive = inclusive - lane_sum;
  if (exclusive < want && want <= inclusive) {
    unsigned long long before = exclusive;
    for (int i = 0; i < kPerLane; ++i) {
      const int position = lane * kPerLane + i;
      const unsigned long long here = amount(position);
      if (before + here >= want) {
        const int bin = bin_at(position);
        if (step == 0) {
          *bucket = bin;
        } else {
          *prefix |= static_cast<unsigned long long>(bin) << (64 - 8 * step);
        }
        if (kGoal == Goal::kCount) {
          *goal -= before;  // the rank within this bin
          *done = *goal == counts[bin];
        } else {
          *goal -= before < *goal ? before : *goal;
          *mass_above += before;
          *done = counts[bin] == 1;
          *selected_mass = *mass_above + masses[bin];
        }
        break;
      }
      before += here;
    }
  }
}

// Finds the cut, among the tokens at or above `within`, that keeps (kCount) the `goal` best ones,
// or (kMass) the shortest best-first run whose mass reaches `goal`, with *selected_mass its mass.
// The cut may also keep zero-mass tokens below the run in mass mode (they never get sampled).
// Preconditions: kCount: 1 <= goal <= number of candidates; kMass: goal <= candidates' mass and
// some candidate has mass > 0.
template <Goal kGoal>
__device__ Threshold RadixSelect(const float* __restrict__ row, int vocab, const RowStats& stats,
                                 Threshold within, unsigned long long goal,
                                 unsigned long long* selected_mass) {
  __shared__ unsigned counts[kBins];
  __shared__ unsigned long long masses[kBins];
  __shared__ int s_bucket;
  __shared__ unsigned long long s_prefix;
  __shared__ unsigned long long s_goal;
  __shared__ unsigned long long s_mass_above;
  __shared__ unsigned long long s_selected_mass;
  __shared__ int s_done;
  if (threadIdx.x == 0) {
    s_bucket = 0;
    s_prefix = 0;
    s_goal = goal;
    s_mass_above = 0;
    s_selected_mass = 0;
    s_done = 0;
  }
  unsigned long long mask = 0;  // the key bits decided so far
  for (int step = 0; step <= 8; ++step) {
    for (int bin = threadIdx.x; bin < kBins; bin += blockDim.x) {
      counts[bin] = 0;
      masses[bin] = 0;
    }
    __syncthreads();
    const int bucket = s_bucket;
    const unsigned long long prefix = s_prefix;
    const int digit_shift = 64 - 8 * step;  // steps 1..8: the key's bytes, high to low
    for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float logit = row[j];
      const int b = Bucket(logit, stats);
      const uint64_t key = SamplingKey(logit, j);
      if (!AtOrAbove(b, key, within)) continue;
      int bin = b;
      if (step > 0) {
        if (b != bucket || (key & mask) != prefix) continue;
        bin = static_cast<int>((key >> digit_shift) & 0xFF);
      }
      if (kGoal == Goal::kMass) {
        const uint64_t mass = Mass(logit, stats);
        if (mass == 0) continue;
        atomicAdd(&masses[bin], static_cast<unsigned long long>(mass));
      }
      atomicAdd(&counts[bin], 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      ChooseBin<kGoal>(counts, masses, step, &s_bucket, &s_prefix, &s_goal, &s_mass_above,
                       &s_selected_mass, &s_done);
    }
    __syncthreads();
    if (step > 0) mask |= 0xFFull << digit_shift;
    if (s_done) break;
  }
  const Threshold threshold{s_bucket, s_prefix};
  if (selected_mass != nullptr) *selected_mass = s_selected_mass;
  __syncthreads();  // a later call may reset the state
  return threshold;
}

// ---------------------------------------------------------------------------------------------
// Kernels.

struct RowSummary {
  Best best;         // the max logit and the lowest index holding it
  float min_finite;  // the smallest logit above -inf (+inf when none is)
};

__device__ RowSummary SummarizeRow(const float* __restrict__ row, int vocab) {
  Best best{-INFINITY, INT32_MAX};
  float min_finite = INFINITY;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float logit = row[j];
    best = BetterOf(best, Best{logit, j});
    if (logit > -INFINITY && logit < min_finite) min_finite = logit;
  }
  return RowSummary{BlockArgMax(best), BlockMin(min_finite)};
}

__global__ void __launch_bounds__(kThreads, 1)
    GreedySampleKernel(const float* __restrict__ logits, int vocab, int32_t* __restrict__ tokens) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  Best best{-INFINITY, INT32_MAX};
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) best = BetterOf(best, Best{row[j], j});
  best = BlockArgMax(best);
  if (threadIdx.x == 0) tokens[blockIdx.x] = best.index;
}

__global__ void __launch_bounds__(kThreads, 1)
    TopKTopPSampleKernel(const float* __restrict__ logits, int vocab,
                         const SamplingRowParams* __restrict__ params,
                         int32_t* __restrict__ tokens) {
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  const SamplingRowParams p = params[blockIdx.x];
  const RowSummary summary = SummarizeRow(row, vocab);
  // Greedy rows, and rows where no token has mass (every logit -inf: the reference keeps the best
  // token alone and falls back to it).
  if (!(p.temperature > 0.0f)) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = summary.best.index;
    return;
  }
  const float range = summary.best.value - summary.min_finite;
  const RowStats stats{summary.best.value, range > 0.0f ? 255.0f / range : 0.0f, p.temperature,
                       SamplingFixedShift(vocab)};

  Threshold top_k = kEverything;
  if (p.top_k > 0 && p.top_k < vocab) {
    top_k = RadixSelect<Goal::kCount>(row, vocab, stats, kEverything,
                                      static_cast<unsigned long long>(p.top_k), nullptr);
  }
  unsigned long long mass_k_part = 0;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float logit = row[j];
    if (AtOrAbove(Bucket(logit, stats), SamplingKey(logit, j), top_k)) {
      mass_k_part += Mass(logit, stats);
    }
  }
  const unsigned long long mass_k = BlockSum(mass_k_part);
  if (mass_k == 0) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = summary.best.index;
    return;
  }

  // top_p >= 1 keeps all of K: the reference's prefix may leave out K's zero-mass tail, but
  // zero-mass tokens are never sampled.
  Threshold top_p = kEverything;
  unsigned long long mass_kept = mass_k;
  if (!(p.top_p >= 1.0f)) {
    top_p = RadixSelect<Goal::kMass>(row, vocab, stats, top_k, SamplingTopPTarget(p.top_p, mass_k),
                                     &mass_kept);
  }

  // The walk: kept tokens in index order until the running mass exceeds the threshold.
  __shared__ int32_t s_token;
  if (threadIdx.x == 0) s_token = -1;
  const unsigned long long threshold =
      SamplingWalkThreshold(SamplingUniform(p.seed, p.counter), mass_kept);
  unsigned long long carry = 0;  // kept mass of the tiles before this one
  int32_t last_kept = -1;
  for (int64_t base = 0; base < vocab; base += int64_t{kThreads} * kWalkItems) {
    const int64_t first = base + int64_t{threadIdx.x} * kWalkItems;
    unsigned long long masses[kWalkItems];
    unsigned long long local = 0;
#pragma unroll
    for (int i = 0; i < kWalkItems; ++i) {
      masses[i] = 0;
      const int64_t j = first + i;
      if (j < vocab) {
        const float logit = row[j];
        const int b = Bucket(logit, stats);
        const uint64_t key = SamplingKey(logit, static_cast<int32_t>(j));
        if (AtOrAbove(b, key, top_k) && AtOrAbove(b, key, top_p)) {
          masses[i] = Mass(logit, stats);
          last_kept = static_cast<int32_t>(j);
        }
      }
      local += masses[i];
    }
    unsigned long long tile_mass;
    unsigned long long before = carry + BlockExclusiveSum(local, &tile_mass);
    if (before <= threshold && before + local > threshold) {  // exactly one thread
#pragma unroll
      for (int i = 0; i < kWalkItems; ++i) {
        if (before <= threshold && before + masses[i] > threshold) {
          s_token = static_cast<int32_t>(first + i);
        }
        before += masses[i];
      }
    }
    carry += tile_mass;
    if (carry > threshold) break;  // the same in every thread
  }
  __syncthreads();
  if (s_token >= 0) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = s_token;
    return;
  }
  // No token crossed (impossible for mass(kept) > 0, see SamplingWalkThreshold): the reference
  // returns the last kept token.
  __shared__ int32_t s_last_kept;
  if (threadIdx.x == 0) s_last_kept = -1;
  __syncthreads();
  atomicMax(&s_last_kept, last_kept);
  __syncthreads();
  if (threadIdx.x == 0) tokens[blockIdx.x] = s_last_kept;
}

}  // namespace

cudaError_t LaunchGreedySample(const float* logits, int rows, int vocab, int32_t* tokens,
                               cudaStream_t stream) {
  GreedySampleKernel<<<rows, kThreads, 0, stream>>>(logits, vocab, tokens);
  return cudaGetLastError();
}

cudaError_t LaunchTopKTopPSample(const float* logits, int rows, int vocab,
                                 const SamplingRowParams* params, int32_t* tokens,
                                 cudaStream_t stream) {
  TopKTopPSampleKernel<<<rows, kThreads, 0, stream>>>(logits, vocab, params, tokens);
  return cudaGetLastError();
}

}  // namespace tandem::kernels::internal
