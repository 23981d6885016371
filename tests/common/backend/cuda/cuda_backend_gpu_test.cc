// The cuda backend against the cpu backend on random-weight models of every architecture feature:
// identical greedy tokens over short generations and logits within bf16 error; CUDA-graph decode
// steps against eager ones; chunked prefill against one-shot prefill. Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "common/backend/cpu_backend.h"
#include "common/backend/cuda/cuda_backend.h"
#include "gtest/gtest.h"
#include "tests/common/backend/backend_harness.h"
#include "tests/common/backend/test_model.h"
#include "tests/kernels/gpu_test_util.h"

namespace tandem {
namespace {

using testing::AllModelCases;
using testing::ModelCase;
using testing::RandomTokens;
using testing::TestModel;

constexpr int kBlockSize = 16;
constexpr int kBlocks = 64;

// The case's config with attention heads the GPU kernels take (head_dim 64, or 128 when asked).
ModelConfig GpuConfig(const ModelCase& c, int head_dim = 64) {
  ModelConfig config = c.config;
  config.head_dim = head_dim;
  config.max_position_embeddings = std::max(config.max_position_embeddings, 512);
  return config;
}

std::unique_ptr<CudaBackend> MakeCuda(const ModelWeights& weights, bool graphs = true,
                                      DType kv_dtype = DType::kBF16) {
  CudaBackendOptions o;
  o.kv_cache_dtype = kv_dtype;
  o.block_size = kBlockSize;
  o.num_kv_blocks = kBlocks;
  o.max_batch_tokens = 256;
  o.max_num_seqs = 8;
  o.cuda_graphs = graphs;
  auto backend = CudaBackend::Create(weights, o);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

std::unique_ptr<CpuBackend> MakeCpu(const ModelWeights& weights, DType kv_dtype = DType::kF32) {
  CpuBackendOptions o;
  o.kv_dtype = kv_dtype;
  o.block_size = kBlockSize;
  o.num_kv_blocks = kBlocks;
  o.num_threads = 2;
  auto backend = CpuBackend::Create(weights, o);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(*backend);
}

std::vector<float> RunBackend(Backend& backend, const std::vector<ForwardItem>& items) {
  int rows = 0;
  for (const ForwardItem& item : items) rows += LogitsRows(item);
  std::vector<float> logits(static_cast<size_t>(rows) * backend.config().vocab_size);
  const absl::Status status = backend.Forward({items}, {logits});
  EXPECT_TRUE(status.ok()) << status;
  return logits;
}

int Argmax(const float* row, int vocab) {
  return static_cast<int>(std::max_element(row, row + vocab) - row);
}

// The greedy token of `row` when its margin over the runner-up exceeds `margin`, else -1.
int ClearArgmax(const float* row, int vocab, double margin) {
  const int best = Argmax(row, vocab);
  float second = -INFINITY;
  for (int j = 0; j < vocab; ++j) {
    if (j != best) second = std::max(second, row[j]);
  }
  return row[best] - second > margin ? best : -1;
}

// Max |got - want| relative to max(1, max |want|).
double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  double scale = 1, err = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    err = std::max(err, std::isnan(d) ? INFINITY : d);
  }
  return err / scale;
}

std::vector<int32_t> Blocks(int first, int count) {
  std::vector<int32_t> blocks(count);
  for (int i = 0; i < count; ++i) blocks[i] = first + 3 * i;  // scattered through the pool
  return blocks;
}

class CudaBackendTest : public ::testing::TestWithParam<ModelCase> {};

// Meaningful with or without a GPU: the check runs in a fresh child process (gtest's threadsafe
// death-test style re-executes this binary) that hides every GPU before CUDA starts.
TEST(CudaBackendNoGpuTest, CreateWithoutAGpuIsAClearError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("CUDA_VISIBLE_DEVICES", "", 1);
        TestModel model(GpuConfig(AllModelCases()[0]), DType::kBF16, 1);
        auto backend = CudaBackend::Create(model.weights(), {});
        if (backend.ok()) {
          std::fprintf(stderr, "CudaBackend::Create succeeded with every GPU hidden\n");
          std::_Exit(1);
        }
        std::fprintf(stderr, "status: %s\n", backend.status().ToString().c_str());
        std::_Exit(backend.status().code() == absl::StatusCode::kUnavailable ? 0 : 2);
      },
      ::testing::ExitedWithCode(0), "status: UNAVAILABLE");
}

