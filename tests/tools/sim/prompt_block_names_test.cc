#include "tools/sim/prompt_block_names.h"

#include <numeric>
#include <vector>

#include "common/kv/block_hash.h"
#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

TEST(PromptBlockNamesTest, ExtendsToTheChainOfTheUsableBlocks) {
  // 50 tokens in blocks of 2: 24 usable blocks (the 25th ends on the last token).
  std::vector<TokenId> tokens(50);
  std::iota(tokens.begin(), tokens.end(), 7);
  const std::vector<uint64_t> all = HashFullBlocks(tokens, 2);
  PromptBlockNames names(tokens, 2);
  EXPECT_TRUE(names.names().empty());
  EXPECT_FALSE(names.complete());
  std::vector<size_t> sizes;
  while (!names.complete()) {
    names.Extend();
    sizes.push_back(names.names().size());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{8, 16, 24}));
  ASSERT_EQ(names.names().size(), 24u);
  for (size_t i = 0; i < 24; ++i) EXPECT_EQ(names.names()[i], all[i]) << i;
}

TEST(PromptBlockNamesTest, APromptWithNoUsableBlockIsComplete) {
  const std::vector<TokenId> one_block = {1, 2, 3, 4};  // its only block ends on the last token
  EXPECT_TRUE(PromptBlockNames(one_block, 4).complete());
  EXPECT_TRUE(PromptBlockNames(std::vector<TokenId>{}, 4).complete());
}

}  // namespace
}  // namespace tandem::sim
