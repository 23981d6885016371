// The sampling reference (kernels/sampling_reference.h) against hand-computed cases, against the
// CPU sampler's own distribution (common/sampling/sampler.h) over many counters, and the shared
// arithmetic of kernels/sampling_math.h.
#include "kernels/sampling_reference.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "common/sampling/sampler.h"
#include "common/sampling/sampling_params.h"
#include "gtest/gtest.h"
#include "kernels/sampling_math.h"
#include "kernels/sampling_rng.h"

namespace tandem::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> NormalLogits(int vocab, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> logits(vocab);
  for (float& x : logits) x = normal(rng);
  return logits;
}

SamplingRowParams Params(float temperature, int32_t top_k, float top_p, uint64_t seed = 1,
                         uint64_t counter = 0) {
  SamplingRowParams params;
  params.temperature = temperature;
  params.top_k = top_k;
  params.top_p = top_p;
  params.seed = seed;
  params.counter = counter;
  return params;
}

int32_t Sample(const std::vector<float>& logits, const SamplingRowParams& params) {
  return TopKTopPSampleReference(logits.data(), static_cast<int>(logits.size()), params);
}

// The first counter whose uniform (with `seed`) lies in [lo, hi).
uint64_t CounterWithUniform(uint64_t seed, float lo, float hi) {
  for (uint64_t counter = 0;; ++counter) {
    const float u = SamplingUniform(seed, counter);
    if (u >= lo && u < hi) return counter;
  }
}

// The token a draw with uniform u picks from (token, probability) pairs in token order.
int32_t TokenForUniform(const std::vector<std::pair<int32_t, double>>& kept, double u) {
  double cumulative = 0.0;
  for (const auto& [token, p] : kept) {
    cumulative += p;
    if (u < cumulative) return token;
  }
  return kept.back().first;
}

// Whether u lies within `margin` of a boundary of the cumulative distribution.
bool NearBoundary(const std::vector<std::pair<int32_t, double>>& kept, double u, double margin) {
  double cumulative = 0.0;
  for (const auto& [token, p] : kept) {
    cumulative += p;
    if (std::abs(u - cumulative) < margin) return true;
  }
  return false;
}

TEST(SamplingReferenceTest, GreedyTakesTheLowestIndexOfTheMax) {
  const std::vector<float> a = {1.0f, 3.0f, 2.0f};
  EXPECT_EQ(GreedySampleReference(a.data(), 3), 1);
  const std::vector<float> ties = {5.0f, 2.0f, 5.0f, 5.0f};
  EXPECT_EQ(GreedySampleReference(ties.data(), 4), 0);
  const std::vector<float> late = {-7.0f, -3.0f, -9.0f, -1.5f, -1.5f};
  EXPECT_EQ(GreedySampleReference(late.data(), 5), 3);
  const std::vector<float> masked = {kNegInf, kNegInf, -100.0f, kNegInf};
  EXPECT_EQ(GreedySampleReference(masked.data(), 4), 2);
  const std::vector<float> all_masked = {kNegInf, kNegInf};
  EXPECT_EQ(GreedySampleReference(all_masked.data(), 2), 0);
  const std::vector<float> zeros = {-1.0f, -0.0f, 0.0f};
  EXPECT_EQ(GreedySampleReference(zeros.data(), 3), 1);
  const std::vector<float> one = {42.0f};
  EXPECT_EQ(GreedySampleReference(one.data(), 1), 0);
}

TEST(SamplingReferenceTest, TemperatureAtOrBelowZeroIsGreedy) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> logits = NormalLogits(300, 2.0f, seed);
    const int32_t greedy = GreedySampleReference(logits.data(), 300);
    for (float temperature : {0.0f, -0.0f, -1.0f, -std::numeric_limits<float>::infinity()}) {
      for (uint64_t counter = 0; counter < 10; ++counter) {
        EXPECT_EQ(Sample(logits, Params(temperature, 0, 1.0f, seed, counter)), greedy);
        EXPECT_EQ(Sample(logits, Params(temperature, 50, 0.5f, seed, counter)), greedy);
      }
    }
  }
}

TEST(SamplingReferenceTest, TopKOneAndTinyTopPAreGreedy) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = NormalLogits(500, 3.0f, seed);
    // A tie for the max at a later index: the lower index wins.
    const int32_t first = GreedySampleReference(logits.data(), 500);
    logits[499] = logits[first];
    for (float temperature : {0.3f, 1.0f, 5.0f}) {
      for (uint64_t counter = 0; counter < 20; ++counter) {
        EXPECT_EQ(Sample(logits, Params(temperature, 1, 1.0f, seed, counter)), first);
        EXPECT_EQ(Sample(logits, Params(temperature, 0, 1e-7f, seed, counter)), first);
        EXPECT_EQ(Sample(logits, Params(temperature, 100, 1e-7f, seed, counter)), first);
      }
    }
  }
}

