#include "common/kv/free_block_queue.h"

#include <algorithm>
#include <list>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(FreeBlockQueueTest, OldestFirstAndRemovedBlocksSkipped) {
  FreeBlockQueue q(5);
  for (int32_t b : {3, 1, 4, 0}) q.PushBack(b);
  EXPECT_EQ(q.size(), 4);
  EXPECT_TRUE(q.contains(1));
  EXPECT_FALSE(q.contains(2));
  q.Remove(1);
  EXPECT_FALSE(q.contains(1));
  EXPECT_EQ(q.size(), 3);
  q.PushBack(1);  // back in, now the newest
  EXPECT_EQ(q.PopFront(), 3);
  EXPECT_EQ(q.PopFront(), 4);
  EXPECT_EQ(q.PopFront(), 0);
  EXPECT_EQ(q.PopFront(), 1);
  EXPECT_EQ(q.size(), 0);
}

// Against a std::list under churn with many removals between pops (the ring fills with skipped
// entries and is squeezed).
TEST(FreeBlockQueueTest, MatchesAListUnderChurn) {
  for (int removal_weight : {1, 5, 20}) {
    constexpr int32_t kBlocks = 16;
    FreeBlockQueue q(kBlocks);
    std::list<int32_t> model;
    std::mt19937_64 rng(removal_weight);
    std::vector<bool> in(kBlocks, false);
    for (int step = 0; step < 50000; ++step) {
      const int32_t block = static_cast<int32_t>(rng() % kBlocks);
      const int op = static_cast<int>(rng() % (2 + removal_weight));
      if (!in[block]) {
        q.PushBack(block);
        model.push_back(block);
        in[block] = true;
      } else if (op == 0 && !model.empty()) {
        const int32_t front = q.PopFront();
        ASSERT_EQ(front, model.front()) << "step " << step;
        model.pop_front();
        in[front] = false;
      } else {
        q.Remove(block);
        model.erase(std::find(model.begin(), model.end(), block));
        in[block] = false;
      }
      ASSERT_EQ(q.size(), static_cast<int32_t>(model.size()));
    }
    while (!model.empty()) {
      ASSERT_EQ(q.PopFront(), model.front());
      model.pop_front();
    }
  }
}

}  // namespace
}  // namespace tandem