TEST_P(CudaBackendTest, GreedyTokensMatchTheCpuBackend) {
  TANDEM_REQUIRE_GPU();
  TestModel model(GpuConfig(GetParam()), DType::kBF16, 7);
  auto cuda = MakeCuda(model.weights());
  auto cpu = MakeCpu(model.weights());
  ASSERT_NE(cuda, nullptr);
  const int vocab = model.config().vocab_size;
  std::vector<TokenId> tokens = RandomTokens(37, vocab, 3);
  const std::vector<int32_t> blocks = Blocks(1, 6);
  ForwardItem prefill{tokens, 0, blocks, true};
  std::vector<float> want = RunBackend(*cpu, {prefill});
  std::vector<float> got = RunBackend(*cuda, {prefill});
  EXPECT_LT(RelativeError(got, want), 0.03);
  int compared = 0;
  for (int step = 0; step < 16; ++step) {
    // Greedy tokens must agree wherever the cpu backend's choice is clear of bf16 noise.
    double scale = 1;
    for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    const int clear = ClearArgmax(want.data(), vocab, 0.06 * scale);
    if (clear >= 0) {
      EXPECT_EQ(Argmax(got.data(), vocab), clear) << "step " << step;
      ++compared;
    }
    tokens.push_back(Argmax(want.data(), vocab));  // both follow the cpu backend's tokens
    ForwardItem decode{std::span<const TokenId>(&tokens.back(), 1),
                       static_cast<int32_t>(tokens.size()) - 1, blocks, true};
    want = RunBackend(*cpu, {decode});
    got = RunBackend(*cuda, {decode});
    EXPECT_LT(RelativeError(got, want), 0.03) << "step " << step;
  }
  EXPECT_GT(compared, 3) << "too few steps with a clear greedy choice to compare";
  EXPECT_GT(cuda->graph_replays(), 0);
}

TEST_P(CudaBackendTest, GraphDecodeStepsMatchEagerOnes) {
  TANDEM_REQUIRE_GPU();
  TestModel model(GpuConfig(GetParam()), DType::kBF16, 11);
  auto graphs = MakeCuda(model.weights(), true);
  auto eager = MakeCuda(model.weights(), false);
  ASSERT_NE(graphs, nullptr);
  ASSERT_NE(eager, nullptr);
  const int vocab = model.config().vocab_size;
  // Three sequences of different lengths, decoding together.
  std::vector<std::vector<TokenId>> seqs = {RandomTokens(5, vocab, 1), RandomTokens(40, vocab, 2),
                                            RandomTokens(17, vocab, 3)};
  std::vector<std::vector<int32_t>> tables = {Blocks(0, 4), Blocks(1, 4), Blocks(2, 4)};
  for (size_t s = 0; s < seqs.size(); ++s) {
    ForwardItem p{seqs[s], 0, tables[s], false};
    RunBackend(*graphs, {p});
    RunBackend(*eager, {p});
  }
  for (int step = 0; step < 5; ++step) {
    std::vector<TokenId> next = RandomTokens(3, vocab, 100 + step);
    std::vector<ForwardItem> items;
    for (size_t s = 0; s < seqs.size(); ++s) {
      seqs[s].push_back(next[s]);
      items.push_back({std::span<const TokenId>(&seqs[s].back(), 1),
                       static_cast<int32_t>(seqs[s].size()) - 1, tables[s], true});
    }
    EXPECT_LT(RelativeError(RunBackend(*graphs, items), RunBackend(*eager, items)), 0.01) << step;
  }
  EXPECT_GT(graphs->graph_replays(), 0);
  EXPECT_EQ(eager->graph_replays(), 0);
}

