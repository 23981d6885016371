#include "common/transport/cuda/copy_plan.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

namespace tandem {
namespace {

bool Same(const KvCopy& a, const KvCopy& b) {
  return a.src_offset == b.src_offset && a.dst_offset == b.dst_offset && a.bytes == b.bytes;
}

TEST(CoalesceCopiesTest, MergesOnlyWhereBothSidesContinue) {
  std::vector<KvCopy> in = {{0, 100, 10}, {10, 110, 5},  // merge
                            {15, 200, 5},                // dst jumps: new
                            {20, 205, 0},                // empty: dropped
                            {20, 205, 7},                // merges with the previous kept one
                            {40, 212, 1}};               // src jumps: new
  std::vector<KvCopy> out = CoalesceCopies(in);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(Same(out[0], {0, 100, 15}));
  EXPECT_TRUE(Same(out[1], {15, 200, 12}));
  EXPECT_TRUE(Same(out[2], {40, 212, 1}));
  EXPECT_TRUE(CoalesceCopies({}).empty());
}

TEST(CheckCopyBoundsTest, NamesTheSideThatIsOut) {
  EXPECT_TRUE(CheckCopyBounds({{0, 0, 60}, {50, 10, 50}}, 100, 60, "w").ok());
  absl::Status s = CheckCopyBounds({{0, 0, 10}, {95, 0, 10}}, 100, 100, "w");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("copy 1 source"), std::string::npos) << s;
  s = CheckCopyBounds({{0, 91, 10}}, 100, 100, "w");
  EXPECT_NE(s.message().find("destination"), std::string::npos) << s;
  // Offsets near 2^64 must not wrap around.
  EXPECT_FALSE(CheckCopyBounds({{~uint64_t{0}, 0, 2}}, 100, 100, "w").ok());
  EXPECT_FALSE(CheckCopyBounds({{0, 10, ~uint64_t{0}}}, 100, 100, "w").ok());
}

TEST(PlanStagedChunksTest, PacksAndSplitsCopies) {
  // 10 + 25 + 3 bytes in chunks of 16: [10, 6] [16] [3, 3]
  std::vector<KvCopy> in = {{0, 1000, 10}, {100, 2000, 25}, {200, 3000, 3}};
  std::vector<StagedChunk> chunks = PlanStagedChunks(in, 16);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].bytes, 16u);
  ASSERT_EQ(chunks[0].pieces.size(), 2u);
  EXPECT_TRUE(Same(chunks[0].pieces[0], {0, 1000, 10}));
  EXPECT_TRUE(Same(chunks[0].pieces[1], {100, 2000, 6}));
  ASSERT_EQ(chunks[1].pieces.size(), 1u);
  EXPECT_TRUE(Same(chunks[1].pieces[0], {106, 2006, 16}));
  EXPECT_EQ(chunks[2].bytes, 6u);
  EXPECT_TRUE(Same(chunks[2].pieces[0], {122, 2022, 3}));
  EXPECT_TRUE(Same(chunks[2].pieces[1], {200, 3000, 3}));
}

TEST(PlanStagedChunksTest, CoversEveryByteOnceOnRandomInput) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const uint64_t chunk = 1 + rng() % 64;
    std::vector<KvCopy> in;
    uint64_t src = 0, dst = 0, total = 0;
    for (int i = 0; i < 20; ++i) {
      const uint64_t n = 1 + rng() % 100;
      in.push_back({src, dst, n});
      src += n + rng() % 3;
      dst += n + rng() % 3;
      total += n;
    }
    std::vector<StagedChunk> chunks = PlanStagedChunks(in, chunk);
    EXPECT_EQ(chunks.size(), (total + chunk - 1) / chunk);
    // Rebuild the byte mapping src -> dst and compare with the input's.
    std::vector<std::pair<uint64_t, uint64_t>> want, got;
    for (const KvCopy& c : in) {
      for (uint64_t b = 0; b < c.bytes; ++b) want.push_back({c.src_offset + b, c.dst_offset + b});
    }
    for (size_t i = 0; i < chunks.size(); ++i) {
      uint64_t sum = 0;
      for (const KvCopy& p : chunks[i].pieces) {
        for (uint64_t b = 0; b < p.bytes; ++b) got.push_back({p.src_offset + b, p.dst_offset + b});
        sum += p.bytes;
      }
      EXPECT_EQ(sum, chunks[i].bytes);
      if (i + 1 < chunks.size()) {
        EXPECT_EQ(chunks[i].bytes, chunk);
      }
      EXPECT_LE(chunks[i].bytes, chunk);
    }
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace tandem