TEST(SamplingReferenceTest, HandComputedDistributions) {
  // p = 0.1, 0.2, 0.3, 0.4 at temperature 1.
  const std::vector<float> logits = {std::log(1.0f), std::log(2.0f), std::log(3.0f),
                                     std::log(4.0f)};
  struct Case {
    int32_t top_k;
    float top_p;
    std::vector<std::pair<int32_t, double>> kept;  // renormalized, token order
  };
  const std::vector<Case> cases = {
      {0, 1.0f, {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}}},
      {0, 0.5f, {{2, 3.0 / 7.0}, {3, 4.0 / 7.0}}},  // 0.4 < 0.5 <= 0.7
      {2, 1.0f, {{2, 3.0 / 7.0}, {3, 4.0 / 7.0}}},  // the 2 best
      {3, 1.0f, {{1, 2.0 / 9.0}, {2, 3.0 / 9.0}, {3, 4.0 / 9.0}}},
      {3, 0.6f, {{2, 3.0 / 7.0}, {3, 4.0 / 7.0}}},          // 0.6 of 0.9 = 0.54: 0.4 < 0.54 <= 0.7
      {0, 0.35f, {{3, 1.0}}},                               // 0.35 <= 0.4
      {7, 1.0f, {{0, 0.1}, {1, 0.2}, {2, 0.3}, {3, 0.4}}},  // k beyond the vocabulary
  };
  for (const Case& c : cases) {
    int checked = 0;
    for (uint64_t counter = 0; counter < 3000; ++counter) {
      const double u = SamplingUniform(9, counter);
      if (NearBoundary(c.kept, u, 1e-5)) continue;
      ASSERT_EQ(Sample(logits, Params(1.0f, c.top_k, c.top_p, 9, counter)),
                TokenForUniform(c.kept, u))
          << "top_k " << c.top_k << " top_p " << c.top_p << " u " << u;
      ++checked;
    }
    EXPECT_GT(checked, 2900);
  }
}

TEST(SamplingReferenceTest, UniformNearZeroTakesTheFirstKeptTokenAndNearOneTheLast) {
  // Masked tokens in between: they are never kept mass.
  const std::vector<float> logits = {kNegInf,        std::log(2.0f), kNegInf,       std::log(3.0f),
                                     std::log(4.0f), kNegInf,        std::log(1.0f)};
  const uint64_t low = CounterWithUniform(5, 0.0f, 1e-4f);
  const uint64_t high = CounterWithUniform(5, 1.0f - 1e-4f, 1.0f);
  ASSERT_LT(SamplingUniform(5, low), 1e-4f);
  ASSERT_GE(SamplingUniform(5, high), 1.0f - 1e-4f);
  // All kept: tokens 1, 3, 4, 6 in index order.
  EXPECT_EQ(Sample(logits, Params(1.0f, 0, 1.0f, 5, low)), 1);
  EXPECT_EQ(Sample(logits, Params(1.0f, 0, 1.0f, 5, high)), 6);
  // top-k 3: tokens 1, 3, 4.
  EXPECT_EQ(Sample(logits, Params(1.0f, 3, 1.0f, 5, low)), 1);
  EXPECT_EQ(Sample(logits, Params(1.0f, 3, 1.0f, 5, high)), 4);
  // top-p 0.6 of 1.0: 0.4 + 0.3 reaches it: tokens 3, 4.
  EXPECT_EQ(Sample(logits, Params(1.0f, 0, 0.6f, 5, low)), 3);
  EXPECT_EQ(Sample(logits, Params(1.0f, 0, 0.6f, 5, high)), 4);
}

TEST(SamplingReferenceTest, TopKAtOrBeyondTheVocabularyKeepsEverything) {
  for (uint32_t seed = 0; seed < 10; ++seed) {
    const std::vector<float> logits = NormalLogits(64, 1.5f, seed);
    for (uint64_t counter = 0; counter < 50; ++counter) {
      const int32_t all = Sample(logits, Params(0.8f, 0, 0.9f, seed, counter));
      EXPECT_EQ(Sample(logits, Params(0.8f, -1, 0.9f, seed, counter)), all);
      EXPECT_EQ(Sample(logits, Params(0.8f, 64, 0.9f, seed, counter)), all);
      EXPECT_EQ(Sample(logits, Params(0.8f, 65, 0.9f, seed, counter)), all);
      EXPECT_EQ(
          Sample(logits, Params(0.8f, std::numeric_limits<int32_t>::max(), 0.9f, seed, counter)),
          all);
    }
  }
}

