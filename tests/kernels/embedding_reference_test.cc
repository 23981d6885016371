#include "kernels/embedding_reference.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::kernels {
namespace {

TEST(EmbeddingGatherReferenceTest, WidensRowsAndZeroesOutOfRangeIds) {
  // vocab 3, hidden 2: row v holds (v + 1, -(v + 1) / 2).
  const std::vector<Bf16Bits> table = ToBf16(std::vector<float>{1, -0.5f, 2, -1, 3, -1.5f});
  const std::vector<int32_t> ids = {
      2, 0, -1, 3, 1, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 2};
  std::vector<float> x(ids.size() * 2, 42.0f);
  EmbeddingGatherReference(table.data(), 3, 2, ids.data(), static_cast<int>(ids.size()), x.data());
  const std::vector<float> want = {3, -1.5f, 1, -0.5f, 0, 0, 0, 0, 2, -1, 0, 0, 0, 0, 3, -1.5f};
  EXPECT_EQ(x, want);
}

TEST(EmbeddingGatherReferenceTest, CopiesEveryBitOfEachRow) {
  const int vocab = 50;
  const int hidden = 37;
  const std::vector<Bf16Bits> table = ToBf16(RandomUniform(vocab * hidden, -3, 3, 1));
  const std::vector<int32_t> ids = {49, 0, 17, 17, 3};
  std::vector<float> x(ids.size() * hidden);
  EmbeddingGatherReference(table.data(), vocab, hidden, ids.data(), static_cast<int>(ids.size()),
                           x.data());
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int j = 0; j < hidden; ++j) {
      EXPECT_EQ(FloatToBf16(x[i * hidden + j]), table[ids[i] * hidden + j]) << i << "," << j;
    }
  }
}

TEST(EmbeddingGatherReferenceTest, NoRowsWritesNothing) {
  const std::vector<Bf16Bits> table = ToBf16(std::vector<float>{1, 2});
  float x = 7.0f;
  EmbeddingGatherReference(table.data(), 1, 2, nullptr, 0, &x);
  EXPECT_EQ(x, 7.0f);
}

TEST(GatherRowsReferenceTest, CopiesTheListedRowsInOrder) {
  const int width = 3;
  const std::vector<Bf16Bits> src = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // 4 rows
  const std::vector<int32_t> rows = {3, 0, 3, 1};
  std::vector<Bf16Bits> dst(rows.size() * width, 0xFFFF);
  GatherRowsReference(src.data(), width, rows.data(), static_cast<int>(rows.size()), dst.data());
  const std::vector<Bf16Bits> want = {10, 11, 12, 1, 2, 3, 10, 11, 12, 4, 5, 6};
  EXPECT_EQ(dst, want);
}

}  // namespace
}  // namespace tandem::kernels
