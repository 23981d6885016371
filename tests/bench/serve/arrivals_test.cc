#include "bench/serve/arrivals.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::bench {
namespace {

constexpr int kDraws = 20000;

std::vector<double> Gaps(const std::vector<double>& times) {
  std::vector<double> gaps(times.size());
  std::adjacent_difference(times.begin(), times.end(), gaps.begin());
  return gaps;  // gaps[0] is the first time itself: the first gap is drawn like the others
}

double Mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double CoefficientOfVariation(const std::vector<double>& v) {
  double mean = Mean(v);
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(v.size() - 1)) / mean;
}

class ArrivalShapeTest : public ::testing::TestWithParam<double> {};

// Over many draws the mean rate is the asked rate for every burstiness, and the spread of the
// gaps (CV) is 1 / sqrt(burstiness): Poisson's 1 at burstiness 1.
TEST_P(ArrivalShapeTest, MeanRateAndSpreadFollowTheOptions) {
  const double burstiness = GetParam();
  ArrivalOptions options{.rate = 8.0, .burstiness = burstiness, .seed = 7};
  absl::StatusOr<std::vector<double>> times = ArrivalTimes(options, kDraws);
  ASSERT_TRUE(times.ok()) << times.status();
  ASSERT_EQ(times->size(), kDraws);
  EXPECT_GT(times->front(), 0.0);
  for (size_t i = 1; i < times->size(); ++i) ASSERT_LE((*times)[i - 1], (*times)[i]) << i;

  const double rate = kDraws / times->back();
  EXPECT_NEAR(rate, 8.0, 8.0 * 0.04) << "burstiness " << burstiness;
  std::vector<double> gaps = Gaps(*times);
  EXPECT_NEAR(Mean(gaps), 1.0 / 8.0, 0.125 * 0.04);
  const double expected_cv = 1.0 / std::sqrt(burstiness);
  EXPECT_NEAR(CoefficientOfVariation(gaps), expected_cv, expected_cv * 0.06)
      << "burstiness " << burstiness;
}

INSTANTIATE_TEST_SUITE_P(Burstiness, ArrivalShapeTest, ::testing::Values(1.0, 0.5, 4.0));

TEST(ArrivalTimesTest, SameSeedSameTimesOtherSeedOtherTimes) {
  ArrivalOptions options{.rate = 3.0, .burstiness = 0.7, .seed = 42};
  auto a = ArrivalTimes(options, 100);
  auto b = ArrivalTimes(options, 100);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  options.seed = 43;
  auto c = ArrivalTimes(options, 100);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*a, *c);
  // Fewer requests with the same seed: a prefix of the longer schedule.
  options.seed = 42;
  auto d = ArrivalTimes(options, 10);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, std::vector<double>(a->begin(), a->begin() + 10));
}

TEST(ArrivalTimesTest, InfiniteRateSendsEverythingAtOnce) {
  ArrivalOptions options;  // rate defaults to inf
  ASSERT_TRUE(std::isinf(options.rate));
  auto times = ArrivalTimes(options, 5);
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(*times, std::vector<double>(5, 0.0));
}

TEST(ArrivalTimesTest, ZeroRequestsIsEmpty) {
  auto times = ArrivalTimes(ArrivalOptions{.rate = 1.0}, 0);
  ASSERT_TRUE(times.ok());
  EXPECT_TRUE(times->empty());
}

TEST(ArrivalTimesTest, RejectsBadOptions) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double rate : {0.0, -1.0, nan, -inf}) {
    auto t = ArrivalTimes(ArrivalOptions{.rate = rate}, 3);
    ASSERT_FALSE(t.ok()) << rate;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("rate"), std::string::npos) << t.status();
  }
  for (double burstiness : {0.0, -2.0, nan, inf}) {
    auto t = ArrivalTimes(ArrivalOptions{.rate = 1.0, .burstiness = burstiness}, 3);
    ASSERT_FALSE(t.ok()) << burstiness;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("burstiness"), std::string::npos) << t.status();
  }
  auto t = ArrivalTimes(ArrivalOptions{.rate = 1.0}, -1);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::bench