// Draws `draws` tokens (counters 0..draws-1) and compares their frequencies with the CPU sampler's
// distribution for the same parameters (a chi-square statistic over tokens expected at least 5
// times, the rest pooled).
void ExpectMatchesCpuSampler(const std::vector<float>& logits, float temperature, int32_t top_k,
                             float top_p, int draws) {
  SamplingParams cpu_params;
  cpu_params.temperature = temperature;
  cpu_params.top_k = top_k;
  cpu_params.top_p = top_p;
  Sampler sampler;
  std::map<int32_t, double> expected;
  for (const auto& [token, p] : sampler.Distribution(logits, cpu_params, {}, {})) {
    expected[token] = p;
  }
  ASSERT_GT(expected.size(), 3u);

  std::map<int32_t, int> observed;
  for (int counter = 0; counter < draws; ++counter) {
    ++observed[Sample(logits, Params(temperature, top_k, top_p, 77, counter))];
  }
  for (const auto& [token, count] : observed) {
    ASSERT_TRUE(expected.count(token))
        << "token " << token << " drawn " << count << " times is outside the kept set";
  }
  double chi_square = 0.0;
  int bins = 0;
  double pooled_expected = 0.0;
  double pooled_observed = 0.0;
  for (const auto& [token, p] : expected) {
    const double e = p * draws;
    const double o = observed.count(token) ? observed[token] : 0;
    if (e < 5.0) {
      pooled_expected += e;
      pooled_observed += o;
      continue;
    }
    chi_square += (o - e) * (o - e) / e;
    ++bins;
  }
  if (pooled_expected >= 5.0) {
    chi_square +=
        (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++bins;
  }
  const int dof = bins - 1;
  ASSERT_GT(dof, 2);
  // Mean dof, standard deviation sqrt(2 dof): 6 deviations above is far beyond chance.
  EXPECT_LT(chi_square, dof + 6.0 * std::sqrt(2.0 * dof)) << "dof " << dof;
}

TEST(SamplingReferenceTest, EmpiricalDistributionMatchesTheCpuSampler) {
  const std::vector<float> logits = NormalLogits(40, 2.0f, 3);
  ExpectMatchesCpuSampler(logits, 1.0f, 0, 1.0f, 100000);
  ExpectMatchesCpuSampler(logits, 0.7f, 25, 1.0f, 100000);
  ExpectMatchesCpuSampler(logits, 1.3f, 0, 0.8f, 100000);
  ExpectMatchesCpuSampler(logits, 0.9f, 20, 0.9f, 100000);
  const std::vector<float> wide = NormalLogits(200, 1.0f, 4);
  ExpectMatchesCpuSampler(wide, 1.0f, 0, 0.95f, 100000);
}

TEST(SamplingReferenceTest, TiedLogitsGoToTheLowerIndexInTheRanking) {
  // Four equal logits, top-k 2: tokens 1 and 2 are kept, about half each.
  const std::vector<float> logits = {1.0f, 5.0f, 5.0f, 5.0f, 5.0f};
  std::map<int32_t, int> counts;
  for (uint64_t counter = 0; counter < 4000; ++counter) {
    ++counts[Sample(logits, Params(1.0f, 2, 1.0f, 11, counter))];
  }
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts[1], 2000, 200);
  EXPECT_NEAR(counts[2], 2000, 200);
}

TEST(SamplingReferenceTest, MaskedTokensAreNeverDrawn) {
  std::vector<float> logits = NormalLogits(100, 1.0f, 8);
  for (int j = 0; j < 100; j += 2) logits[j] = kNegInf;
  for (uint64_t counter = 0; counter < 5000; ++counter) {
    const int32_t token = Sample(logits, Params(1.5f, 0, 1.0f, 3, counter));
    ASSERT_EQ(token % 2, 1) << "counter " << counter;
  }
  const std::vector<float> all_masked = {kNegInf, kNegInf, kNegInf};
  EXPECT_EQ(Sample(all_masked, Params(1.0f, 0, 1.0f)), 0);
  EXPECT_EQ(Sample(all_masked, Params(1.0f, 2, 0.5f)), 0);
}

TEST(SamplingReferenceTest, SameSeedAndCounterSameToken) {
  const std::vector<float> logits = NormalLogits(1000, 1.0f, 12);
  std::vector<int32_t> first;
  std::vector<int32_t> again;
  std::vector<int32_t> other_seed;
  for (uint64_t counter = 100; counter < 164; ++counter) {
    first.push_back(Sample(logits, Params(1.0f, 0, 0.95f, 1234, counter)));
    again.push_back(Sample(logits, Params(1.0f, 0, 0.95f, 1234, counter)));
    other_seed.push_back(Sample(logits, Params(1.0f, 0, 0.95f, 1235, counter)));
  }
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other_seed);
  // A flat-ish distribution over 1000 tokens: 64 draws hit many different tokens.
  EXPECT_GT(std::set<int32_t>(first.begin(), first.end()).size(), 30u);
}

