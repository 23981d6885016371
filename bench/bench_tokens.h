// Token helpers the backend benches share: a seeded stream of token ids, and greedy sampling.
#ifndef TANDEM_BENCH_BENCH_TOKENS_H_
#define TANDEM_BENCH_BENCH_TOKENS_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "common/types/dtype.h"

namespace tandem {

// `n` token ids below `vocab` from an xorshift stream seeded by `seed` (the same for a seed).
inline std::vector<TokenId> RandomTokens(int n, int vocab, uint64_t seed) {
  std::vector<TokenId> out(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (TokenId& t : out) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    t = static_cast<TokenId>(s % static_cast<uint64_t>(vocab));
  }
  return out;
}

// The index of the largest logit (the first of equal ones).
inline TokenId Argmax(std::span<const float> logits) {
  return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace tandem

#endif  // TANDEM_BENCH_BENCH_TOKENS_H_
