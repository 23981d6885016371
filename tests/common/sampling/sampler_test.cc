#include "common/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// Reference softmax in double.
std::vector<double> Softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double m = *std::max_element(logits.begin(), logits.end()) / temperature;
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(logits[i] / temperature - m);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<float> LogOf(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::map<TokenId, float> AsMap(const std::vector<std::pair<TokenId, float>>& dist) {
  return {dist.begin(), dist.end()};
}

SamplingParams Random(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

TEST(SamplerTest, GreedyPicksArgmaxTiesToLowestIdAndDrawsNothing) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0.0f;
  SamplingRng rng(1);
  SampleResult r;
  std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  sampler.Sample(logits, p, {}, {}, &rng, &r);
  EXPECT_EQ(r.token, 1);
  EXPECT_EQ(rng.counter(), 0u);
  EXPECT_TRUE(r.top_logprobs.empty());
}

TEST(SamplerTest, GreedyDistributionIsOnePoint) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0.0f;
  std::vector<float> logits = {0.5f, 3.0f, -1.0f};
  EXPECT_THAT(sampler.Distribution(logits, p, {}, {}), ElementsAre(Pair(1, 1.0f)));
}

TEST(SamplerTest, GreedyAppliesPenalties) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0.0f;
  p.frequency_penalty = 1.0f;
  SamplingRng rng(1);
  SampleResult r;
  std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  std::vector<TokenId> output = {0};
  sampler.Sample(logits, p, {}, output, &rng, &r);
  EXPECT_EQ(r.token, 1);  // 2.0 - 1.0 < 1.5
}

TEST(SamplerTest, TemperatureScalesTheDistribution) {
  Sampler sampler;
  std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f};
  for (float t : {0.5f, 1.0f, 2.0f}) {
    auto dist = AsMap(sampler.Distribution(logits, Random(t), {}, {}));
    auto ref = Softmax(logits, t);
    ASSERT_EQ(dist.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(dist[i], ref[i], 1e-6) << "t=" << t << " i=" << i;
  }
}

TEST(SamplerTest, TopKKeepsTheKLargestRenormalized) {
  Sampler sampler;
  std::vector<float> logits = {1.0f, 5.0f, 3.0f, 4.0f, 2.0f};
  SamplingParams p = Random();
  p.top_k = 2;
  auto dist = sampler.Distribution(logits, p, {}, {});
  const double e5 = std::exp(5.0), e4 = std::exp(4.0);
  EXPECT_THAT(dist, ElementsAre(Pair(1, testing::FloatNear(e5 / (e5 + e4), 1e-6)),
                                Pair(3, testing::FloatNear(e4 / (e5 + e4), 1e-6))));
  p.top_k = 5;  // == vocab: off
  EXPECT_EQ(sampler.Distribution(logits, p, {}, {}).size(), 5u);
}

