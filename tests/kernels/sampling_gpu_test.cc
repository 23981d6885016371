// The GPU samplers (kernels/sampling.h) against their CPU reference: the same token for every row,
// over the vocabularies of real models, many temperatures, top-k and top-p values and counters,
// logits with exact ties and masked (-inf) tokens; tokens poisoned first so a row the kernel skips
// shows up.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/sampling.h"
#include "kernels/sampling_reference.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kVocabs[] = {97, 32000, 128256, 151936};

// Logits of several shapes, chosen by `kind`: normal at three scales, an LLM-like row (a long flat
// tail and a few strong tokens), values rounded to quarters (many exact ties), and a row with a
// third of the tokens masked.
std::vector<float> RandomRow(int vocab, int kind, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, vocab - 1);
  std::vector<float> row(vocab);
  switch (kind % 6) {
    case 0:
      for (float& x : row) x = normal(rng);
      break;
    case 1:
      for (float& x : row) x = 3.0f * normal(rng);
      break;
    case 2:
      for (float& x : row) x = 8.0f * normal(rng) - 5.0f;
      break;
    case 3:  // LLM-like
      for (float& x : row) x = 2.0f * normal(rng) - 10.0f;
      for (int i = 0; i < 10; ++i) row[pick(rng)] = 5.0f + 3.0f * normal(rng);
      break;
    case 4:  // exact ties
      for (float& x : row) x = std::round(4.0f * normal(rng)) / 4.0f;
      break;
    case 5:  // masked tokens
      for (float& x : row) x = 2.0f * normal(rng);
      for (int i = 0; i < vocab / 3; ++i) row[pick(rng)] = kNegInf;
      break;
  }
  // Sometimes a tie for the max at a random index.
  if (kind % 4 == 1) {
    const int best = static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
    row[pick(rng)] = row[best];
  }
  return row;
}

SamplingRowParams RandomParams(int vocab, std::mt19937& rng) {
  const float temperatures[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.0f, 1.5f, 4.0f};
  const int32_t top_ks[] = {0, 0, 1, 5, 50, 1000, vocab - 1, vocab, vocab + 7, -1};
  const float top_ps[] = {1.0f, 1.0f, 0.95f, 0.9f, 0.8f, 0.5f, 0.1f, 1e-6f};
  auto choose = [&rng](const auto& values) {
    std::uniform_int_distribution<size_t> index(0, std::size(values) - 1);
    return values[index(rng)];
  };
  SamplingRowParams params;
  params.temperature = choose(temperatures);
  params.top_k = choose(top_ks);
  params.top_p = choose(top_ps);
  params.seed = rng();
  params.counter = rng();
  return params;
}

std::string Describe(const SamplingRowParams& p) {
  return "temperature " + std::to_string(p.temperature) + " top_k " + std::to_string(p.top_k) +
         " top_p " + std::to_string(p.top_p) + " seed " + std::to_string(p.seed) + " counter " +
         std::to_string(p.counter);
}

// Runs TopKTopPSample on `rows` rows of `logits` and checks every token against the reference.
void ExpectTopKTopPMatchesReference(const std::vector<float>& logits, int vocab,
                                    const std::vector<SamplingRowParams>& params,
                                    const std::vector<int>& kinds, cudaStream_t stream) {
  const int rows = static_cast<int>(params.size());
  DeviceBuffer d_logits = testing::Upload(logits);
  DeviceBuffer d_params = testing::Upload(params);
  DeviceBuffer d_tokens = testing::Poisoned<int32_t>(rows);
  ASSERT_TRUE(TopKTopPSample(d_logits.as<float>(), rows, vocab, d_params.as<SamplingRowParams>(),
                             d_tokens.as<int32_t>(), stream)
                  .ok());
  const std::vector<int32_t> tokens = testing::Download<int32_t>(d_tokens, rows);
  for (int r = 0; r < rows; ++r) {
    const float* row = logits.data() + static_cast<int64_t>(r) * vocab;
    EXPECT_EQ(tokens[r], TopKTopPSampleReference(row, vocab, params[r]))
        << "vocab " << vocab << " row " << r << " kind " << kinds[r] << " " << Describe(params[r]);
  }
}

TEST(SamplingGpuTest, RejectsBadArguments) {
  // The checks run before any CUDA call: no GPU needed.
  float logits = 0.0f;
  int32_t tokens = 0;
  SamplingRowParams params;
  auto expect_invalid = [](const absl::Status& status, const std::string& names) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(names), std::string::npos) << status;
  };
  expect_invalid(GreedySample(nullptr, 1, 4, &tokens, nullptr), "logits");
  expect_invalid(GreedySample(&logits, 1, 4, nullptr, nullptr), "tokens");
  expect_invalid(GreedySample(&logits, -1, 4, &tokens, nullptr), "rows");
  expect_invalid(GreedySample(&logits, 1, 0, &tokens, nullptr), "vocab");
  expect_invalid(TopKTopPSample(nullptr, 1, 4, &params, &tokens, nullptr), "logits");
  expect_invalid(TopKTopPSample(&logits, 1, 4, nullptr, &tokens, nullptr), "params");
  expect_invalid(TopKTopPSample(&logits, 1, 4, &params, nullptr, nullptr), "tokens");
  expect_invalid(TopKTopPSample(&logits, -2, 4, &params, &tokens, nullptr), "rows");
  expect_invalid(TopKTopPSample(&logits, 1, -5, &params, &tokens, nullptr), "vocab");
  // No rows: nothing to launch.
  EXPECT_TRUE(GreedySample(&logits, 0, 4, &tokens, nullptr).ok());
  EXPECT_TRUE(TopKTopPSample(&logits, 0, 4, &params, &tokens, nullptr).ok());
}

