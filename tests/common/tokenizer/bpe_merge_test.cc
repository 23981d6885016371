// The two BPE merge loops (bpe_merge.h) against each other on random words and random merge
// tables, including tables where a merge uses a token that a later-ranked merge creates.
#include "common/tokenizer/bpe_merge.h"

#include <map>
#include <random>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;

class MergeTable {
 public:
  void Add(TokenId left, TokenId right, TokenId merged) {
    rules_.try_emplace({left, right}, BpeMergeRule{static_cast<int32_t>(rules_.size()), merged});
  }
  const BpeMergeRule* Find(TokenId left, TokenId right) const {
    auto it = rules_.find({left, right});
    return it == rules_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::pair<TokenId, TokenId>, BpeMergeRule> rules_;
};

std::vector<TokenId> Merge(const MergeTable& table, std::vector<TokenId> symbols, bool buckets) {
  auto lookup = [&table](TokenId l, TokenId r) { return table.Find(l, r); };
  if (buckets) {
    MergeWithRankBuckets(&symbols, lookup);
  } else {
    MergeWithPairHeap(&symbols, lookup);
  }
  return symbols;
}

TEST(BpeMergeTest, LowestRankFirstThenLeftmost) {
  MergeTable table;
  table.Add(0, 0, 10);    // a a -> aa
  table.Add(10, 10, 11);  // aa aa -> aaaa
  table.Add(1, 0, 12);    // b a -> ba
  for (bool buckets : {false, true}) {
    EXPECT_THAT(Merge(table, {0, 0, 0}, buckets), ElementsAre(10, 0));
    EXPECT_THAT(Merge(table, {0, 0, 0, 0}, buckets), ElementsAre(11));
    EXPECT_THAT(Merge(table, {1, 0, 0}, buckets), ElementsAre(1, 10));
    EXPECT_THAT(Merge(table, {1, 0}, buckets), ElementsAre(12));
    EXPECT_THAT(Merge(table, {}, buckets), ElementsAre());
    EXPECT_THAT(Merge(table, {1}, buckets), ElementsAre(1));
  }
}

TEST(BpeMergeTest, RankBucketsMatchThePairHeapOnRandomTables) {
  std::mt19937 rng(12345);
  for (int table_index = 0; table_index < 200; ++table_index) {
    // Tokens 0..3 are characters; each rule merges two existing tokens into a new one. Rules are
    // then shuffled a little, so some merges use a token before the merge creating it.
    const int alphabet = 2 + table_index % 3;
    std::vector<std::tuple<TokenId, TokenId, TokenId>> rules;
    TokenId next_id = alphabet;
    for (int r = 0; r < 30; ++r) {
      std::uniform_int_distribution<TokenId> pick(0, next_id - 1);
      rules.emplace_back(pick(rng), pick(rng), next_id++);
    }
    for (int swaps = 0; swaps < table_index % 10; ++swaps) {
      std::uniform_int_distribution<size_t> pick(0, rules.size() - 1);
      std::swap(rules[pick(rng)], rules[pick(rng)]);
    }
    MergeTable table;
    for (auto [l, r, m] : rules) table.Add(l, r, m);
    for (int word = 0; word < 30; ++word) {
      std::uniform_int_distribution<int> length(0, word % 3 == 0 ? 3000 : 60);
      std::uniform_int_distribution<TokenId> symbol(0, alphabet - 1);
      std::vector<TokenId> symbols(static_cast<size_t>(length(rng)));
      // Runs of one symbol as well as random mixes.
      const bool runs = word % 2 == 0;
      TokenId current = symbol(rng);
      for (TokenId& s : symbols) {
        if (!runs || rng() % 50 == 0) current = symbol(rng);
        s = current;
      }
      ASSERT_EQ(Merge(table, symbols, false), Merge(table, symbols, true))
          << "table " << table_index << ", word " << word << " of " << symbols.size();
    }
  }
}

}  // namespace
}  // namespace tandem
