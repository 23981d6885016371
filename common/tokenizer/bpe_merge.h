// The merge loop of byte-pair encoding: given a word's initial symbols, repeatedly merges the
// adjacent pair with the lowest merge rank, the leftmost one among equal ranks (Hugging Face's
// order), until no adjacent pair has a merge.
//
// Two implementations with identical results. Both keep candidate pairs (rank, position) in
// a priority order and skip candidates made stale by earlier merges:
//   - MergeWithPairHeap: one binary heap of every candidate. Cheapest for short words.
//   - MergeWithRankBuckets: candidates grouped by rank (positions of a rank arrive mostly in
//     ascending order, so each group is a sorted run plus a small heap for stragglers) and a
//     heap over the ranks present. A long word of few distinct pairs (8 MiB of spaces) costs
//     O(1) per merge instead of O(log n): this is what keeps huge prompts cheap.
#ifndef TANDEM_COMMON_TOKENIZER_BPE_MERGE_H_
#define TANDEM_COMMON_TOKENIZER_BPE_MERGE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "common/types/dtype.h"

namespace tandem {

struct BpeMergeRule {
  int32_t rank;    // position in the merges list; lower merges first
  TokenId merged;  // the token the pair becomes
};

// The rule for the adjacent pair (left, right), or nullptr when the pair does not merge.
using BpeMergeLookup = absl::FunctionRef<const BpeMergeRule*(TokenId left, TokenId right)>;

void MergeWithPairHeap(std::vector<TokenId>* symbols, BpeMergeLookup lookup);
void MergeWithRankBuckets(std::vector<TokenId>* symbols, BpeMergeLookup lookup);

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_BPE_MERGE_H_