TEST_P(CudaBackendTest, ChunkedPrefillAfterACachedPrefixMatchesOneShot) {
  TANDEM_REQUIRE_GPU();
  TestModel model(GpuConfig(GetParam()), DType::kBF16, 5);
  auto a = MakeCuda(model.weights());
  auto b = MakeCuda(model.weights());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::vector<TokenId> tokens = RandomTokens(100, model.config().vocab_size, 9);
  const std::vector<int32_t> blocks = Blocks(4, 7);
  const std::vector<float> one_shot = RunBackend(*a, {{tokens, 0, blocks, true}});
  const std::span<const TokenId> all(tokens);
  RunBackend(*b,
             {{all.subspan(0, 48), 0, blocks, false}});  // three whole blocks, as a cached prefix
  RunBackend(*b, {{all.subspan(48, 29), 48, blocks, false}});
  const std::vector<float> chunked = RunBackend(*b, {{all.subspan(77), 77, blocks, true}});
  EXPECT_LT(RelativeError(chunked, one_shot), 0.02);
}

TEST_P(CudaBackendTest, DeviceSamplingGreedyEqualsArgmaxOfTheLogits) {
  TANDEM_REQUIRE_GPU();
  TestModel model(GpuConfig(GetParam()), DType::kBF16, 13);
  auto a = MakeCuda(model.weights());
  auto b = MakeCuda(model.weights());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const int vocab = model.config().vocab_size;
  const std::vector<TokenId> p1 = RandomTokens(20, vocab, 1), p2 = RandomTokens(33, vocab, 2);
  const std::vector<int32_t> t1 = Blocks(0, 3), t2 = Blocks(1, 3);
  const std::vector<ForwardItem> items = {{p1, 0, t1, true}, {p2, 0, t2, true}};
  const std::vector<float> logits = RunBackend(*a, items);
  const std::vector<DeviceSampling> rows(2);  // greedy
  std::vector<TokenId> tokens(2, -1);
  ASSERT_TRUE(b->ForwardAndSample({items}, rows, tokens).ok());
  EXPECT_EQ(tokens[0], Argmax(logits.data(), vocab));
  EXPECT_EQ(tokens[1], Argmax(logits.data() + vocab, vocab));
  // top_k 1 at any temperature is greedy too.
  const std::vector<TokenId> next = {tokens[0], tokens[1]};
  const std::vector<ForwardItem> step = {{std::span(next).subspan(0, 1), 20, t1, true},
                                         {std::span(next).subspan(1, 1), 33, t2, true}};
  const std::vector<float> step_logits = RunBackend(*a, step);
  std::vector<DeviceSampling> top1(2);
  for (DeviceSampling& r : top1) r = {0.7f, 1, 1.0f, 5, 0};
  ASSERT_TRUE(b->ForwardAndSample({step}, top1, tokens).ok());
  EXPECT_EQ(tokens[0], Argmax(step_logits.data(), vocab));
  EXPECT_EQ(tokens[1], Argmax(step_logits.data() + vocab, vocab));
}

