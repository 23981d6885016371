// Batch invariance: a sequence's logits are bit-identical whether it runs alone or mixed into
// batches with other sequences' prefill chunks and decode steps, wherever its blocks sit in the
// pool, and whatever the thread count.
#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "common/backend/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/common/backend/backend_harness.h"
#include "tests/common/backend/test_model.h"

namespace tandem::testing {
namespace {

constexpr int kBlockSize = 4;
constexpr int kDecodeSteps = 5;

// Logits per (sequence, position of the token whose logits they are).
using LogitsBySeq = std::map<std::pair<int, int>, std::vector<float>>;

struct Workload {
  std::vector<std::vector<TokenId>> sequences;  // prompt + decode tokens
  std::vector<int> prompt_lengths;
};

Workload MakeWorkload(int vocab) {
  Workload w;
  w.prompt_lengths = {13, 6, 9, 1};
  for (size_t s = 0; s < w.prompt_lengths.size(); ++s) {
    w.sequences.push_back(RandomTokens(w.prompt_lengths[s] + kDecodeSteps, vocab, 100 + s));
  }
  return w;
}

int BlocksFor(int tokens) { return (tokens + kBlockSize - 1) / kBlockSize; }

// Assigns each sequence its blocks: in order, or as a random permutation of a larger pool.
std::vector<Sequence> Place(const Workload& w, int pool_blocks, uint64_t shuffle_seed) {
  std::vector<int32_t> ids(pool_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  if (shuffle_seed != 0) std::shuffle(ids.begin(), ids.end(), std::mt19937(shuffle_seed));
  std::vector<Sequence> seqs;
  size_t next = 0;
  for (const auto& tokens : w.sequences) {
    Sequence s;
    s.tokens = tokens;
    for (int b = 0; b < BlocksFor(static_cast<int>(tokens.size())); ++b)
      s.blocks.push_back(ids[next++]);
    seqs.push_back(std::move(s));
  }
  return seqs;
}

// One forward step: (sequence, token count, want_logits) per item.
using Step = std::vector<std::tuple<int, int, bool>>;

void RunSteps(CpuBackend& backend, std::vector<Sequence>& seqs, const std::vector<Step>& steps,
              LogitsBySeq& out) {
  const int vocab = backend.config().vocab_size;
  for (const Step& step : steps) {
    std::vector<ForwardItem> items;
    std::vector<std::pair<int, int>> keys;
    for (const auto& [s, count, logits] : step) {
      items.push_back(seqs[s].Next(count, logits));
      if (logits) keys.emplace_back(s, seqs[s].cached - 1);
    }
    auto result = RunForward(backend, items);
    ASSERT_TRUE(result.ok()) << result.status();
    for (size_t r = 0; r < keys.size(); ++r) {
      out[keys[r]].assign(result->begin() + r * vocab, result->begin() + (r + 1) * vocab);
    }
  }
}

// Each sequence alone: one-shot prefill, then one decode step at a time.
LogitsBySeq RunAlone(const ModelWeights& weights, const Workload& w, int threads) {
  auto backend = MakeBackend(weights, 64, kBlockSize, threads);
  std::vector<Sequence> seqs = Place(w, 64, 0);
  LogitsBySeq out;
  for (size_t s = 0; s < seqs.size(); ++s) {
    std::vector<Step> steps = {{{static_cast<int>(s), w.prompt_lengths[s], true}}};
    for (int d = 0; d < kDecodeSteps - 1; ++d) steps.push_back({{static_cast<int>(s), 1, true}});
    RunSteps(*backend, seqs, steps, out);
  }
  return out;
}

// The same tokens in mixed batches: chunked prefills next to decode steps, logits wanted only
// by some items, shuffled block tables in a bigger pool.
LogitsBySeq RunMixed(const ModelWeights& weights, const Workload& w, int threads,
                     uint64_t shuffle_seed) {
  auto backend = MakeBackend(weights, 96, kBlockSize, threads);
  std::vector<Sequence> seqs = Place(w, 96, shuffle_seed);
  // Prompts: A=13 (5+8), B=6, C=9 (4+5), D=1.
  const std::vector<Step> steps = {
      {{0, 5, false}, {1, 6, true}},
      {{1, 1, true}, {0, 8, true}, {2, 4, false}},
      {{2, 5, true}, {0, 1, true}, {1, 1, true}, {3, 1, true}},
      {{3, 1, true}, {2, 1, true}, {1, 1, false}, {0, 1, true}},
      {{0, 1, true}, {1, 1, true}, {2, 1, true}, {3, 1, true}},
      {{3, 1, true}, {2, 1, true}, {0, 1, true}},
      {{3, 1, true}, {1, 1, true}, {2, 1, true}},
  };
  LogitsBySeq out;
  RunSteps(*backend, seqs, steps, out);
  return out;
}

class BatchInvarianceTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(BatchInvarianceTest, MixedBatchesGiveBitIdenticalLogits) {
  TestModel model(GetParam().config, GetParam().dtype, 21);
  const Workload w = MakeWorkload(GetParam().config.vocab_size);
  const LogitsBySeq alone = RunAlone(model.weights(), w, 2);
  const LogitsBySeq mixed = RunMixed(model.weights(), w, 2, /*shuffle_seed=*/5);
  int compared = 0;
  for (const auto& [key, logits] : mixed) {
    auto it = alone.find(key);
    if (it == alone.end()) continue;
    EXPECT_EQ(logits, it->second) << "sequence " << key.first << " position " << key.second;
    ++compared;
  }
  EXPECT_GE(compared, 15);
}

INSTANTIATE_TEST_SUITE_P(Models, BatchInvarianceTest, ::testing::ValuesIn(AllModelCases()),
                         [](const auto& info) { return info.param.name; });

TEST(BatchInvarianceTest, ThreadCountAndBlockPlacementDoNotChangeLogits) {
  ModelConfig config = AllModelCases()[1].config;
  TestModel model(config, DType::kBF16, 4);
  const Workload w = MakeWorkload(config.vocab_size);
  const LogitsBySeq base = RunMixed(model.weights(), w, 1, /*shuffle_seed=*/0);
  for (int threads : {2, 3}) {
    for (uint64_t shuffle : {0, 9, 77}) {
      EXPECT_EQ(RunMixed(model.weights(), w, threads, shuffle), base)
          << threads << " threads, shuffle " << shuffle;
    }
  }
}

TEST(CopyBlockTest, CopiedBlocksServeTheSameContext) {
  TestModel model(TinyLlamaConfig(), DType::kF32, 8);
  auto backend = MakeBackend(model.weights(), 16, kBlockSize);
  ASSERT_NE(backend, nullptr);
  const std::vector<TokenId> tokens = RandomTokens(11, 97, 3);
  Sequence original{tokens, {0, 1, 2}};
  ASSERT_TRUE(RunForward(*backend, {original.Next(10, false)}).ok());
  // Copy the 3 blocks elsewhere, then decode the 11th token from both copies.
  const std::vector<int32_t> copies = {9, 4, 12};
  for (int b = 0; b < 3; ++b) ASSERT_TRUE(backend->CopyBlock(original.blocks[b], copies[b]).ok());
  Sequence copy{tokens, copies, /*cached=*/10};
  auto from_copy = RunForward(*backend, {copy.Next(1, true)});
  auto from_original = RunForward(*backend, {original.Next(1, true)});
  ASSERT_TRUE(from_copy.ok() && from_original.ok());
  EXPECT_EQ(*from_copy, *from_original);

  EXPECT_EQ(backend->CopyBlock(0, 16).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->CopyBlock(-1, 2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(backend->CopyBlock(3, 3).ok());
}

TEST(KvPoolTest, WritesLandWhereTheLayoutSays) {
  TestModel model(TinyLlamaConfig(), DType::kF32, 8);
  auto backend = MakeBackend(model.weights(), 8, kBlockSize);
  ASSERT_NE(backend, nullptr);
  const std::vector<TokenId> tokens = RandomTokens(6, 97, 3);
  Sequence seq{tokens, {5, 2}};
  ASSERT_TRUE(RunForward(*backend, {seq.Next(6, false)}).ok());
  const KvLayout& layout = backend->kv_layout();
  const auto pool = backend->kv_pool();
  auto nonzero = [&](int layer, int kv, int block, int head, int slot) {
    const float* p = pool.data() + layout.Offset(layer, kv, block, head, slot);
    return std::any_of(p, p + layout.head_dim, [](float v) { return v != 0.0f; });
  };
  for (int layer = 0; layer < 2; ++layer) {
    for (int kv = 0; kv < 2; ++kv) {
      for (int head = 0; head < 4; ++head) {
        for (int slot = 0; slot < 4; ++slot) EXPECT_TRUE(nonzero(layer, kv, 5, head, slot));
        EXPECT_TRUE(nonzero(layer, kv, 2, head, 1));   // position 5
        EXPECT_FALSE(nonzero(layer, kv, 2, head, 2));  // position 6: not written
        EXPECT_FALSE(nonzero(layer, kv, 0, head, 0));  // an unused block
      }
    }
  }
}

}  // namespace
}  // namespace tandem::testing