TEST(SamplingMathTest, UniformIsInRangeAndFlat) {
  std::vector<int> bins(16, 0);
  double sum = 0.0;
  constexpr int kDraws = 160000;
  for (uint64_t counter = 0; counter < kDraws; ++counter) {
    const float u = SamplingUniform(42, counter);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ++bins[static_cast<int>(u * 16)];
    sum += u;
  }
  EXPECT_NEAR(sum / kDraws, 0.5, 0.005);
  for (int count : bins) EXPECT_NEAR(count, kDraws / 16, 500);
  EXPECT_NE(SamplingUniform(1, 0), SamplingUniform(2, 0));
  EXPECT_NE(SamplingUniform(1, 0), SamplingUniform(1, 1));
}

TEST(SamplingMathTest, ExpIsAccurateAndExactAtTheEnds) {
  EXPECT_EQ(SamplingExp(0.0f), 1.0f);
  EXPECT_EQ(SamplingExp(-0.0f), 1.0f);
  EXPECT_EQ(SamplingExp(kNegInf), 0.0f);
  EXPECT_EQ(SamplingExp(std::nanf("")), 0.0f);
  EXPECT_EQ(SamplingExp(-88.0f), 0.0f);
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    const double exact = std::exp(static_cast<double>(x));
    EXPECT_NEAR(SamplingExp(x), exact, 4e-7 * exact) << x;
  }
  EXPECT_EQ(SamplingWeight(3.5f, 3.5f, 0.7f), 1.0f);
}

TEST(SamplingMathTest, FixedPointMassesAndThresholds) {
  EXPECT_EQ(SamplingFixedShift(1), 63);
  EXPECT_EQ(SamplingFixedShift(2), 62);
  EXPECT_EQ(SamplingFixedShift(97), 56);
  EXPECT_EQ(SamplingFixedShift(131072), 46);
  EXPECT_EQ(SamplingFixedShift(151936), 45);
  EXPECT_EQ(SamplingFixedMass(1.0f, 45), uint64_t{1} << 45);
  EXPECT_EQ(SamplingFixedMass(0.5f, 10), 512u);
  EXPECT_EQ(SamplingFixedMass(0.0f, 45), 0u);
  EXPECT_EQ(SamplingFixedMass(1.0f, 63), uint64_t{1} << 63);

  EXPECT_EQ(SamplingTopPTarget(1.0f, 1000), 1000u);
  EXPECT_EQ(SamplingTopPTarget(0.5f, 1000), 500u);
  EXPECT_EQ(SamplingTopPTarget(0.0f, 1000), 0u);
  EXPECT_EQ(SamplingTopPTarget(std::nanf(""), 1000), 0u);
  EXPECT_LE(SamplingTopPTarget(0.99999994f, uint64_t{1} << 63), uint64_t{1} << 63);

  EXPECT_EQ(SamplingWalkThreshold(0.0f, 1000), 0u);
  EXPECT_EQ(SamplingWalkThreshold(0.25f, 1000), 250u);
  const float largest_u = 1.0f - 1.0f / 16777216.0f;
  EXPECT_LT(SamplingWalkThreshold(largest_u, uint64_t{1} << 63), uint64_t{1} << 63);
  EXPECT_LT(SamplingWalkThreshold(largest_u, 1), 1u);
  EXPECT_LT(SamplingWalkThreshold(largest_u, (uint64_t{1} << 63) - 1), (uint64_t{1} << 63) - 1);
}

TEST(SamplingMathTest, KeysRankByLogitThenLowerIndex) {
  EXPECT_GT(SamplingKey(2.0f, 5), SamplingKey(1.0f, 0));
  EXPECT_GT(SamplingKey(-1.0f, 5), SamplingKey(-2.0f, 0));
  EXPECT_GT(SamplingKey(0.5f, 0), SamplingKey(-0.5f, 0));
  EXPECT_GT(SamplingKey(-100.0f, 9), SamplingKey(kNegInf, 0));
  EXPECT_GT(SamplingKey(1.0f, 3), SamplingKey(1.0f, 4));
  EXPECT_EQ(SamplingKey(-0.0f, 3), SamplingKey(0.0f, 3));
  EXPECT_GT(SamplingKey(0.0f, 3), SamplingKey(-0.0f, 4));
}

}  // namespace
}  // namespace tandem::kernels