// Speculative verification: each of max_num_seqs sequences asks for the logits of its last 5
// tokens, 5x the rows a decode step has (the first GPU run of draft models failed here: the
// logits buffers held max_num_seqs rows). Device sampling takes the same rows, and a decode step
// after the buffers grew still runs as a CUDA graph and matches.
TEST_P(CudaBackendTest, SeveralLogitsRowsPerSequenceMatchTheCpuBackend) {
  TANDEM_REQUIRE_GPU();
  TestModel model(GpuConfig(GetParam()), DType::kBF16, 17);
  auto cuda = MakeCuda(model.weights());
  auto cpu = MakeCpu(model.weights());
  ASSERT_NE(cuda, nullptr);
  const int vocab = model.config().vocab_size;
  constexpr int kSeqs = 8, kVerify = 5;
  std::vector<std::vector<TokenId>> prompts, verify, next;
  std::vector<std::vector<int32_t>> tables;
  for (int i = 0; i < kSeqs; ++i) {
    prompts.push_back(RandomTokens(10 + 3 * i, vocab, 30 + i));
    verify.push_back(RandomTokens(kVerify, vocab, 50 + i));
    next.push_back(RandomTokens(1, vocab, 70 + i));
    tables.push_back(Blocks(9 * (i / 3) + i % 3, 3));  // 3 blocks each, none shared
  }
  std::vector<ForwardItem> prefill, verify_step, decode_step;
  for (int i = 0; i < kSeqs; ++i) {
    const int32_t n = static_cast<int32_t>(prompts[i].size());
    prefill.push_back({prompts[i], 0, tables[i], false});
    verify_step.push_back({verify[i], n, tables[i], true, kVerify});
    decode_step.push_back({next[i], n + kVerify, tables[i], true});
  }
  RunBackend(*cpu, prefill);
  RunBackend(*cuda, prefill);
  const std::vector<float> want = RunBackend(*cpu, verify_step);
  const std::vector<float> got = RunBackend(*cuda, verify_step);
  ASSERT_EQ(got.size(), size_t{kSeqs * kVerify} * vocab);
  EXPECT_LT(RelativeError(got, want), 0.03);
  // The same pass again (it rewrites the same KV) with device sampling: greedy = argmax per row.
  const std::vector<DeviceSampling> greedy(kSeqs * kVerify);
  std::vector<TokenId> sampled(kSeqs * kVerify, -1);
  ASSERT_TRUE(cuda->ForwardAndSample({verify_step}, greedy, sampled).ok());
  for (int r = 0; r < kSeqs * kVerify; ++r) {
    EXPECT_EQ(sampled[r], Argmax(got.data() + size_t{static_cast<size_t>(r)} * vocab, vocab))
        << "row " << r;
  }
  const int64_t replays = cuda->graph_replays();
  EXPECT_LT(RelativeError(RunBackend(*cuda, decode_step), RunBackend(*cpu, decode_step)), 0.03);
  EXPECT_GT(cuda->graph_replays(), replays);
}

// fp8 KV: the scales a calibration over a bf16 pool picks against the cpu backend's (over an f32
// pool), then a prefill and 16 greedy steps against the cpu backend with fp8 KV (the same codes
// but where bf16 and f32 compute land on either side of a rounding boundary).
TEST_P(CudaBackendTest, Fp8KvMatchesTheCpuBackendsFp8Kv) {
  TANDEM_REQUIRE_GPU();
  TestModel model(GpuConfig(GetParam()), DType::kBF16, 7);
  auto cuda = MakeCuda(model.weights(), true, DType::kFP8E4M3);
  auto cpu = MakeCpu(model.weights(), DType::kFP8E4M3);
  auto bf16 = MakeCuda(model.weights(), true, DType::kBF16);
  ASSERT_NE(cuda, nullptr);
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(cuda->kv_layout().dtype, DType::kFP8E4M3);
  EXPECT_NE(cuda->kv_layout().scale_fingerprint, 0u);
  EXPECT_EQ(cuda->kv_pool_bytes() * 2, bf16->kv_pool_bytes());  // the same blocks, half the bytes
  const std::vector<float>& a = cuda->kv_scales().values;
  const std::vector<float>& b = cpu->kv_scales().values;
  ASSERT_EQ(a.size(), b.size());
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    same += a[i] == b[i] ? 1 : 0;
    EXPECT_TRUE(a[i] == b[i] || a[i] == 2 * b[i] || 2 * a[i] == b[i]) << i;
  }
  std::printf("[          ] %d of %zu scales equal to the cpu backend's\n", same, a.size());
  EXPECT_GE(same * 4, static_cast<int>(a.size()) * 3);

  const int vocab = model.config().vocab_size;
  std::vector<TokenId> tokens = RandomTokens(37, vocab, 3);
  const std::vector<int32_t> blocks = Blocks(1, 6);
  ForwardItem prefill{tokens, 0, blocks, true};
  std::vector<float> want = RunBackend(*cpu, {prefill});
  std::vector<float> got = RunBackend(*cuda, {prefill});
  std::vector<float> got_bf16 = RunBackend(*bf16, {prefill});
  double worst = RelativeError(got, want), worst_vs_bf16 = RelativeError(got, got_bf16);
  int compared = 0;
  for (int step = 0; step < 16; ++step) {
    double scale = 1;
    for (float v : want) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    const int clear = ClearArgmax(want.data(), vocab, 0.1 * scale);
    if (clear >= 0) {
      EXPECT_EQ(Argmax(got.data(), vocab), clear) << "step " << step;
      ++compared;
    }
    tokens.push_back(Argmax(want.data(), vocab));
    ForwardItem decode{std::span<const TokenId>(&tokens.back(), 1),
                       static_cast<int32_t>(tokens.size()) - 1, blocks, true};
    want = RunBackend(*cpu, {decode});
    got = RunBackend(*cuda, {decode});
    got_bf16 = RunBackend(*bf16, {decode});
    worst = std::max(worst, RelativeError(got, want));
    worst_vs_bf16 = std::max(worst_vs_bf16, RelativeError(got, got_bf16));
  }
  std::printf("[          ] fp8 logits: max relative error %.4f vs cpu fp8, %.4f vs cuda bf16\n",
              worst, worst_vs_bf16);
  EXPECT_LT(worst, 0.1);
  EXPECT_GT(compared, 3) << "too few steps with a clear greedy choice to compare";
  EXPECT_GT(cuda->graph_replays(), 0);
}

