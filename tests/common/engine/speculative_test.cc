#include "common/engine/speculative.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(ProposeByNgramTest, CopiesWhatFollowedTheLatestEarlierOccurrenceOfTheLongestSuffix) {
  // The suffix [7 8] occurs at 1 (then 9 4) and at 5 (then 5 6): the latest wins.
  const std::vector<TokenId> context = {3, 7, 8, 9, 4, 7, 8, 5, 6, 1, 7, 8};
  EXPECT_THAT(ProposeByNgram(context, 1, 4, 2), ElementsAre(5, 6));
  // A longer suffix that recurs wins over a later occurrence of a shorter one: [1 7 8] recurs at
  // 0 (then 2 2 7), [7 8] at 5 (then 3 1 7).
  const std::vector<TokenId> longer = {1, 7, 8, 2, 2, 7, 8, 3, 1, 7, 8};
  EXPECT_THAT(ProposeByNgram(longer, 1, 3, 3), ElementsAre(2, 2, 7));
}

TEST(ProposeByNgramTest, TheCopyRunsOnPastTheEndOfTheContextUpToMaxDrafts) {
  const std::vector<TokenId> context = {5, 6, 5};  // [5] recurs at 0: period 2
  EXPECT_THAT(ProposeByNgram(context, 1, 2, 5), ElementsAre(6, 5, 6, 5, 6));
  EXPECT_THAT(ProposeByNgram(context, 1, 2, 1), ElementsAre(6));
  EXPECT_THAT(ProposeByNgram(context, 1, 2, 0), IsEmpty());
  const std::vector<TokenId> loop = {1, 2, 9, 9, 9, 9};  // [9 9 9] recurs one token back
  EXPECT_THAT(ProposeByNgram(loop, 1, 3, 4), ElementsAre(9, 9, 9, 9));
}

TEST(ProposeByNgramTest, NothingWhenNoSuffixOfTheMinimumSizeRecurs) {
  const std::vector<TokenId> context = {1, 2, 3, 4, 2, 9};
  EXPECT_THAT(ProposeByNgram(context, 1, 3, 4), IsEmpty());  // 9 never occurred before
  const std::vector<TokenId> pair = {1, 2, 3, 1, 2, 4, 2};
  EXPECT_THAT(ProposeByNgram(pair, 1, 3, 2), ElementsAre(4, 2));  // [2] last at index 4
  EXPECT_THAT(ProposeByNgram(pair, 2, 3, 2), IsEmpty());          // [4 2] never occurred
  EXPECT_THAT(ProposeByNgram(std::vector<TokenId>{}, 1, 3, 2), IsEmpty());
  EXPECT_THAT(ProposeByNgram(std::vector<TokenId>{4}, 1, 3, 2), IsEmpty());
}

TEST(AcceptedDraftsTest, TheLongestPrefixThatMatchesTheTargetsTokens) {
  const std::vector<TokenId> drafts = {4, 5, 6};
  EXPECT_EQ(AcceptedDrafts(drafts, std::vector<TokenId>{4, 5, 6, 7}), 3);
  EXPECT_EQ(AcceptedDrafts(drafts, std::vector<TokenId>{4, 5, 9, 7}), 2);
  EXPECT_EQ(AcceptedDrafts(drafts, std::vector<TokenId>{1, 5, 6, 7}), 0);
}

TEST(SpeculativeOptionsTest, ChecksItsNumbersAndNamesTheMethods) {
  SpeculativeOptions options;
  EXPECT_TRUE(options.Validate().ok());  // off
  options.method = SpeculativeMethod::kNgram;
  EXPECT_TRUE(options.Validate().ok());
  options.num_speculative_tokens = 0;
  EXPECT_FALSE(options.Validate().ok());
  options.num_speculative_tokens = kMaxSpeculativeTokens + 1;
  EXPECT_FALSE(options.Validate().ok());
  options.num_speculative_tokens = 4;
  options.ngram_min = 3;
  options.ngram_max = 2;
  EXPECT_FALSE(options.Validate().ok());
  EXPECT_EQ(*ParseSpeculativeMethod("ngram"), SpeculativeMethod::kNgram);
  EXPECT_EQ(*ParseSpeculativeMethod("none"), SpeculativeMethod::kNone);
  EXPECT_THAT(ParseSpeculativeMethod("eagle").status().message(),
              ::testing::HasSubstr("have: none, ngram"));
  EXPECT_EQ(SpeculativeMethodName(SpeculativeMethod::kNgram), "ngram");
}

}  // namespace
}  // namespace tandem
