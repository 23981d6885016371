#include "common/util/lazy_zero_array.h"

#include <cstdint>
#include <utility>

#include "gtest/gtest.h"

namespace tandem {
namespace {

struct Record {
  int32_t count = 0;
  uint64_t name = 0;
};

TEST(LazyZeroArrayTest, StartsZeroAndKeepsWrites) {
  for (size_t n : {size_t{2}, size_t{1000}, size_t{5} << 20}) {
    LazyZeroArray<Record> a(n);
    ASSERT_EQ(a.size(), n);
    EXPECT_EQ(a[0].count, 0);
    EXPECT_EQ(a[n - 1].name, 0u);
    a[n - 1] = Record{.count = 7, .name = 99};
    a[n / 3].count = 3;
    EXPECT_EQ(a[n - 1].count, 7);
    EXPECT_EQ(a[n - 1].name, 99u);
    EXPECT_EQ(a[n / 3].count, 3);
    int64_t sum = 0;
    for (const Record& r : a) sum += r.count;
    EXPECT_EQ(sum, 10);
  }
}

TEST(LazyZeroArrayTest, OneElement) {
  LazyZeroArray<uint64_t> one(1);
  ASSERT_NE(one.data(), nullptr);
  EXPECT_EQ(one[0], 0u);
}

TEST(LazyZeroArrayTest, MovesOwnership) {
  LazyZeroArray<int32_t> a(100);
  a[5] = 42;
  int32_t* data = a.data();
  LazyZeroArray<int32_t> b(std::move(a));
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b[5], 42);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state is empty
  EXPECT_EQ(a.data(), nullptr);
  LazyZeroArray<int32_t> c(3);
  c = std::move(b);
  EXPECT_EQ(c.size(), 100u);
  EXPECT_EQ(c[5], 42);
  LazyZeroArray<int32_t> empty;
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.begin(), empty.end());
}

TEST(LazyZeroArrayTest, AReleasedMappingIsReusedAndReadsZero) {
  // A size no other test here uses, several pages, written on some of them only.
  const size_t n = (size_t{3} << 20) + 17;
  KeepReleasedLazyZeroArrays(true);
  const int64_t reused_before = lazy_zero_array_internal::ReusedMappings();
  const uint64_t* first_data = nullptr;
  {
    LazyZeroArray<uint64_t> a(n);
    first_data = a.data();
    for (size_t i = 0; i < n / 2; i += 1000) a[i] = i + 1;
    a[n - 1] = 5;
  }
  LazyZeroArray<uint64_t> b(n);
  EXPECT_EQ(lazy_zero_array_internal::ReusedMappings(), reused_before + 1);
  EXPECT_EQ(b.data(), first_data);
  uint64_t nonzero = 0;
  for (uint64_t v : b) nonzero += v != 0 ? 1 : 0;
  EXPECT_EQ(nonzero, 0u);
  b[7] = 3;
  EXPECT_EQ(b[7], 3u);
  KeepReleasedLazyZeroArrays(false);
}

TEST(LazyZeroArrayTest, ReleasedMappingsAreNotKeptByDefault) {
  const size_t n = (size_t{5} << 20) + 29;  // a size no other test here uses
  const int64_t reused_before = lazy_zero_array_internal::ReusedMappings();
  {
    LazyZeroArray<uint64_t> a(n);
    a[n - 1] = 1;
  }
  LazyZeroArray<uint64_t> b(n);
  EXPECT_EQ(lazy_zero_array_internal::ReusedMappings(), reused_before);
  EXPECT_EQ(b[n - 1], 0u);
}

}  // namespace
}  // namespace tandem
