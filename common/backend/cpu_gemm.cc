#include "common/backend/cpu_gemm.h"

#include <algorithm>
#include <cmath>

#include "common/backend/simd.h"

namespace tandem {
namespace {

using simd::kLanes;
using simd::Vec;

// Tokens per pass over a slice of weight rows: their activations stay in L2 while each group of
// weight rows, held in L1, meets every one of them.
constexpr int kTokenTile = 64;
// Micro-kernel: up to kMaxTokens tokens × up to 4 weight rows, one 8-lane accumulator each.
constexpr int kMaxTokens = 4;
// Weight rows per group for batches of 1-2 tokens (memory-bound: more rows, more loads in
// flight) and for more tokens (compute-bound: 4×3 accumulators + 3 weights + 1 token vector fill
// the 16 registers; measured ~80 GFLOP/s per core against ~60 for 4×2 and ~50 for 4×4).
constexpr int kRowsFewTokens = 4;
constexpr int kRowsManyTokens = 3;
// Threads split the weight rows in multiples of both group sizes.
constexpr int kSplitRows = 12;
// The first micro-kernel call on a group of weight rows prefetches, into L2, the group
// kPrefetchGroups ahead. The hardware prefetchers alone do not keep enough of the weight stream
// in flight once several tokens share each weight (more FMAs per byte, fewer loads in flight).
// Measured on a 2-core EPYC VM, one thread, 4 tokens: ~8 GB/s of weights without it, ~20 with
// it, ~30 with it and 2 MiB pages (AlignedFloats); prefetching into L1 (T0) brought nothing.
constexpr int kPrefetchGroups = 2;

inline void StoreResult(const GemmArgs& a, int t, int o, float v) {
  if (a.bias != nullptr) v += a.bias[o];
  float* dst = a.y + t * a.ldy + o;
  *dst = a.accumulate ? *dst + v : v;
}

// Output rows [t, t+TT) × columns [o, o+RR). Each dot product follows simd::Dot's order exactly.
// With kPrefetch, also prefetches the RR weight rows kPrefetchGroups groups ahead, if W has them.
template <int TT, int RR, bool kPrefetch>
void MicroKernel(const GemmArgs& a, int t, int o) {
  const int k = a.k;
  const int64_t ldx = a.ldx;
  const float* x = a.x + t * ldx;
  const float* w = a.w + int64_t{o} * k;
  const bool prefetch = kPrefetch && o + (kPrefetchGroups + 1) * RR <= a.n;
  const float* ahead = prefetch ? w + int64_t{kPrefetchGroups} * RR * k : w;
  Vec acc[TT][RR];
  for (int i = 0; i < TT; ++i) {
    for (int r = 0; r < RR; ++r) acc[i][r] = simd::VZero();
  }
  // One 8-float step of every dot product (each accumulator still sees j in increasing order).
  auto step = [&](int j) {
    Vec wv[RR];
    for (int r = 0; r < RR; ++r) wv[r] = simd::VLoad(w + r * k + j);
    for (int i = 0; i < TT; ++i) {
      Vec xv = simd::VLoad(x + i * ldx + j);
      for (int r = 0; r < RR; ++r) acc[i][r] = simd::VFma(xv, wv[r], acc[i][r]);
    }
  };
  int j = 0;
  // Two steps per iteration: one 64-byte line of each weight row, and one prefetch per line.
  for (; j + 2 * kLanes <= k; j += 2 * kLanes) {
#if TANDEM_CPU_AVX2
    if (kPrefetch && prefetch) {
      for (int r = 0; r < RR; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + r * k + j), _MM_HINT_T1);
      }
    }
#endif
    step(j);
    step(j + kLanes);
  }
  for (; j + kLanes <= k; j += kLanes) step(j);
  for (int i = 0; i < TT; ++i) {
    for (int r = 0; r < RR; ++r) {
      float s = simd::Hsum(acc[i][r]);
      for (int jj = j; jj < k; ++jj) s = std::fma(x[i * ldx + jj], w[r * k + jj], s);
      StoreResult(a, t + i, o + r, s);
    }
  }
}

using MicroFn = void (*)(const GemmArgs&, int, int);

template <int TT, bool kPrefetch>
constexpr MicroFn RowsTable(int rr) {
  switch (rr) {
    case 1:
      return &MicroKernel<TT, 1, kPrefetch>;
    case 2:
      return &MicroKernel<TT, 2, kPrefetch>;
    case 3:
      return &MicroKernel<TT, 3, kPrefetch>;
    default:
      return &MicroKernel<TT, 4, kPrefetch>;
  }
}

template <bool kPrefetch>
MicroFn PickKernel(int tt, int rr) {
  switch (tt) {
    case 1:
      return RowsTable<1, kPrefetch>(rr);
    case 2:
      return RowsTable<2, kPrefetch>(rr);
    case 3:
      return RowsTable<3, kPrefetch>(rr);
    default:
      return RowsTable<4, kPrefetch>(rr);
  }
}

}  // namespace

void GemmColumns(const GemmArgs& a, int n_begin, int n_end) {
  const int rows_per_group = a.rows <= 2 ? kRowsFewTokens : kRowsManyTokens;
  for (int t0 = 0; t0 < a.rows; t0 += kTokenTile) {
    const int t1 = std::min(a.rows, t0 + kTokenTile);
    for (int o = n_begin; o < n_end; o += rows_per_group) {
      const int rr = std::min(rows_per_group, n_end - o);
      const int first = std::min(kMaxTokens, t1 - t0);
      PickKernel<true>(first, rr)(a, t0, o);
      int t = t0 + first;
      MicroFn full = PickKernel<false>(kMaxTokens, rr);
      for (; t + kMaxTokens <= t1; t += kMaxTokens) full(a, t, o);
      if (t < t1) PickKernel<false>(t1 - t, rr)(a, t, o);
    }
  }
}

void Gemm(const GemmArgs& a, ThreadPool& pool) {
  if (a.rows <= 0 || a.n <= 0) return;
  const int64_t chunks = (a.n + kSplitRows - 1) / kSplitRows;
  pool.ParallelFor(chunks, [&](int64_t begin, int64_t end) {
    GemmColumns(a, static_cast<int>(begin * kSplitRows),
                static_cast<int>(std::min<int64_t>(a.n, end * kSplitRows)));
  });
}

}  // namespace tandem