TEST(SamplingGpuTest, GreedyMatchesReference) {
  TANDEM_REQUIRE_GPU();
  std::mt19937 rng(1);
  for (int vocab : kVocabs) {
    const int rows = vocab < 1000 ? 64 : 24;
    std::vector<float> logits;
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> row = RandomRow(vocab, r, rng);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    // One row entirely masked, one all equal: both give token 0.
    std::fill(logits.begin(), logits.begin() + vocab, kNegInf);
    std::fill(logits.begin() + vocab, logits.begin() + 2 * vocab, 1.25f);
    DeviceBuffer d_logits = testing::Upload(logits);
    DeviceBuffer d_tokens = testing::Poisoned<int32_t>(rows);
    ASSERT_TRUE(
        GreedySample(d_logits.as<float>(), rows, vocab, d_tokens.as<int32_t>(), nullptr).ok());
    const std::vector<int32_t> tokens = testing::Download<int32_t>(d_tokens, rows);
    for (int r = 0; r < rows; ++r) {
      EXPECT_EQ(tokens[r],
                GreedySampleReference(logits.data() + static_cast<int64_t>(r) * vocab, vocab))
          << "vocab " << vocab << " row " << r;
    }
    EXPECT_EQ(tokens[0], 0);
    EXPECT_EQ(tokens[1], 0);
  }
}

TEST(SamplingGpuTest, TopKTopPMatchesReferenceOnRandomRows) {
  TANDEM_REQUIRE_GPU();
  std::mt19937 rng(2);
  for (int vocab : kVocabs) {
    const int rows = vocab < 1000 ? 256 : 48;
    std::vector<float> logits;
    std::vector<SamplingRowParams> params;
    std::vector<int> kinds;
    for (int r = 0; r < rows; ++r) {
      const int kind = static_cast<int>(rng() % 1000);
      const std::vector<float> row = RandomRow(vocab, kind, rng);
      logits.insert(logits.end(), row.begin(), row.end());
      params.push_back(RandomParams(vocab, rng));
      kinds.push_back(kind);
    }
    ExpectTopKTopPMatchesReference(logits, vocab, params, kinds, nullptr);
  }
}

TEST(SamplingGpuTest, TopKTopPMatchesReferenceOverManyCounters) {
  TANDEM_REQUIRE_GPU();
  // One row repeated with counters 0..rows-1: the walk lands all over the kept set.
  std::mt19937 rng(3);
  for (int vocab : {97, 32000, 151936}) {
    for (int kind : {0, 3, 4}) {
      const int rows = vocab < 1000 ? 512 : 32;
      const std::vector<float> row = RandomRow(vocab, kind, rng);
      for (const auto& [top_k, top_p] :
           {std::pair<int32_t, float>{0, 1.0f}, {40, 0.9f}, {0, 0.7f}}) {
        std::vector<float> logits;
        std::vector<SamplingRowParams> params;
        for (int r = 0; r < rows; ++r) {
          logits.insert(logits.end(), row.begin(), row.end());
          SamplingRowParams p;
          p.temperature = 0.8f;
          p.top_k = top_k;
          p.top_p = top_p;
          p.seed = 99;
          p.counter = static_cast<uint64_t>(r);
          params.push_back(p);
        }
        ExpectTopKTopPMatchesReference(logits, vocab, params, std::vector<int>(rows, kind),
                                       nullptr);
      }
    }
  }
}

TEST(SamplingGpuTest, EdgeRowsAndAStream) {
  TANDEM_REQUIRE_GPU();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  // vocab 1; every token masked; all equal; top-k 1 on ties; the max last.
  {
    const std::vector<float> logits = {3.0f, -1.0f};
    std::vector<SamplingRowParams> params(2);
    params[1].top_k = 1;
    ExpectTopKTopPMatchesReference(logits, 1, params, {0, 0}, stream);
  }
  {
    const int vocab = 5000;
    std::vector<float> logits(4 * vocab, kNegInf);
    std::fill(logits.begin() + vocab, logits.begin() + 2 * vocab, 0.5f);
    std::fill(logits.begin() + 2 * vocab, logits.begin() + 3 * vocab, 0.5f);
    for (int j = 0; j < vocab; ++j) logits[3 * vocab + j] = -static_cast<float>(vocab - j);
    std::vector<SamplingRowParams> params(4);
    params[0].top_p = 0.5f;
    params[1].counter = 12345;
    params[2].top_k = 1;
    params[3].top_k = 3;
    params[3].temperature = 100.0f;
    ExpectTopKTopPMatchesReference(logits, vocab, params, {0, 0, 0, 0}, stream);
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace tandem::kernels
