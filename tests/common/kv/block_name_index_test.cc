#include "common/kv/block_name_index.h"

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// The caller's record of each block's name, as BlockManager keeps it.
struct Names {
  std::vector<uint64_t> of;
  explicit Names(int32_t n) : of(n, 0) {}
  auto Fn() const {
    return [this](int32_t block) { return of[block]; };
  }
};

TEST(BlockNameIndexTest, FindsWhatWasInsertedAndNothingElse) {
  BlockNameIndex index(8);
  Names names(8);
  names.of[3] = 0xabcdef0123456789ULL;
  EXPECT_EQ(index.Find(names.of[3], names.Fn()), -1);
  EXPECT_TRUE(index.Insert(names.of[3], 3, names.Fn()));
  EXPECT_EQ(index.size(), 1);
  EXPECT_EQ(index.Find(names.of[3], names.Fn()), 3);
  EXPECT_EQ(index.Find(0x1234ULL, names.Fn()), -1);
  index.Erase(names.of[3], 3);
  EXPECT_EQ(index.size(), 0);
  EXPECT_EQ(index.Find(names.of[3], names.Fn()), -1);
}

TEST(BlockNameIndexTest, RefusesANameAlreadyThere) {
  BlockNameIndex index(4);
  Names names(4);
  names.of[0] = names.of[1] = 42;
  EXPECT_TRUE(index.Insert(42, 0, names.Fn()));
  EXPECT_FALSE(index.Insert(42, 1, names.Fn()));
  EXPECT_EQ(index.size(), 1);
  EXPECT_EQ(index.Find(42, names.Fn()), 0);
}

TEST(BlockNameIndexTest, NamesDifferingOnlyInTheirLowBitsAreToldApart) {
  // The slot keeps the high bits; the low ones hold the block, so the full name decides.
  BlockNameIndex index(8);
  Names names(8);
  const uint64_t high = 0x5555000000000000ULL;
  for (int32_t b = 0; b < 8; ++b) {
    names.of[b] = high | static_cast<uint64_t>(7 - b);
    ASSERT_TRUE(index.Insert(names.of[b], b, names.Fn()));
  }
  for (int32_t b = 0; b < 8; ++b) EXPECT_EQ(index.Find(names.of[b], names.Fn()), b);
  EXPECT_EQ(index.Find(high | 8, names.Fn()), -1);
}

TEST(BlockNameIndexTest, EraseKeepsTheOthersFindableAndIgnoresUnknownEntries) {
  BlockNameIndex index(4);
  Names names(4);
  // One home for all (small names: the high bits are 0), so they form one run of slots.
  for (int32_t b = 0; b < 4; ++b) {
    names.of[b] = static_cast<uint64_t>(b);
    ASSERT_TRUE(index.Insert(names.of[b], b, names.Fn()));
  }
  index.Erase(names.of[1], 1);
  index.Erase(names.of[1], 1);        // gone already
  index.Erase(uint64_t{1} << 63, 3);  // block 3 is not in under that name
  EXPECT_EQ(index.size(), 3);
  EXPECT_EQ(index.Find(names.of[0], names.Fn()), 0);
  EXPECT_EQ(index.Find(names.of[1], names.Fn()), -1);
  EXPECT_EQ(index.Find(names.of[2], names.Fn()), 2);
  EXPECT_EQ(index.Find(names.of[3], names.Fn()), 3);
}

// Random inserts and erases against a std::map, with names crowded onto few homes (runs that wrap
// around the table's end, long backward shifts).
TEST(BlockNameIndexTest, MatchesAMapUnderChurn) {
  for (uint64_t spread : {uint64_t{1}, uint64_t{3}, uint64_t{64}, ~uint64_t{0}}) {
    constexpr int32_t kBlocks = 40;
    BlockNameIndex index(kBlocks);
    Names names(kBlocks);
    std::map<uint64_t, int32_t> model;
    std::vector<bool> named(kBlocks, false);
    std::mt19937_64 rng(spread);
    for (int step = 0; step < 20000; ++step) {
      const int32_t block = static_cast<int32_t>(rng() % kBlocks);
      if (named[block]) {
        index.Erase(names.of[block], block);
        model.erase(names.of[block]);
        named[block] = false;
      } else {
        // High bits from a few values (crowded homes), low bits random.
        const uint64_t name = ((rng() % spread) << 58) ^ (rng() >> 8);
        names.of[block] = name;
        const bool inserted = index.Insert(name, block, names.Fn());
        ASSERT_EQ(inserted, !model.contains(name));
        if (inserted) {
          model[name] = block;
          named[block] = true;
        }
      }
      ASSERT_EQ(index.size(), static_cast<int32_t>(model.size()));
      if (step % 97 == 0) {
        for (int32_t b = 0; b < kBlocks; ++b) {
          const auto it = model.find(names.of[b]);
          ASSERT_EQ(index.Find(names.of[b], names.Fn()), it == model.end() ? -1 : it->second)
              << "step " << step << " block " << b;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem
