// The engine's device-sampling path (Backend::ForwardAndSample): used when every row's request
// needs nothing only the host sampler does, with the same greedy tokens as host sampling; the host
// path whenever a row asks for logprobs, penalties or min-p.
#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

// A FakeBackend that samples greedy rows on the "device" (argmax of its own logits) and counts
// which path the engine took. Random rows get token (seed + counter) % vocab, so the test can
// see the draw counter advance.
class DeviceSamplingBackend : public FakeBackend {
 public:
  using FakeBackend::FakeBackend;
  bool CanSampleOnDevice() const override { return true; }
  absl::Status ForwardAndSample(const ForwardBatch& batch, std::span<const DeviceSampling> rows,
                                std::span<TokenId> tokens) override {
    ++device_steps;
    std::vector<float> logits(rows.size() * config().vocab_size);
    if (absl::Status s = FakeBackend::Forward(batch, {logits}); !s.ok()) return s;
    const int vocab = config().vocab_size;
    for (size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].temperature <= 0) {
        const float* row = logits.data() + r * vocab;
        tokens[r] = static_cast<TokenId>(std::max_element(row, row + vocab) - row);
      } else {
        tokens[r] = static_cast<TokenId>((rows[r].seed + rows[r].counter) % vocab);
      }
    }
    return absl::OkStatus();
  }
  absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) override {
    ++host_steps;
    return FakeBackend::Forward(batch, out);
  }
  int device_steps = 0;
  int host_steps = 0;
};

TEST(DeviceSamplingTest, GreedyRequestsSampleOnTheDeviceWithTheSameTokens) {
  DeviceSamplingBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  const std::vector<TokenId> prompt = MakePrompt(10, 1);
  GenerationResult r = RunOne(*engine, GreedyRequest(prompt, 12));
  EXPECT_EQ(r.tokens, FakeBackend::ReferenceGreedy(prompt, kVocab, 12));
  EXPECT_GT(backend.device_steps, 0);
  EXPECT_EQ(backend.host_steps, 0);
}

TEST(DeviceSamplingTest, LogprobsPenaltiesAndMinPStayOnTheHost) {
  for (int variant = 0; variant < 3; ++variant) {
    DeviceSamplingBackend backend(kVocab, 64, 4);
    auto engine = MakeEngine(&backend);
    const std::vector<TokenId> prompt = MakePrompt(6, 2);
    GenerateRequest request = GreedyRequest(prompt, 5);
    if (variant == 0) request.params.logprobs = 2;
    if (variant == 1) request.params.repetition_penalty = 1.3f;
    if (variant == 2) {
      request.params.temperature = 1.0f;
      request.params.min_p = 0.1f;
      request.params.seed = 3;
    }
    GenerationResult r = RunOne(*engine, request);
    EXPECT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.tokens.size(), 5u) << variant;
    EXPECT_EQ(backend.device_steps, 0) << variant;
    EXPECT_GT(backend.host_steps, 0) << variant;
  }
}

TEST(DeviceSamplingTest, RandomRowsCarryTheSeedAndAnAdvancingCounter) {
  DeviceSamplingBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  GenerateRequest request = GreedyRequest(MakePrompt(5, 3), 4);
  request.params.temperature = 0.8f;
  request.params.seed = 10;
  GenerationResult r = RunOne(*engine, request);
  ASSERT_TRUE(r.status.ok()) << r.status;
  // Draw k uses counter k: tokens (10 + 0), (10 + 1), ... mod vocab.
  EXPECT_EQ(r.tokens, (std::vector<TokenId>{10, 11, 12, 13}));
  EXPECT_EQ(r.rng_counters, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(backend.host_steps, 0);

  // A migrated request resumes the device's draws at its counter.
  request.resumed_output_token_ids = {10, 11};
  request.resumed_rng_counter = 2;
  GenerationResult resumed = RunOne(*engine, request);
  EXPECT_EQ(resumed.tokens, (std::vector<TokenId>{12, 13}));
  EXPECT_EQ(resumed.rng_counters, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(backend.host_steps, 0);
}

}  // namespace
}  // namespace tandem