TEST(SamplerTest, TopPKeepsSmallestSetReachingP) {
  Sampler sampler;
  std::vector<float> logits = LogOf({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = Random();
  p.top_p = 0.75f;  // 0.5 + 0.3 reaches it
  auto dist = sampler.Distribution(logits, p, {}, {});
  EXPECT_THAT(dist, ElementsAre(Pair(1, testing::FloatNear(0.625f, 1e-5)),
                                Pair(3, testing::FloatNear(0.375f, 1e-5))));
  p.top_p = 0.85f;  // needs the third
  EXPECT_EQ(sampler.Distribution(logits, p, {}, {}).size(), 3u);
  p.top_p = 0.1f;  // the top token always stays
  EXPECT_THAT(sampler.Distribution(logits, p, {}, {}), ElementsAre(Pair(1, 1.0f)));
}

TEST(SamplerTest, TopPAppliesAfterTopK) {
  Sampler sampler;
  // Top-2 renormalized: {0.5, 0.3} -> {0.625, 0.375}; top_p 0.6 keeps only the first.
  std::vector<float> logits = LogOf({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = Random();
  p.top_k = 2;
  p.top_p = 0.6f;
  EXPECT_THAT(sampler.Distribution(logits, p, {}, {}), ElementsAre(Pair(1, 1.0f)));
  p.top_p = 0.7f;  // 0.625 < 0.7: the second stays
  EXPECT_EQ(sampler.Distribution(logits, p, {}, {}).size(), 2u);
}

TEST(SamplerTest, MinPDropsTokensBelowFractionOfTheTop) {
  Sampler sampler;
  std::vector<float> logits = LogOf({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = Random();
  p.min_p = 0.2f;  // threshold 0.1: drops token 0
  auto dist = AsMap(sampler.Distribution(logits, p, {}, {}));
  ASSERT_EQ(dist.size(), 3u);
  EXPECT_EQ(dist.count(0), 0u);
  EXPECT_NEAR(dist[1], 0.5 / 0.95, 1e-5);
  // Combined with top-k the threshold still follows the top token.
  p.top_k = 3;
  p.min_p = 0.5f;  // threshold 0.25: keeps 1 and 3
  auto sorted = sampler.Distribution(logits, p, {}, {});
  EXPECT_THAT(sorted, ElementsAre(Pair(1, testing::FloatNear(0.625f, 1e-5)),
                                  Pair(3, testing::FloatNear(0.375f, 1e-5))));
}

TEST(SamplerTest, TopPOnLargeVocabularyMatchesBruteForce) {
  // A nucleus of hundreds of tokens exercises the growing partial sort.
  const int vocab = 5000;
  std::vector<float> logits(vocab);
  for (int i = 0; i < vocab; ++i) logits[i] = static_cast<float>((i * 7919) % 1000) / 250.0f;
  SamplingParams p = Random(0.7f);
  p.top_p = 0.9f;
  Sampler sampler;
  auto dist = sampler.Distribution(logits, p, {}, {});

  auto probs = Softmax(logits, 0.7);
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  std::set<int> expected;
  double mass = 0.0;
  for (int t : order) {
    if (mass >= 0.9) break;
    expected.insert(t);
    mass += probs[t];
  }
  ASSERT_GT(expected.size(), 256u);
  std::set<int> got;
  for (auto& [t, prob] : dist) got.insert(t);
  EXPECT_EQ(got, expected);
  // Most likely first, ties by id.
  for (size_t i = 0; i < dist.size(); ++i) EXPECT_EQ(dist[i].first, order[i]);
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.0f, 0.25f, 0.15f, 0.05f, 0.2f};
  SamplingParams p = Random();
  auto draw = [&](uint64_t seed) {
    Sampler sampler;
    SamplingRng rng(seed);
    SampleResult r;
    std::vector<TokenId> out;
    for (int i = 0; i < 64; ++i) {
      sampler.Sample(logits, p, {}, {}, &rng, &r);
      out.push_back(r.token);
    }
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(SamplerTest, EmpiricalFrequenciesMatchSoftmax) {
  std::vector<float> logits = {1.0f, 2.0f, 0.5f, 3.0f, -0.5f};
  SamplingParams p = Random(1.0f);
  Sampler sampler;
  SamplingRng rng(7);
  SampleResult r;
  const int n = 100000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) {
    sampler.Sample(logits, p, {}, {}, &rng, &r);
    ++counts[r.token];
  }
  auto ref = Softmax(logits);
  for (size_t t = 0; t < logits.size(); ++t) {
    EXPECT_NEAR(static_cast<double>(counts[t]) / n, ref[t], 0.01) << "token " << t;
  }
}

TEST(SamplerTest, EmpiricalFrequenciesFollowFilters) {
  std::vector<float> logits = LogOf({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = Random();
  p.top_p = 0.75f;
  Sampler sampler;
  SamplingRng rng(11);
  SampleResult r;
  const int n = 50000;
  std::map<TokenId, int> counts;
  for (int i = 0; i < n; ++i) {
    sampler.Sample(logits, p, {}, {}, &rng, &r);
    ++counts[r.token];
  }
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_NEAR(static_cast<double>(counts[1]) / n, 0.625, 0.01);
  EXPECT_NEAR(static_cast<double>(counts[3]) / n, 0.375, 0.01);
}

TEST(SamplerTest, LogprobsAreRawLogSoftmax) {
  std::vector<float> logits = {1.0f, 2.0f, 0.5f, 3.0f, 3.0f};
  auto ref = Softmax(logits);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 3;
  Sampler sampler;
  SamplingRng rng(1);
  SampleResult r;
  sampler.Sample(logits, p, {}, {}, &rng, &r);
  EXPECT_EQ(r.token, 3);
  EXPECT_NEAR(r.logprob, std::log(ref[3]), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[0].token, 3);  // tie with 4: lower id first
  EXPECT_EQ(r.top_logprobs[1].token, 4);
  EXPECT_EQ(r.top_logprobs[2].token, 1);
  EXPECT_NEAR(r.top_logprobs[2].logprob, std::log(ref[1]), 1e-5);

  // Penalties and temperature change the choice but not the reported (raw) logprobs.
  p.temperature = 0.0f;
  p.repetition_penalty = 10.0f;
  std::vector<TokenId> output = {3, 4};
  sampler.Sample(logits, p, {}, output, &rng, &r);
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.logprob, std::log(ref[1]), 1e-5);
  EXPECT_EQ(r.top_logprobs[0].token, 3);

  // logprobs == 0: the chosen token only.
  p.logprobs = 0;
  sampler.Sample(logits, p, {}, {}, &rng, &r);
  EXPECT_TRUE(r.top_logprobs.empty());
  EXPECT_NEAR(r.logprob, std::log(ref[r.token]), 1e-5);
}

TEST(SamplerTest, SurvivesNonFiniteLogits) {
  std::vector<float> logits = {NAN, -INFINITY, 1.0f, INFINITY};
  Sampler sampler;
  SamplingRng rng(3);
  SampleResult r;
  sampler.Sample(logits, Random(), {}, {}, &rng, &r);
  EXPECT_EQ(r.token, 3);
  std::vector<float> all_bad = {NAN, -INFINITY};
  sampler.Sample(all_bad, Random(), {}, {}, &rng, &r);
  EXPECT_GE(r.token, 0);
  EXPECT_LT(r.token, 2);
}

TEST(SamplingRngTest, CounterBasedAndSeedSensitive) {
  SamplingRng a(5), b(5), c(6);
  std::vector<uint64_t> xa, xc;
  for (int i = 0; i < 8; ++i) {
    xa.push_back(a.NextU64());
    xc.push_back(c.NextU64());
    EXPECT_EQ(xa.back(), b.NextU64());
  }
  EXPECT_EQ(a.counter(), 8u);
  EXPECT_NE(xa, xc);
  for (int i = 0; i < 1000; ++i) {
    double u = a.NextUniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_NE(RandomSeed(), RandomSeed());
}

}  // namespace
}  // namespace tandem