// fp8 KV through the other paths: graph decode steps against eager ones, chunked prefill against
// one-shot (both read every key from the pool, so the same codes), and a verification pass of
// several logits rows per sequence against decoding them one by one.
TEST_P(CudaBackendTest, Fp8KvGraphsChunksAndVerificationAgree) {
  TANDEM_REQUIRE_GPU();
  TestModel model(GpuConfig(GetParam()), DType::kBF16, 11);
  auto graphs = MakeCuda(model.weights(), true, DType::kFP8E4M3);
  auto eager = MakeCuda(model.weights(), false, DType::kFP8E4M3);
  ASSERT_NE(graphs, nullptr);
  ASSERT_NE(eager, nullptr);
  EXPECT_EQ(graphs->kv_scales().values, eager->kv_scales().values);
  const int vocab = model.config().vocab_size;
  const std::vector<TokenId> tokens = RandomTokens(100, vocab, 9);
  const std::vector<int32_t> blocks = Blocks(4, 7);
  const std::span<const TokenId> all(tokens);
  const std::vector<float> one_shot = RunBackend(*graphs, {{all.subspan(0, 96), 0, blocks, true}});
  RunBackend(*eager, {{all.subspan(0, 48), 0, blocks, false}});
  RunBackend(*eager, {{all.subspan(48, 29), 48, blocks, false}});
  EXPECT_LT(RelativeError(RunBackend(*eager, {{all.subspan(77, 19), 77, blocks, true}}), one_shot),
            0.02);
  // Decode 96..99 one at a time on the graphs backend; verify them in one pass on the eager one.
  std::vector<float> stepwise;
  for (int p = 96; p < 100; ++p) {
    const std::vector<float> row = RunBackend(*graphs, {{all.subspan(p, 1), p, blocks, true}});
    stepwise.insert(stepwise.end(), row.begin(), row.end());
  }
  EXPECT_GT(graphs->graph_replays(), 0);
  const std::vector<float> verified =
      RunBackend(*eager, {{all.subspan(96, 4), 96, blocks, true, 4}});
  EXPECT_LT(RelativeError(verified, stepwise), 0.02);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaBackendTest, ::testing::ValuesIn(AllModelCases()),
                         [](const auto& info) { return info.param.name; });

TEST(CudaBackendHeadDim128Test, MatchesTheCpuBackend) {
  TANDEM_REQUIRE_GPU();
  TestModel model(GpuConfig(AllModelCases()[1], 128), DType::kBF16, 21);
  auto cuda = MakeCuda(model.weights());
  auto cpu = MakeCpu(model.weights());
  ASSERT_NE(cuda, nullptr);
  const std::vector<TokenId> tokens = RandomTokens(70, model.config().vocab_size, 4);
  const std::vector<int32_t> blocks = Blocks(0, 5);
  EXPECT_LT(RelativeError(RunBackend(*cuda, {{tokens, 0, blocks, true}}),
                          RunBackend(*cpu, {{tokens, 0, blocks, true}})),
            0.03);
}

}  // namespace
}  // namespace tandem
